"""Admin: clusters are edited here; what the sync keeps is read-only (the watchers own it); access profiles."""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

from mirror.models import AccessProfile, Cluster, SyncState


class AccessProfileInline(admin.StackedInline):
    model = AccessProfile
    can_delete = True
    verbose_name_plural = "namespace scope (empty = all namespaces)"


class GpudashUserAdmin(UserAdmin):
    # Roles are the groups viewer / operator / admin; the scope sits beside them on the user page.
    inlines = (*UserAdmin.inlines, AccessProfileInline)


admin.site.unregister(User)
admin.site.register(User, GpudashUserAdmin)


@admin.register(AccessProfile)
class AccessProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "namespaces", "driver_namespaces")
    search_fields = ("user__username",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows copied from a cluster: editing them here would only be overwritten by the next event."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class KubeObjectAdmin(ReadOnlyAdmin):
    list_display = ("name", "namespace", "cluster", "resource_version", "creation_timestamp")
    list_filter = ("cluster",)
    search_fields = ("name", "namespace", "uid")


class SyncStateInline(admin.TabularInline):
    model = SyncState
    extra = 0
    can_delete = False
    fields = (
        "kind",
        "status",
        "api_version",
        "resource_version",
        "object_count",
        "last_event_at",
        "last_error",
        "last_error_at",
        "lease_holder",
        "lease_expires",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled", "read_only", "is_snapshot", "server_version", "discovered_at")
    list_filter = ("enabled", "read_only", "is_snapshot")
    search_fields = ("name",)
    fields = (
        "name",
        "kubeconfig",
        "context",
        "in_cluster",
        "read_only",
        "enabled",
        "features",
        "is_snapshot",
        "server_version",
        "served_resource_versions",
        "discovered_at",
    )
    readonly_fields = ("is_snapshot", "server_version", "served_resource_versions", "discovered_at")
    inlines = [SyncStateInline]


@admin.register(SyncState)
class SyncStateAdmin(ReadOnlyAdmin):
    list_display = (
        "cluster",
        "kind",
        "status",
        "object_count",
        "events_applied",
        "malformed_count",
        "last_event_at",
        "last_error_at",
        "lease_holder",
    )
    list_filter = ("status", "kind", "cluster")
