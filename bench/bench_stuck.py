"""Stuck-claim detector benchmark: one detector run over a 5,000-node fleet in PostgreSQL.

    .venv/bin/python bench/bench_stuck.py [--nodes 5000] [--claims 20000] [--runs 3] [--reload]

Loads the same generated fleet as bench_api.py (devcluster.fleet.generate_fleet, bulk inserts) into its own
database (BENCH_DATABASE_URL, default `gpudash_bench_ops`), then times `claims.stuck.detect` for the
cluster: the first run (findings and first sightings written) and later runs (nothing changes). Figures are
printed, not asserted.
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_ops"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reload", action="store_true")
    args = parser.parse_args()
    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    from bench_api import ensure_database, load

    ensure_database(db_url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from claims import stuck
    from claims.models import Finding, StuckObservation
    from inventory.models import Device
    from mirror.models import Cluster

    if args.reload or Device.objects.filter(cluster__name="bench").count() < args.nodes * 8:
        load(args.nodes, args.claims)
    cluster = Cluster.objects.get(name="bench")
    Finding.objects.filter(cluster=cluster).delete()
    StuckObservation.objects.filter(cluster=cluster).delete()
    for run in range(args.runs):
        started = time.perf_counter()
        counts = stuck.detect(cluster)
        elapsed = time.perf_counter() - started
        print(f"run {run + 1}: {elapsed:.2f} s  {counts}")
    print(
        "active findings by rule:",
        dict(
            Finding.objects.filter(cluster=cluster)
            .active()
            .values_list("rule")
            .annotate(n=django.db.models.Count("id"))
        ),
    )


if __name__ == "__main__":
    main()
