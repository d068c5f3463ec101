"""Admin: who signed in through the identity provider, with what groups (written at every sign-in)."""

from django.contrib import admin

from mirror.admin import ReadOnlyAdmin

from .models import SignInIdentity


@admin.register(SignInIdentity)
class SignInIdentityAdmin(ReadOnlyAdmin):
    list_display = ("user", "subject", "issuer", "kube_username", "signed_in_at")
    search_fields = ("user__username", "subject", "kube_username")

    def has_delete_permission(self, request, obj=None):
        # Deleting the identity (or the user) makes the next sign-in start afresh; nothing else edits it.
        return request.user.is_superuser
