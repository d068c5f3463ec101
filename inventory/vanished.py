"""Tombstones of devices and ResourceSlices that went away (models.Vanished), so their pages can say
what was last known instead of a bare 404.

A slice write deletes its device rows and builds new ones, so "gone" is decided by keys: the apply
path takes `snapshot` of the rows it is about to replace and, after the write, `record` keeps those
whose (driver, pool, device) or slice name no longer exists in the cluster.
"""

from datetime import timedelta

from django.utils import timezone

from .models import Device, ResourceSlice, Vanished

DEVICE_FIELDS = (
    "driver",
    "pool",
    "name",
    "slice__name",
    "node_name",
    "kind",
    "attributes",
    "capacity",
    "held_by_namespace",
    "held_by_name",
)


def snapshot(slice_ids):
    """The devices and slices of `slice_ids` as they are before the write."""
    if not slice_ids:
        return [], []
    devices = list(Device.objects.filter(slice_id__in=slice_ids).values(*DEVICE_FIELDS))
    slices = list(ResourceSlice.objects.filter(pk__in=slice_ids).values("name", "driver", "pool", "node_name"))
    names = {}
    for d in devices:
        names.setdefault(d["slice__name"], []).append(d["name"])
    for s in slices:
        s["devices"] = sorted(names.get(s["name"], []))
    return devices, slices


def record(cluster, before, now=None):
    """Tombstones for what of `before` (a snapshot) the cluster no longer has; returns how many."""
    devices, slices = before
    if not devices and not slices:
        return 0
    now = now or timezone.now()
    live_devices = set(
        Device.objects.filter(
            cluster=cluster, pool__in={d["pool"] for d in devices}, name__in={d["name"] for d in devices}
        ).values_list("driver", "pool", "name")
    )
    live_slices = set(
        ResourceSlice.objects.filter(cluster=cluster, name__in=[s["name"] for s in slices]).values_list(
            "name", flat=True
        )
    )
    rows = [
        Vanished(
            cluster=cluster,
            kind=Vanished.DEVICE,
            driver=d["driver"],
            pool=d["pool"],
            name=d["name"],
            slice_name=d["slice__name"],
            node_name=d["node_name"],
            device_kind=d["kind"],
            attributes=d["attributes"],
            capacity=d["capacity"],
            held_by_namespace=d["held_by_namespace"],
            held_by_name=d["held_by_name"],
            vanished_at=now,
        )
        for d in devices
        if (d["driver"], d["pool"], d["name"]) not in live_devices
    ]
    rows += [
        Vanished(
            cluster=cluster,
            kind=Vanished.SLICE,
            driver=s["driver"],
            pool=s["pool"],
            name=s["name"],
            node_name=s["node_name"],
            devices=s["devices"],
            vanished_at=now,
        )
        for s in slices
        if s["name"] not in live_slices
    ]
    # A key that vanishes again (a driver that keeps restarting) keeps one row, with the latest facts.
    Vanished.objects.bulk_create(
        rows,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=("cluster", "kind", "driver", "pool", "name"),
        update_fields=(
            "slice_name",
            "node_name",
            "device_kind",
            "attributes",
            "capacity",
            "devices",
            "held_by_namespace",
            "held_by_name",
            "vanished_at",
        ),
    )
    return len(rows)


def last_device(cluster_name, driver, pool, name):
    return (
        Vanished.objects.select_related("cluster")
        .filter(cluster__name=cluster_name, kind=Vanished.DEVICE, driver=driver, pool=pool, name=name)
        .first()
    )


def last_slice(cluster_name, name):
    return (
        Vanished.objects.select_related("cluster")
        .filter(cluster__name=cluster_name, kind=Vanished.SLICE, name=name)
        .order_by("-vanished_at")
        .first()
    )


def prune(days, now=None):
    """Drop tombstones older than `days`: the fleet history's retention (monitoring's hourly history prune
    runs this with monitoring.history.retention_days())."""
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = Vanished.objects.filter(vanished_at__lt=cutoff).delete()
    return deleted
