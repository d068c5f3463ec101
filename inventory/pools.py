"""Pool summaries: what the slices of one (driver, pool) say together, and what is inconsistent.

A pool is complete when, for its newest generation, the number of slices equals resourceSliceCount;
slices of an older generation are stale (the allocator ignores them once the newer one is complete).
"""

from collections import defaultdict

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
