"""What the device health refresh costs the sync (health/timeline.py refresh, called after each batch of
slices, DeviceTaintRules, claims or pods) on bench_api's fleet: with nothing troubled, with 1 % of the
devices tainted and pods reporting devices Unhealthy (the first refresh writes the timeline, later ones
find nothing changed), and a DeviceTaintRule over a whole pool.

    .venv/bin/python bench/bench_health.py [--nodes 5000 --claims 20000] [--tainted 0.01] [--reports 200]

Prints milliseconds per refresh (median of --runs) and the rows it wrote. Needs PostgreSQL
(BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/gpudash_bench_health).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleetdb import add_fleet_arguments, load_average, open_fleet  # noqa: E402


def timed(fn, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    add_fleet_arguments(parser)
    parser.add_argument("--tainted", type=float, default=0.01, help="Share of devices given a NoSchedule taint.")
    parser.add_argument("--reports", type=int, default=200, help="Pods reporting one of their devices Unhealthy.")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cluster = open_fleet(args, "postgres://postgres@127.0.0.1:5432/gpudash_bench_health")

    from claims.models import AllocationResult, PodClaimRef, PodResourceHealth
    from health import timeline
    from health.models import DeviceHealth, HealthChange
    from inventory.models import Device, DeviceTaintRule

    def reset():
        Device.objects.filter(cluster=cluster).exclude(taints=[]).update(taints=[])
        PodResourceHealth.objects.filter(cluster=cluster).delete()
        DeviceTaintRule.objects.filter(cluster=cluster).delete()
        timeline.refresh(cluster)
        HealthChange.objects.filter(cluster=cluster).delete()

    reset()
    devices = Device.objects.filter(cluster=cluster).count()
    print(f"fleet: {devices:,} devices; load {load_average()}")
    ms, _ = timed(lambda: timeline.refresh(cluster), args.runs)
    print(f"refresh, nothing troubled:                  {ms:8.1f} ms")
    ms, _ = timed(lambda: timeline.refresh(cluster, "Pod"), args.runs)
    print(f"refresh after a Pod batch, nothing troubled: {ms:7.1f} ms")

    step = max(int(1 / args.tainted), 1) if args.tainted else 0
    ids = (
        list(Device.objects.filter(cluster=cluster).order_by("id").values_list("id", flat=True))[::step] if step else []
    )
    taint = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    Device.objects.filter(id__in=ids).update(taints=taint)
    refs = list(
        PodClaimRef.objects.filter(cluster=cluster).exclude(claim_name="").select_related("pod")[: args.reports * 2]
    )
    results = {}
    for ns, name, driver, pool, device in AllocationResult.objects.filter(
        cluster=cluster, claim__name__in={r.claim_name for r in refs}
    ).values_list("claim__namespace", "claim__name", "driver", "pool", "device"):
        results.setdefault((ns, name), (driver, pool, device))
    rows = []
    for ref in refs:
        key = results.get((ref.namespace, ref.claim_name))
        if key and len(rows) < args.reports:
            rows.append(
                PodResourceHealth(
                    cluster=cluster,
                    pod=ref.pod,
                    namespace=ref.namespace,
                    container="main",
                    claim_name=ref.pod_claim_name,
                    request="gpu",
                    resource_claim_name=ref.claim_name,
                    resource_id="/".join(key),
                    health="Unhealthy",
                    driver=key[0],
                    pool=key[1],
                    device=key[2],
                )
            )
    PodResourceHealth.objects.bulk_create(rows)
    start = time.perf_counter()
    written = timeline.refresh(cluster)
    first = (time.perf_counter() - start) * 1000
    troubled = DeviceHealth.objects.filter(cluster=cluster).count()
    print(
        f"refresh, {len(ids):,} tainted + {len(rows)} reports, first: {first:8.1f} ms "
        f"({len(written):,} timeline rows, {troubled:,} troubled devices)"
    )
    ms, _ = timed(lambda: timeline.refresh(cluster), args.runs)
    print(f"refresh, same trouble, nothing changed:     {ms:8.1f} ms")
    ms, _ = timed(lambda: timeline.refresh(cluster, "Pod"), args.runs)
    print(f"refresh after a Pod batch (taints kept):    {ms:8.1f} ms")

    pool = Device.objects.filter(cluster=cluster).values_list("driver", "pool").first()
    DeviceTaintRule.objects.create(
        cluster=cluster,
        name="bench-drain",
        uid="bench-drain",
        resource_version="1",
        raw={
            "metadata": {"name": "bench-drain"},
            "spec": {
                "deviceSelector": {"driver": pool[0], "pool": pool[1]},
                "taint": {"key": "drain", "effect": "None"},
            },
        },
    )
    ms, _ = timed(lambda: timeline.refresh(cluster), args.runs)
    print(f"refresh, + a DeviceTaintRule over one pool:  {ms:8.1f} ms")
    reset()


if __name__ == "__main__":
    main()
