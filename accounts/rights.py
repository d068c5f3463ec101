"""Apply a group mapping's Rights to a user (role group + AccessProfile), replacing what the last sign-in set."""

from django.contrib.auth.models import Group

from mirror import roles
from mirror.models import AccessProfile


def apply_rights(user, rights):
    user.groups.remove(*Group.objects.filter(name__in=roles.ROLES))
    if rights.role:
        user.groups.add(Group.objects.get_or_create(name=rights.role)[0])
    # An empty list means every namespace in AccessProfile; a user with no role sees nothing anyway.
    AccessProfile.objects.update_or_create(user=user, defaults={"namespaces": rights.namespaces or []})
    # Signed-in identities are never staff or superusers: the Django admin stays for local accounts.
    if user.is_staff or user.is_superuser:
        user.is_staff = user.is_superuser = False
        user.save(update_fields=["is_staff", "is_superuser"])


def kube_identity(user, cluster):
    """(username, groups) to impersonate on `cluster` for this user's writes, or None (service account)."""
    from django.conf import settings

    clusters = getattr(settings, "GPUDASH_KUBE_IMPERSONATION", ())
    if "*" not in clusters and cluster.name not in clusters:
        return None
    identity = getattr(user, "sign_in_identity", None) if getattr(user, "is_authenticated", False) else None
    if identity is None or not identity.kube_username:
        return None
    return identity.kube_username, list(identity.kube_groups)
