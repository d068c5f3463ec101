"""Pool summaries: what the slices of one (driver, pool) say together, and what is inconsistent.

A pool is complete when, for its newest generation, the number of slices equals resourceSliceCount;
slices of an older generation are stale (the allocator ignores them once the newer one is complete).
"""

from collections import defaultdict

from django.apps import apps as django_apps
from django.db.models import Q

from dra.gcpause import collector_paused


def pool_summaries(slices_qs):
    # Building ~5,000 pools makes tens of thousands of small dicts and sets (no reference cycles); left
    # on, the cyclic garbage collector runs full collections over the whole process heap meanwhile,
    # which cost more than the loop itself. Paused just here.
    with collector_paused():
        return _pool_summaries(slices_qs)


def _pool_summaries(slices_qs):
    # Device counts are stored on each slice by the sync (ResourceSlice.device_count): the page
    # reads the slices alone, not the device table.
    rows = slices_qs.order_by().values(
        "id",
        "cluster_id",
        "cluster__name",
        "driver",
        "pool",
        "pool_generation",
        "resource_slice_count",
        "node_name",
        "device_count",
    )
    pools = defaultdict(lambda: {"generations": {}, "nodes": set()})
    for r in rows:
        p = pools[(r["cluster_id"], r["cluster__name"], r["driver"], r["pool"])]
        gen = p["generations"].setdefault(r["pool_generation"], {"slices": 0, "devices": 0, "counts": set()})
        gen["slices"] += 1
        gen["devices"] += r["device_count"]
        gen["counts"].add(r["resource_slice_count"])
        if r["node_name"]:
            p["nodes"].add(r["node_name"])
    out = []
    for (cluster_id, cluster_name, driver, pool), p in pools.items():
        newest = max(p["generations"])
        gen = p["generations"][newest]
        problems = []
        if len(gen["counts"]) > 1:
            problems.append(f"slices of generation {newest} disagree on resourceSliceCount: {sorted(gen['counts'])}")
        expected = max(gen["counts"])
        if gen["slices"] < expected:
            problems.append(f"incomplete: {gen['slices']} of {expected} slices published")
        elif gen["slices"] > expected:
            problems.append(f"{gen['slices']} slices but resourceSliceCount is {expected}")
        stale = sorted(g for g in p["generations"] if g != newest)
        if stale:
            problems.append(f"stale slices of generation {', '.join(map(str, stale))}")
        if len(p["nodes"]) > 1:
            problems.append(f"slices name {len(p['nodes'])} different nodes")
        out.append(
            {
                "cluster_id": cluster_id,
                "cluster_name": cluster_name,
                "driver": driver,
                "pool": pool,
                "generation": newest,
                "slices": gen["slices"],
                "expected": expected,
                "devices": gen["devices"],
                "stale_slices": sum(g["slices"] for k, g in p["generations"].items() if k != newest),
                "nodes": sorted(p["nodes"]),
                "problems": problems,
            }
        )
    out.sort(key=lambda r: (r["cluster_name"], r["driver"], r["pool"]))
    return out


def with_partition_capacity(rows):
    """Add to these pool rows (a page of pool_summaries) what their partitions can still give, as
    the per-node summary stores it (dra/partitions.py): "profiles" {profile: {"free", "total"}}, per
    profile how many more partitions one claim could get (alternatives, never summed across
    profiles), and "stranded", whole GPUs partly used by partitions."""
    summary_model = django_apps.get_model("inventory", "NodeDeviceSummary")
    keys = {(r["cluster_id"], r["driver"], r["pool"]): r for r in rows}
    if not keys:
        return rows
    found = summary_model.objects.filter(Q(kind="partition") | Q(n_gpus_stranded__gt=0)).filter(
        cluster_id__in={k[0] for k in keys}, pool__in={k[2] for k in keys}
    )
    for cid, driver, pool, profiles, stranded in found.values_list(
        "cluster_id", "driver", "pool", "partition_free", "n_gpus_stranded"
    ).order_by():
        row = keys.get((cid, driver, pool))
        if row is None:
            continue
        row["stranded"] = row.get("stranded", 0) + stranded
        mine = row.setdefault("profiles", {})
        for profile, (free, total) in (profiles or {}).items():
            p = mine.setdefault(profile, {"free": 0, "total": 0})
            p["free"] += free
            p["total"] += total
    return rows
