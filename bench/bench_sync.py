"""Sync benchmark: initial sync of a large fleet into PostgreSQL, then watch events applied per second.

    .venv/bin/python bench/bench_sync.py [--nodes 5000] [--claims 20000] [--events 20000]

The fleet (devcluster.fleet: 5,000 nodes x 8 GPUs, 20,000 claims and pods) is served by the built-in
API server in a separate process, like a real API server would be. Figures are printed, not asserted.
Uses the database BENCH_DATABASE_URL (default: a `gpudash_bench` database on the local PostgreSQL),
created and migrated if needed; REDIS_URL is honoured (change messages go to Redis when set).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench"


def serve(args):
    """Child process: load the fleet, serve it, apply churn on request (reads commands on stdin)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    from devcluster.fleet import generate_fleet
    from devcluster.server import DevCluster

    started = time.monotonic()
    fleet = generate_fleet(nodes=args.nodes, claims=args.claims)
    server = DevCluster(bookmark_interval=60.0)
    server.store.bulk_load(fleet, copy=False)
    server.start()
    kubeconfig = server.write_kubeconfig(Path(args.serve) / "kubeconfig")
    counts = ",".join(f"{k}={len(v)}" for k, v in fleet.items())
    print(f"READY {kubeconfig} {server.store.resource_version} {time.monotonic() - started:.1f} {counts}", flush=True)
    claims = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in fleet["resourceclaims"]]
    for line in sys.stdin:
        command = line.split()
        if command and command[0] == "churn":
            n = int(command[1])
            for i in range(n):
                # What the scheduler and kubelet do all day: reserve and release allocated claims
                # (status changes that rebuild consumer rows); pending claims get an annotation.
                ns, name = claims[i % len(claims)]
                obj = server.store.get("resourceclaims", ns, name)
                status = obj.get("status") or {}
                if status.get("allocation"):
                    if status.get("reservedFor"):
                        status.pop("reservedFor")
                    else:
                        status["reservedFor"] = [{"resource": "pods", "name": f"bench-{i}", "uid": f"bench-uid-{i}"}]
                    server.store.update("resourceclaims", obj, subresource="status")
                else:
                    obj["metadata"].setdefault("annotations", {})["bench/seq"] = str(i)
                    server.store.update("resourceclaims", obj)
            print(f"CHURNED {server.store.resource_version}", flush=True)
        elif command and command[0] == "quit":
            break
    server.stop()


def ensure_database(url):
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--events", type=int, default=20000, help="claim modifications for the steady-state figure")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--profile", action="store_true", help="profile the steady-state watcher thread")
    parser.add_argument("--no-publish", action="store_true", help="skip change messages (to see what they cost)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args)

    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    ensure_database(db_url)
    os.environ["DATABASE_URL"] = db_url
    os.environ["GPUDASH_LIST_PAGE_SIZE"] = str(args.page_size)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from gpudash.sync.kinds import KINDS
    from gpudash.sync.publish import publisher
    from gpudash.sync.runner import Supervisor
    from gpudash.sync.watcher import Watcher
    from inventory.models import Cluster, Device, SyncState

    if args.no_publish:
        publisher.publish = lambda changes: None
    call_command("migrate", verbosity=0)
    Cluster.objects.filter(name="bench").delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE") if connection.vendor == "postgresql" else None

    workdir = tempfile.mkdtemp(prefix="gpudash-bench-")
    print(f"generating and serving a fleet of {args.nodes} nodes x 8 GPUs, {args.claims} claims and pods ...", flush=True)
    server = subprocess.Popen([sys.executable, __file__, "--serve", workdir, "--nodes", str(args.nodes), "--claims", str(args.claims)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit(f"devcluster did not start: {ready}")
        kubeconfig, fleet_counts = ready[1], ready[4]
        print(f"devcluster ready in {ready[3]} s: {fleet_counts}")
        cluster = Cluster.objects.create(name="bench", kubeconfig=kubeconfig)

        # --- initial sync: every kind listed in parallel (one thread each), as the watchers do ---
        supervisor = Supervisor(cluster_names=["bench"], once=True)
        started = time.monotonic()
        supervisor.run()
        initial = time.monotonic() - started
        publisher.flush()
        print(f"\nINITIAL SYNC into {connection.vendor}: {initial:.1f} s (page size {args.page_size}, kinds in parallel)")
        print(f"{'kind':24} {'objects':>8} {'fetch+parse s':>14} {'db apply s':>11}")
        total = 0
        for (_, kind), (watcher, _) in sorted(supervisor.watchers.items(), key=lambda kv: kv[0][1]):
            st = SyncState.objects.get(cluster=cluster, kind=kind)
            total += st.object_count
            print(f"{kind:24} {st.object_count:>8} {watcher.stats.list_fetch_seconds:>14.1f} {watcher.stats.apply_seconds:>11.1f}  {st.status}")
        print(f"{'devices (child rows)':24} {Device.objects.filter(cluster=cluster).count():>8}")
        print(f"{'total objects':24} {total:>8}  -> {total / initial:.0f} objects/s")
        for kind in KINDS:
            st = SyncState.objects.filter(cluster=cluster, kind=kind.kind).first()
            if st and st.status == SyncState.Status.ERROR:
                print(f"  {kind.kind}: ERROR {st.last_error}")

        # --- steady state: a backlog of claim modifications applied by one watcher ---
        server.stdin.write(f"churn {args.events}\n")
        server.stdin.flush()
        churned = server.stdout.readline().split()
        target_rv = int(churned[1])
        watcher = Watcher(cluster.pk, "ResourceClaim", holder="bench")
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile()

            def run_profiled():
                profile.enable()
                try:
                    watcher.run()
                finally:
                    profile.disable()

            thread = threading.Thread(target=run_profiled, daemon=True)
        else:
            thread = threading.Thread(target=watcher.run, daemon=True)
        started = time.monotonic()
        thread.start()
        while True:
            rv = SyncState.objects.filter(cluster=cluster, kind="ResourceClaim").values_list("resource_version", flat=True).first()
            if rv and int(rv) >= target_rv:
                break
            if time.monotonic() - started > 600:
                raise SystemExit("steady-state phase did not finish in 10 minutes")
            time.sleep(0.05)
        steady = time.monotonic() - started
        watcher.stop.set()
        watcher.close_stream()
        thread.join(10)
        s = watcher.stats
        print(f"\nSTEADY STATE: {s.events} watch events (claims reserved/released or annotated) in {steady:.1f} s -> {s.events / steady:.0f} events/s by one worker")
        print(f"  batches {s.batches} (avg {s.events / max(s.batches, 1):.0f} events), parse {s.parse_seconds:.1f} s, "
              f"db apply {s.apply_seconds:.1f} s, rest (HTTP read, waiting) {max(steady - s.parse_seconds - s.apply_seconds, 0):.1f} s")
        if profile is not None:
            import pstats

            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        layer = "none (--no-publish)" if args.no_publish else ("Redis" if os.environ.get("REDIS_URL") else "in-memory")
        print(f"  change messages sent: {publisher.sent_messages} (channel layer: {layer})")
    finally:
        try:
            server.stdin.write("quit\n")
            server.stdin.flush()
            server.wait(30)
        except Exception:
            server.kill()


if __name__ == "__main__":
    main()
