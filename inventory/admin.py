"""Admin: clusters are edited here; mirrored objects are read-only (the watchers own them)."""

from django.contrib import admin

from .models import Cluster, Device, DeviceClass, DeviceTaintRule, Node, ResourceSlice, SharedCounterSet, SyncState


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows copied from a cluster: editing them here would only be overwritten by the next event."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


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


class KubeObjectAdmin(ReadOnlyAdmin):
    list_display = ("name", "namespace", "cluster", "resource_version", "creation_timestamp")
    list_filter = ("cluster",)
    search_fields = ("name", "namespace", "uid")


@admin.register(Node)
class NodeAdmin(KubeObjectAdmin):
    list_display = ("name", "cluster", "ready", "unschedulable", "resource_version")


@admin.register(DeviceClass)
class DeviceClassAdmin(KubeObjectAdmin):
    pass


@admin.register(ResourceSlice)
class ResourceSliceAdmin(KubeObjectAdmin):
    list_display = ("name", "cluster", "driver", "pool", "node_name", "pool_generation", "resource_version")
    list_filter = ("cluster", "driver")
    search_fields = ("name", "pool", "node_name", "uid")


@admin.register(DeviceTaintRule)
class DeviceTaintRuleAdmin(KubeObjectAdmin):
    pass


@admin.register(Device)
class DeviceAdmin(ReadOnlyAdmin):
    list_display = ("name", "driver", "pool", "node_name", "cluster")
    list_filter = ("cluster", "driver")
    search_fields = ("name", "pool", "node_name")


@admin.register(SharedCounterSet)
class SharedCounterSetAdmin(ReadOnlyAdmin):
    list_display = ("name", "slice", "cluster")
