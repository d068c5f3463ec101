"""REST API benchmark: server time and queries per request on a 5,000-node (or --nodes) fleet in PostgreSQL.

    .venv/bin/python bench/bench_api.py [--nodes 5000] [--claims 20000] [--runs 30] [--reload] [--load-only]
        [--explain [DIR]]

The fleet comes from devcluster.fleet.generate_fleet (5,000 nodes x 8 GPUs, 20 % of nodes with MIG
partitions, 20,000 claims and pods) and is written with bulk inserts through the models' own
`fields_from_raw` / child-row builders (the same columns the watchers write). Requests go through
Django's full stack in-process (test client: middleware, token auth, DRF, serialisation), so the
time is server time without network. Figures are printed, not asserted.
Uses BENCH_DATABASE_URL (default: a `gpudash_bench_api` database on the local PostgreSQL), created
and migrated if needed; the fleet is loaded once and reused while it has --nodes nodes (unless
--reload). "matched" shows an estimated count as ~N (count_estimated, above the exact-count limit).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_api"


def ensure_database(url):
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def load(nodes, claims):
    from django.db import transaction
    from django.utils import timezone

    from claims.models import (
        AllocationResult,
        ClaimConsumer,
        Finding,
        Pod,
        PodClaimRef,
        ResourceClaim,
        ResourceClaimTemplate,
    )
    from devcluster.fleet import generate_fleet
    from inventory.models import Device, DeviceClass, Node, ResourceSlice
    from mirror.models import Cluster

    started = time.monotonic()
    fleet = generate_fleet(nodes=nodes, claims=claims)
    print(
        f"generated fleet in {time.monotonic() - started:.1f} s: "
        + ", ".join(f"{k}={len(v)}" for k, v in fleet.items())
    )
    started = time.monotonic()
    with transaction.atomic():
        Cluster.objects.filter(name="bench").delete()
        cluster = Cluster.objects.create(name="bench")

        def rows(model, raws):
            return model.objects.bulk_create(
                (model(cluster=cluster, **model.fields_from_raw(r)) for r in raws), batch_size=2000
            )

        rows(Node, fleet["nodes"])
        rows(DeviceClass, fleet["deviceclasses"])
        rows(ResourceClaimTemplate, fleet["resourceclaimtemplates"])
        slices = rows(ResourceSlice, fleet["resourceslices"])
        Device.objects.bulk_create((d for s in slices for d in Device.rows_for_slice(s, s.spec)), batch_size=5000)
        claim_rows = rows(ResourceClaim, fleet["resourceclaims"])
        results, consumers = [], []
        for c in claim_rows:
            # The same child rows ResourceClaim.sync_children writes, built without a query per claim.
            for r in ((c.status.get("allocation") or {}).get("devices") or {}).get("results") or []:
                results.append(
                    AllocationResult(
                        cluster=cluster,
                        claim=c,
                        namespace=c.namespace,
                        request=r["request"],
                        driver=r["driver"],
                        pool=r["pool"],
                        device=r["device"],
                    )
                )
            for ref in c.status.get("reservedFor") or []:
                consumers.append(
                    ClaimConsumer(cluster=cluster, claim=c, resource=ref["resource"], name=ref["name"], uid=ref["uid"])
                )
        AllocationResult.objects.bulk_create(results, batch_size=5000)
        ClaimConsumer.objects.bulk_create(consumers, batch_size=5000)
        pods = rows(Pod, fleet["pods"])
        PodClaimRef.objects.bulk_create((ref for p in pods for ref in PodClaimRef.rows_for_pod(p)), batch_size=5000)
        now = timezone.now()
        Finding.objects.bulk_create(
            Finding(
                cluster=cluster,
                rule="bench",
                namespace=c.namespace,
                claim_name=c.name,
                claim_uid=c.uid,
                summary="bench",
                first_seen=now,
                last_seen=now,
            )
            for c in claim_rows[:: max(1, len(claim_rows) // 200)]
        )
        # Bulk inserts bypass the watchers' apply path: fill the stored device state as it would.
        from inventory.devicestate import refresh_pools

        refresh_pools(None)
    from django.db import connection

    with connection.cursor() as cursor:
        # The steady state autovacuum reaches soon after a bulk load: statistics, and a visibility map
        # that lets the count and summary reads be index-only scans. Without the VACUUM (a server with
        # autovacuum off, as the development machine's is) the same reads scan the heap: at 20,000
        # nodes the overview took 338 ms instead of 268.
        # SQLite (bench_load.py's embedded mode): statistics only.
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    print(
        f"loaded in {time.monotonic() - started:.1f} s: {Device.objects.count()} devices, {ResourceClaim.objects.count()} claims, {len(results)} allocation results"
    )


def fleet_matches(nodes):
    """Is the loaded bench fleet the one asked for (same number of nodes)?"""
    from inventory.models import Node

    return Node.objects.filter(cluster__name="bench").count() == nodes


def timed_gets(client, url, runs, warmup):
    """GET `url` warmup + runs times; (server times in ms of the measured runs, last response, its query count).

    The warm-up requests fill caches (connection, query plans, class lookups) and are not counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for i in range(warmup + runs):
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(url)
            elapsed = time.perf_counter() - t0
        assert response.status_code == 200, (url, response.status_code, response.content[:500])
        if i >= warmup:
            times.append(elapsed * 1000)
    return times, response, len(ctx.captured_queries)


