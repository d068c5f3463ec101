from django.db import models


class SignInIdentity(models.Model):
    """The identity-provider identity of a user who signs in with OIDC, refreshed at every sign-in.

    `sources` says where each right came from ([right, group] pairs); `kube_username` and `kube_groups`
    are the names the cluster's own OIDC authenticator gives the user (prefixes applied): release
    actions impersonate them. No token is stored.
    """

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="sign_in_identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    sources = models.JSONField(default=list, blank=True)
    kube_username = models.CharField(max_length=300, blank=True)
    kube_groups = models.JSONField(default=list, blank=True)
    signed_in_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="unique_oidc_subject")]

    def __str__(self):
        return f"{self.user} ({self.subject} at {self.issuer})"
