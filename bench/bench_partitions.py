"""Partition-aware capacity at fleet scale: the overview and the pages that show it, and what the sync
pays to keep the figures current.

    .venv/bin/python bench/bench_partitions.py [--nodes 5000] [--claims 20000] [--runs 10] [--reload]

The fleet is bench_api's (every fifth node an 8 x A100 node with partitionable MIG: 1,000 MIG pools
at 5,000 nodes, some placements allocated). Prints:
- the engine's count (dra/partitions.py) for every MIG pool of the fleet, as summary.rebuild runs it
  after a full refresh, and for one pool, as the sync runs it when one pool's claims change;
- server time (median / max over --runs, after one warm-up) of the overview, the fleet map, the nodes
  list, the pools list and GET /api/v1/aggregates/gpus, each showing the per-profile figures;
- the 1-minute load average. Figures are printed, not asserted; write them into BENCHMARKS.md.
Uses BENCH_DATABASE_URL (default: a `gpudash_bench_ui` database on the local PostgreSQL, shared with
bench_ui.py), created, migrated and loaded if needed.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui"


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--pages-only", action="store_true", help="skip the engine and refresh timings")
    args = parser.parse_args()

    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    os.environ["DATABASE_URL"] = db_url
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/6")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    os.environ.setdefault("DB_CONN_MAX_AGE", "600")
    from bench_api import ensure_database, fleet_matches, load
    from bench_ui import load_average

    ensure_database(db_url)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from inventory import devicekinds
    from inventory.models import Device
    from mirror.models import Cluster

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    if args.reload or not fleet_matches(args.nodes):
        load(args.nodes, args.claims)
    cluster = Cluster.objects.get(name="bench")
    mig_pools = sorted(
        Device.objects.filter(cluster=cluster, kind=devicekinds.PARTITION)
        .values_list("cluster_id", "driver", "pool")
        .distinct()
        .order_by()
    )
    print(f"fleet: {args.nodes} nodes, {len(mig_pools)} pools with partitions; load {load_average():.1f}")

    if not args.pages_only:
        time_counts(cluster, mig_pools, args.runs)
    time_pages(args)


def time_counts(cluster, mig_pools, runs):
    from django.db.models import Q

    from inventory import summary
    from inventory.devicestate import refresh_pools
    from inventory.fleet import FleetSnapshot
    from inventory.models import Device

    ms, _ = timed(lambda: summary._count_partitions(Device, Q(cluster_id=cluster.id), {}), 1)
    print(f"engine count, every MIG pool (as a full summary rebuild runs it): {ms:.0f} ms")
    one = mig_pools[len(mig_pools) // 2]
    med, top = timed(lambda: summary._count_partitions(Device, Q(cluster_id=one[0], driver=one[1], pool=one[2]), {}), 5)
    print(f"engine count, one MIG pool: {med:.1f} ms median (max {top:.1f})")
    med, top = timed(lambda: refresh_pools({one}), 5)
    print(f"refresh_pools of that pool (device state + summary, with the count): {med:.1f} ms median (max {top:.1f})")
    med, top = timed(lambda: FleetSnapshot([cluster.id]).partition_capacity(), runs)
    print(f"FleetSnapshot.partition_capacity() over the fleet: {med:.1f} ms median (max {top:.1f})")


def time_pages(args):
    from bench_ui import load_average, measure
    from django.contrib.auth.models import User
    from django.test import Client

    from inventory.fleet import FleetSnapshot

    user = User.objects.filter(username="bench-ui").first() or User.objects.create_superuser(
        "bench-ui", password="bench-ui-pass"
    )
    client = Client()
    client.force_login(user)
    for label, url in (
        ("overview", "/?cluster=bench"),
        ("fleet map", "/fleet/map/?cluster=bench"),
        ("nodes", "/nodes/?cluster=bench"),
        ("pools", "/pools/?cluster=bench"),
        ("API aggregates/gpus", "/api/v1/aggregates/gpus?cluster=bench"),
    ):
        med, top, cpu, queries, size = measure(client, url, args.runs)
        print(
            f"{label:22s} {med:7.1f} ms median, max {top:7.1f}, CPU {cpu:6.1f} ms, {queries} queries, "
            f"{size // 1024} KiB; load {load_average():.1f}"
        )
    # The same overview with the partition figures left out, alternating request by request with the
    # real one: what they add under the same load (the shared machine's load moves absolute figures).
    real = FleetSnapshot.partition_capacity

    def without(self, *keys, **kw):
        return {}

    times = {"with": [], "without": []}
    for i in range(2 * args.runs + 2):
        mode = "without" if i % 2 else "with"
        FleetSnapshot.partition_capacity = without if mode == "without" else real
        try:
            t0 = time.perf_counter()
            assert client.get("/?cluster=bench").status_code == 200
            if i >= 2:  # one warm-up each
                times[mode].append((time.perf_counter() - t0) * 1000)
        finally:
            FleetSnapshot.partition_capacity = real
    print(
        "overview alternating, with / without the partition figures: "
        f"{statistics.median(times['with']):.1f} / {statistics.median(times['without']):.1f} ms median "
        f"over {len(times['with'])} each; load {load_average():.1f}"
    )


if __name__ == "__main__":
    main()
