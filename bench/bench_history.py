"""Fleet-history benchmark on the 5,000-node fleet in PostgreSQL: the per-minute sampler, and the chart
queries over 14 days of history.

    .venv/bin/python bench/bench_history.py [--nodes 5000] [--samples 10] [--runs 20] [--days 14] [--reload]

The fleet is bench_api's (devcluster.fleet.generate_fleet), loaded once into BENCH_DATABASE_URL
(default: the `gpudash_bench_metrics` database bench_metrics.py uses, so one load serves both).
The sampler (monitoring.history.sample, what beat runs each minute) is timed on its own. Then
`--days` of history are written: the sampled rows of one minute copied to every minute of the span
with made-up variation (COPY; what 14 days of sampling would leave). The overview's and a namespace
page's chart requests (GET /api/v1/history/...) are timed through Django's full stack in-process
(test client), so the figures are server time. Figures are printed, not asserted.
"""

import argparse
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_metrics"

from fleetdb import add_fleet_arguments, load_average, open_fleet  # noqa: E402 (after the path set-up)


def time_sampler(samples):
    from django.utils import timezone

    from monitoring import history
    from monitoring.models import FleetSample, NamespaceSample

    start = timezone.now().replace(second=0, microsecond=0) + timedelta(days=1)  # clear of the filled span
    times, cpu = [], []
    for i in range(samples + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        rows = history.sample(start + timedelta(minutes=i))
        if i:  # the first pays for connections and plans
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
    FleetSample.objects.filter(minute__gte=start).delete()
    NamespaceSample.objects.filter(minute__gte=start).delete()
    print(
        f"sampler: p50 {statistics.median(times):.0f} ms, max {max(times):.0f} ms (this process's CPU p50 {statistics.median(cpu):.0f} ms) over {samples} samples; {rows} rows a minute"
    )
    return rows


def fill(days):
    """Every minute of the last `days` gets the rows of one sample, counts varied a little."""
    from django.db import connection
    from django.utils import timezone

    from monitoring import history
    from monitoring.models import FleetSample, NamespaceSample

    now = timezone.now().replace(second=0, microsecond=0)
    FleetSample.objects.all().delete()
    NamespaceSample.objects.all().delete()
    history.sample(now)
    fleet = list(FleetSample.objects.filter(minute=now).values())
    spaces = list(NamespaceSample.objects.filter(minute=now).values())
    rng = random.Random(7)
    minutes = [now - timedelta(minutes=m) for m in range(1, int(days * 1440))]
    started = time.monotonic()
    for model, rows in ((FleetSample, fleet), (NamespaceSample, spaces)):
        columns = [c for c in rows[0] if c != "id"]
        counts = [c for c in columns if c not in ("cluster_id", "minute", "model", "kind", "namespace")]
        table = connection.ops.quote_name(model._meta.db_table)
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for minute in minutes:
                for row in rows:
                    copy.write_row(
                        [
                            minute if c == "minute" else max(row[c] + rng.randint(-2, 2), 0) if c in counts else row[c]
                            for c in columns
                        ]
                    )
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    total = (len(fleet) + len(spaces)) * (len(minutes) + 1)
    print(
        f"history: {days:g} days = {len(minutes) + 1} minutes x {len(fleet)} fleet + {len(spaces)} namespace rows = {total} rows, written in {time.monotonic() - started:.0f} s"
    )
    return spaces


def time_charts(runs, days, namespace):
    from django.contrib.auth.models import User
    from django.test import Client

    user, _ = User.objects.get_or_create(username="bench-history", defaults={"is_superuser": True})
    client = Client()
    client.force_login(user)
    hours = int(days * 24)
    charts = [
        ("whole GPUs by state", "/api/v1/history/devices?kind=gpu"),
        ("free whole GPUs by model", "/api/v1/history/devices?series=gpus_free&group_by=model"),
        ("GPUs held, top 8 namespaces", "/api/v1/history/namespaces?series=gpu&top=8"),
        ("pending claims, top 8 namespaces", "/api/v1/history/namespaces?series=claims_pending&top=8"),
        (
            f"namespace {namespace}: devices",
            f"/api/v1/history/namespaces?namespace={namespace}&series=gpu,partition,other,idle",
        ),
    ]
    print(f"\nchart requests (server time, ms; {runs} runs each):")
    # cpu: this process's CPU time per request (Django, DRF, the rows' conversion), without PostgreSQL's.
    print(f"{'chart':36} {'span':>6} {'points':>6} {'p50':>7} {'max':>7} {'cpu p50':>8}")
    for span in (24, hours):
        for label, url in charts:
            times, cpu = [], []
            for i in range(runs + 2):
                t0, c0 = time.perf_counter(), time.process_time()
                response = client.get(f"{url}&hours={span}")
                elapsed, used = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                assert response.status_code == 200, response.content[:300]
                if i >= 2:
                    times.append(elapsed)
                    cpu.append(used)
            body = response.json()
            assert any(v is not None for s in body["series"] for v in s["values"]), (label, "no data")
            print(
                f"{label:36} {span:>5}h {len(body['timestamps']):>6} {statistics.median(times):7.1f} {max(times):7.1f} {statistics.median(cpu):8.1f}"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fleet_arguments(parser)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--days", type=float, default=14)
    args = parser.parse_args()
    open_fleet(args, DEFAULT_DB, GPUDASH_HISTORY_DAYS=str(max(args.days, 1)))
    print("load average at start:", load_average())
    time_sampler(args.samples)
    spaces = fill(args.days)
    busiest = max(spaces, key=lambda r: r["gpu"])["namespace"]
    time_charts(args.runs, args.days, busiest)
    time_sampler(args.samples)  # again, with the history tables full
    print("load average at end:", load_average())


if __name__ == "__main__":
    main()
