"""Roles (viewer < operator < admin) and namespace scope, shared by the UI, the API and websockets.

A role is a Django group of that name; superusers are admins. Namespace scope comes from the
user's AccessProfile; cluster-scoped objects (nodes, slices, devices, classes) are visible to all.
"""

from django.contrib.auth.models import Group

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
_RANK = {None: 0, VIEWER: 1, OPERATOR: 2, ADMIN: 3}


def role_of(user):
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in (ADMIN, OPERATOR, VIEWER):
        if role in names:
            return role
    return None


def has_role(user, role):
    return _RANK[role_of(user)] >= _RANK[role]


def visible_namespaces(user):
    """None for every namespace, otherwise the set the user may see."""
    if role_of(user) == ADMIN:
        return None
    profile = getattr(user, "access_profile", None) if user.is_authenticated else None
    if profile is None or not profile.namespaces:
        return None
    return set(profile.namespaces)


def driver_namespaces(user):
    """None when the user may see every DRA driver pod (and its log), else the namespaces whose driver
    pods it may see: its own, plus the driver namespaces an admin granted (AccessProfile.driver_namespaces)."""
    scope = visible_namespaces(user)
    if scope is None:
        return None
    return scope | set(user.access_profile.driver_namespaces or ())


def can_see_namespace(user, namespace):
    scope = visible_namespaces(user)
    return scope is None or namespace in scope


def can_operate(user, namespace=None):
    """May this user run previews and release actions (in this namespace)?"""
    return has_role(user, OPERATOR) and (namespace is None or can_see_namespace(user, namespace))


def scope_queryset(queryset, user, field="namespace"):
    """Restrict a queryset of namespaced rows to what the user may see."""
    scope = visible_namespaces(user)
    return queryset if scope is None else queryset.filter(**{f"{field}__in": scope})


def grant(user, role, namespaces=None):
    """Give a user one role (replacing any other) and optionally a namespace scope."""
    from mirror.models import AccessProfile

    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    if namespaces is not None:
        AccessProfile.objects.update_or_create(user=user, defaults={"namespaces": sorted(namespaces)})
