"""What inventory tells the claims side about the published fleet (registered in mirror/published.py)."""

from collections import defaultdict

from .models import Device, Node


def published_devices(cluster_id, pools=None):
    """{(driver, pool, name): [allow_multiple_allocations of each published copy]} of a cluster's
    devices (a device name can repeat across slices of a pool while a driver republishes)."""
    rows = Device.objects.filter(cluster_id=cluster_id)
    if pools is not None:
        rows = rows.filter(pool__in=pools)
    out = defaultdict(list)
    for driver, pool, name, multi in rows.values_list("driver", "pool", "name", "allow_multiple_allocations"):
        out[(driver, pool, name)].append(multi)
    return out


def nodes(cluster_id):
    """{name: Node} of a cluster, without their raw JSON and labels (readiness is what callers read)."""
    return {n.name: n for n in Node.objects.filter(cluster_id=cluster_id).defer("raw", "labels")}
