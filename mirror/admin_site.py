"""The Django admin for the admin role: Django's admin lets in staff users with model permissions,
but gpudash's roles are groups (mirror/roles.py), so a user made admin with `grant_role`, the demo
user or an OIDC group mapping would see "You don't have permission to view or edit anything".

The site lets in staff and every admin-role user; AdminRoleBackend gives the admin role every model
permission (as Django does for superusers). Read-only model admins (mirrored objects, the audit log)
still refuse to add, change or delete whatever the role.
"""

from django.contrib import admin
from django.contrib.auth.backends import BaseBackend

from mirror import roles


class GpudashAdminSite(admin.AdminSite):
    site_header = "gpudash administration"
    site_title = "gpudash admin"
    index_title = "Clusters, access and mirrored objects"
    site_url = "/"

    def has_permission(self, request):
        user = request.user
        return user.is_active and (user.is_staff or roles.has_role(user, roles.ADMIN))


class AdminRoleBackend(BaseBackend):
    """Permissions only (it authenticates nobody): the admin role holds every model permission."""

    def has_perm(self, user_obj, perm, obj=None):
        return user_obj.is_active and roles.role_of(user_obj) == roles.ADMIN

    def has_module_perms(self, user_obj, app_label):
        return user_obj.is_active and roles.role_of(user_obj) == roles.ADMIN