SKIP_EXPLAIN = ("django_session", "auth_user", "authtoken_token", "auth_group", "gpudash_accessprofile")


def add_explain_option(parser, what):
    """`--explain [DIR]`: also write the EXPLAIN plans of `what` as markdown into DIR (the system's
    temporary directory when no DIR is given). Plans are produced on demand, not kept in the repository."""
    parser.add_argument(
        "--explain",
        nargs="?",
        const=tempfile.gettempdir(),
        metavar="DIR",
        help=f"Also write EXPLAIN (ANALYZE, BUFFERS) of {what} as markdown into DIR "
        "(default: the system's temporary directory).",
    )


def explain_file(directory, name):
    """Where `--explain DIR` writes the plans named `name` (created if missing)."""
    path = Path(directory) / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def explain(client, label, url, min_ms=0.0):
    """Markdown: EXPLAIN (ANALYZE, BUFFERS) of each query one GET of `url` runs (auth and session
    lookups left out, and those under `min_ms`), after one warm-up GET."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        client.get(url)
    out = [f"### {label}\n\n`GET {url}`: {len(ctx.captured_queries)} queries\n"]
    for q in ctx.captured_queries:
        sql = q["sql"]
        if (
            any(t in sql for t in SKIP_EXPLAIN)
            or sql.startswith(("EXPLAIN", "SAVEPOINT", "RELEASE"))
            or float(q["time"]) * 1000 < min_ms
        ):
            continue
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = "\n".join(r[0] for r in cursor.fetchall())
        out.append(f"```sql\n{sql}\n```\n```\n{plan}\n```\n")
    return "\n".join(out)


def measure(client, url, runs):
    times, response, queries = timed_gets(client, url, runs, warmup=2)
    body = response.json()
    rows = len(body.get("results", []))
    count = body.get("count", body.get("total"))
    return statistics.median(times), max(times), queries, rows, f"~{count}" if body.get("count_estimated") else count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--reload", action="store_true", help="Reload the fleet even if the database has one of --nodes nodes."
    )
    parser.add_argument("--load-only", action="store_true", help="Load (or check) the fleet, measure nothing.")
    parser.add_argument(
        "--skip-class-count", action="store_true", help="Do not time the background class recount first."
    )
    add_explain_option(parser, "every query of every case")
    args = parser.parse_args()

    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    os.environ.setdefault("DB_CONN_MAX_AGE", "600")
    ensure_database(db_url)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from inventory.models import Device
    from mirror.models import Cluster

    if args.reload or not fleet_matches(args.nodes):
        load(args.nodes, args.claims)
    else:
        print(f"reusing the loaded fleet ({Device.objects.filter(cluster__name='bench').count()} devices)")
    if args.load_only:
        return

    user, _ = User.objects.get_or_create(username="bench-api", defaults={"is_superuser": True})
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert Cluster.objects.filter(name="bench").exists()

    cases = [
        (
            "devices: attribute + capacity, page of 100",
            "/api/v1/devices/?attribute=gpu.nvidia.com/productName:NVIDIA H100 80GB HBM3&capacity=gpu.nvidia.com/memory>=40Gi&page_size=100",
        ),
        (
            "devices: attribute + capacity + state=free, page of 100",
            "/api/v1/devices/?attribute=productName:NVIDIA H100 80GB HBM3&capacity=memory>=40Gi&state=free&page_size=100",
        ),
        (
            "same, keyset page (?cursor=, no count)",
            "/api/v1/devices/?attribute=gpu.nvidia.com/productName:NVIDIA H100 80GB HBM3&capacity=gpu.nvidia.com/memory>=40Gi&page_size=100&cursor=",
        ),
        ("devices: unfiltered, page of 100", "/api/v1/devices/?page_size=100"),
        ("devices: unfiltered, keyset page of 100", "/api/v1/devices/?page_size=100&cursor="),
        ("devices: node filter (8 rows)", f"/api/v1/devices/?node=node-{args.nodes // 2:05d}"),
        (
            "devices: attribute + capacity, page of 1000",
            "/api/v1/devices/?attribute=gpu.nvidia.com/productName:NVIDIA H100 80GB HBM3&capacity=gpu.nvidia.com/memory>=40Gi&page_size=1000",
        ),
        ("claims: state=reserved, page of 100", "/api/v1/claims/?state=reserved&page_size=100"),
        ("claims: state=pending, page of 100", "/api/v1/claims/?state=pending&page_size=100"),
        ("claims: state=stuck, page of 100", "/api/v1/claims/?state=stuck&page_size=100"),
        ("claims: state=reserved, keyset page of 100", "/api/v1/claims/?state=reserved&page_size=100&cursor="),
        ("nodes: page of 100", "/api/v1/nodes/?page_size=100"),
        ("aggregates: devices by model and state", "/api/v1/aggregates/devices?group_by=model&group_by=state"),
        ("aggregates: devices by cluster, model, state (default)", "/api/v1/aggregates/devices"),
        ("aggregates: allocation per namespace", "/api/v1/aggregates/allocation"),
    ]
    # Class match counts are counted in the background after class and slice changes (what the
    # worker runs is timed here) and stored; the endpoint only reads them.
    from inventory.tasks import count_class_matches

    if not args.skip_class_count:
        t0 = time.perf_counter()
        count_class_matches(Cluster.objects.get(name="bench").id)
        counting = (time.perf_counter() - t0) * 1000
        counts = {c["name"]: c["matching_devices"] for c in client.get("/api/v1/device-classes/").json()["results"]}
        print(
            f"\ndevice classes counted in the background (CEL over every device): {counting:.0f} ms, matches {counts}"
        )
    cases.append(("device-classes (stored CEL counts)", "/api/v1/device-classes/"))
    print(f"\n{'request':58} {'p50 ms':>8} {'max ms':>8} {'queries':>8} {'rows':>6} {'matched':>8}")
    for label, url in cases:
        p50, worst, queries, rows, count = measure(client, url, args.runs)
        print(f"{label:58} {p50:8.1f} {worst:8.1f} {queries:8d} {rows:6d} {count!s:>8}")
    if args.explain:
        path = explain_file(args.explain, f"api-{args.nodes}")
        with open(path, "w") as f:
            f.write(f"# EXPLAIN ANALYZE: bench/bench_api.py, {args.nodes} nodes\n\n")
            f.write("\n".join(explain(client, label, url) for label, url in cases))
        print(f"plans written to {path}")


if __name__ == "__main__":
    main()
