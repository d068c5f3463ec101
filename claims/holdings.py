"""What claims tells inventory about the devices its claims hold (registered in mirror/holdings.py)."""

from mirror.holdings import Holding
from mirror.roles import scope_queryset

from .models import AllocationResult, Finding


def holdings(keys):
    """[Holding] of the devices with these (cluster_id, driver, pool, device) keys: every allocation
    result naming one, exclusive, shared or with admin access, and whether its claim is stuck."""
    keys = set(keys)
    if not keys:
        return []
    results = AllocationResult.objects.filter(cluster_id__in={k[0] for k in keys}, pool__in={k[2] for k in keys})
    rows = [
        r
        for r in results.values_list(
            "cluster_id",
            "driver",
            "pool",
            "device",
            "admin_access",
            "share_id",
            "claim__namespace",
            "claim__name",
            "claim__uid",
        )
        if r[:4] in keys
    ]
    stuck = (
        set(Finding.objects.stuck().filter(claim_uid__in={r[8] for r in rows}).values_list("claim_uid", flat=True))
        if rows
        else set()
    )
    return [
        Holding(cid, driver, pool, device, ns, name, uid, admin, bool(share), uid in stuck)
        for cid, driver, pool, device, admin, share, ns, name, uid in rows
    ]


def device_allocations(cluster_id, driver, pool, device, user):
    """The allocation results naming one device, of claims `user` may see, with their claims."""
    results = AllocationResult.objects.filter(
        cluster_id=cluster_id, driver=driver, pool=pool, device=device
    ).select_related("claim")
    return scope_queryset(results, user, field="claim__namespace")
