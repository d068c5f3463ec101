"""API permissions built on mirror.roles: the same viewer < operator < admin ladder as the UI.

Anonymous requests fail authentication (401); a signed-in user without the role gets 403.
"""

from rest_framework.permissions import BasePermission

from mirror import roles


class _RolePermission(BasePermission):
    role = roles.VIEWER

    def has_permission(self, request, view):
        user = request.user
        if not (user and user.is_authenticated):
            return False  # DRF turns this into 401 because the request was not authenticated
        return roles.has_role(user, self.role)


class IsViewer(_RolePermission):
    message = "Your account has no gpudash role (viewer, operator or admin)."
    role = roles.VIEWER


class IsOperator(_RolePermission):
    message = "This action needs the operator role."
    role = roles.OPERATOR


class IsAdmin(_RolePermission):
    message = "This action needs the admin role."
    role = roles.ADMIN
