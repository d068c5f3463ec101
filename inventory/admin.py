"""Admin: the mirrored inventory objects, read-only (the watchers own them; clusters: mirror/admin.py)."""

from django.contrib import admin

from mirror.admin import KubeObjectAdmin, ReadOnlyAdmin

from .models import Device, DeviceClass, DeviceTaintRule, Node, ResourceSlice, SharedCounterSet


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
