"""Sync benchmark: initial sync of a large fleet into PostgreSQL, then watch events applied per second.

    .venv/bin/python bench/bench_sync.py [--nodes 5000] [--claims N (default 4 per node)] [--events 20000] [--no-ledger]
    .venv/bin/python bench/bench_sync.py --spread [--clusters 12] [--workers 1,2,3] [--nodes 250] [--events N]

--spread: several API servers (--clusters, --nodes each, default 250) and real `manage.py watch` worker
processes; per number of workers, the lease share of each worker and the total ingest of a
backlog of claim changes on every cluster (workers paused while it builds, then resumed).

The fleet (devcluster.fleet: 5,000 nodes x 8 GPUs, 20,000 claims and pods) is served by the built-in
API server in a separate process, like a real API server would be. Figures are printed, not asserted.
--no-ledger: without the allocation ledger (GPUDASH_USAGE_LEDGER=0), to see what it costs; the churn's
reserve/release events each close one interval and open another (the ledger's busiest case). The sync
queues claim events and a Celery worker folds them into intervals (usage/ledger.py): with REDIS_URL set
the bench starts one `celery worker` (solo pool, default queue) in both modes, as deployed, and reports
how long the fold took to catch up after the steady phase and the worker's CPU.
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
    servers, kubeconfigs = [], []
    for index in range(args.count):
        fleet = generate_fleet(nodes=args.nodes, claims=args.claims)
        server = DevCluster(bookmark_interval=60.0)
        server.store.bulk_load(fleet, copy=False)
        server.start()
        kubeconfigs.append(str(server.write_kubeconfig(Path(args.serve) / f"kubeconfig-{index}")))
        claims = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in fleet["resourceclaims"]]
        servers.append((server, claims))
    counts = ",".join(f"{k}={len(v)}" for k, v in fleet.items())
    print(
        f"READY {','.join(kubeconfigs)} {servers[0][0].store.resource_version} {time.monotonic() - started:.1f} {counts}",
        flush=True,
    )
    for line in sys.stdin:
        command = line.split()
        if command and command[0] == "churn":
            n = int(command[1])
            for server, claims in servers:
                churn(server, claims, n)
            print(f"CHURNED {','.join(str(server.store.resource_version) for server, _ in servers)}", flush=True)
        elif command and command[0] == "quit":
            break
    for server, _ in servers:
        server.stop()


def churn(server, claims, n):
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


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_seconds(pid):
    """User + system CPU seconds of a process (Linux /proc), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def postgres_cpu():
    """CPU seconds of the local PostgreSQL: its processes now plus the exited children the postmaster
    reaped (cutime/cstime), so backends that came and went during a phase are counted too."""
    total, postmasters = 0.0, []
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, fields = stat.split("(", 1)[1].rsplit(")", 1)[0], stat.rsplit(")", 1)[1].split()
        if name != "postgres":
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
        if fields[1] == "1":  # the postmaster (its parent is init)
            postmasters.append((int(fields[13]) + int(fields[14])) / tick)
    return total + sum(postmasters)


def database_backends(name):
    """PIDs of the PostgreSQL backends serving database `name` on this machine (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmdline.startswith("postgres:") and f" {name} " in cmdline:
                pids.append(int(entry.name))
    return pids


def start_servers(args, workdir, count, per_process=4):
    """Child processes serving `count` clusters (up to `per_process` each); returns (procs, kubeconfigs)."""
    procs, kubeconfigs = [], []
    for first in range(0, count, per_process):
        n = min(per_process, count - first)
        sub = Path(workdir) / f"servers-{first}"
        sub.mkdir()
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--serve",
                    str(sub),
                    "--count",
                    str(n),
                    "--nodes",
                    str(args.nodes),
                    "--claims",
                    str(args.claims),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
        )
    for proc in procs:
        ready = proc.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit(f"devcluster did not start: {ready}")
        kubeconfigs += ready[1].split(",")
    return procs, kubeconfigs


def stop_servers(procs):
    for proc in procs:
        try:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            proc.wait(30)
        except Exception:
            proc.kill()


def spread(args, db_url):
    """Several clusters over 1..N worker processes: lease shares and total ingest per worker count."""
    import signal

    from django.db import connection

    from mirror.models import Cluster, SyncState, SyncWorker
    from mirror.sync import workers as sync_workers

    counts = [int(n) for n in args.workers.split(",")]
    workdir = tempfile.mkdtemp(prefix="gpudash-bench-spread-")
    print(f"load average before: {load()}")
    print(
        f"serving {args.clusters} clusters of {args.nodes} nodes x 8 GPUs, {args.claims} claims and pods each ...",
        flush=True,
    )
    servers, kubeconfigs = start_servers(args, workdir, args.clusters)
    # Long leases: the workers are paused (SIGSTOP) while the backlog builds and must keep them.
    env = dict(
        os.environ,
        DATABASE_URL=db_url,
        GPUDASH_LEASE_SECONDS="600",
        GPUDASH_DISCOVERY_INTERVAL="600",
        GPUDASH_WATCH_TIMEOUT="3600",
        LOG_LEVEL="WARNING",
    )
    results = []
    try:
        for n_workers in counts:
            Cluster.objects.all().delete()  # only these clusters in the bench database: every worker shares them
            SyncWorker.objects.all().delete()
            clusters = [
                Cluster.objects.create(name=f"spread-{i:02d}", kubeconfig=kc) for i, kc in enumerate(kubeconfigs)
            ]
            started = time.monotonic()
            procs = [
                subprocess.Popen([sys.executable, "manage.py", "watch"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
                for _ in range(n_workers)
            ]
            try:
                while True:
                    shares, rows = sync_workers.lease_table()
                    rows = [r for r in rows if r.owner]
                    live = [s for s in shares if s.live]
                    wanted = len(sync_workers.wanted_keys())
                    if (
                        len(live) == n_workers
                        and len(rows) == wanted
                        and all(
                            r.held and not r.handing_over and r.state.status == SyncState.Status.CONNECTED for r in rows
                        )
                    ):
                        break
                    if time.monotonic() - started > 900:
                        raise SystemExit("workers did not settle in 15 minutes")
                    time.sleep(0.2)
                initial = time.monotonic() - started
                share = sorted((len(s.held) for s in live), reverse=True)
                # --- a backlog of claim changes on every cluster, built while the workers are paused ---
                for proc in procs:
                    os.kill(proc.pid, signal.SIGSTOP)
                for server in servers:
                    server.stdin.write(f"churn {args.events}\n")
                    server.stdin.flush()
                targets = []
                for server in servers:
                    targets += [int(rv) for rv in server.stdout.readline().split()[1].split(",")]
                claim_states = {c.pk: SyncState.objects.get(cluster=c, kind="ResourceClaim") for c in clusters}
                before = {cid: st.events_applied for cid, st in claim_states.items()}
                holder_of = {
                    cid: sync_workers.worker_of(st.lease_holder, [s.name for s in live])
                    for cid, st in claim_states.items()
                }
                own = connection.cursor().connection.info.backend_pid
                db_name = connection.settings_dict["NAME"]
                backends = [pid for pid in database_backends(db_name) if pid != own]
                cpu_before = {
                    pid: cpu_seconds(pid) for pid in backends + [p.pid for p in procs] + [s.pid for s in servers]
                }
                drain_started = time.monotonic()
                for proc in procs:
                    os.kill(proc.pid, signal.SIGCONT)
                while True:
                    rvs = dict(
                        SyncState.objects.filter(cluster__in=clusters, kind="ResourceClaim").values_list(
                            "cluster_id", "resource_version"
                        )
                    )
                    if all(int(rvs.get(c.pk) or 0) >= target for c, target in zip(clusters, targets)):
                        break
                    if time.monotonic() - drain_started > 900:
                        raise SystemExit("the backlog was not applied in 15 minutes")
                    time.sleep(0.05)
                drain = time.monotonic() - drain_started
                # Backends that connected during the drain (parked watchers reconnect) count in full.
                backends = sorted(set(backends) | {pid for pid in database_backends(db_name) if pid != own})
                cpu = {pid: cpu_seconds(pid) - cpu_before.get(pid, 0.0) for pid in set(cpu_before) | set(backends)}
                after = dict(
                    SyncState.objects.filter(cluster__in=clusters, kind="ResourceClaim").values_list(
                        "cluster_id", "events_applied"
                    )
                )
                per_worker = {}
                for cid, n in after.items():
                    per_worker[holder_of[cid]] = per_worker.get(holder_of[cid], 0) + n - before[cid]
                events = sum(per_worker.values())
                results.append(
                    (
                        n_workers,
                        share,
                        initial,
                        events,
                        drain,
                        sorted(per_worker.values(), reverse=True),
                        sum(cpu[p.pid] for p in procs),
                        sum(cpu[pid] for pid in backends),
                        sum(cpu[s.pid] for s in servers),
                        load(),
                    )
                )
                r = results[-1]
                print(
                    f"{n_workers} workers: leases per worker {share} of {wanted}; initial sync {initial:.1f} s; "
                    f"{events} events in {drain:.1f} s -> {events / drain:.0f} events/s total, per worker {[round(n / drain) for n in r[5]]}/s; "
                    f"CPU s: workers {r[6]:.1f}, PostgreSQL {r[7]:.1f}, API servers {r[8]:.1f} (wall {drain:.1f}, {os.cpu_count()} cores); "
                    f"load {r[9]}",
                    flush=True,
                )
            finally:
                for proc in procs:
                    try:
                        os.kill(proc.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                    proc.terminate()
                for proc in procs:
                    try:
                        proc.wait(60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
        print(
            "\n| workers | leases per worker | initial sync | ingest, all workers | per worker | CPU s workers / PostgreSQL / API servers | load |"
        )
        print("|---|---|---|---|---|---|---|")
        for n_workers, share, initial, events, drain, per, cw, cp, cs, ld in results:
            print(
                f"| {n_workers} | {' / '.join(map(str, share))} | {initial:.1f} s | {events / drain:,.0f} events/s | "
                f"{' / '.join(f'{n / drain:,.0f}' for n in per)} | {cw:.1f} / {cp:.1f} / {cs:.1f} in {drain:.1f} s | {ld} |"
            )
    finally:
        stop_servers(servers)
        Cluster.objects.filter(name__startswith="spread-").delete()


FOLDER_LOG = Path(tempfile.gettempdir()) / "gpudash-bench-folder.log"


def start_folder():
    """A `celery worker` on the default queue (solo pool, as the sync workers' prefork children run one
    task each): it runs the ledger's debounced folds, in its own process, as deployed."""
    from celery import current_app

    current_app.control.purge()  # tasks an earlier run left on the broker
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "gpudash", "worker", "-P", "solo", "-Q", "celery"]
        + ["--without-mingle", "--without-gossip", "-l", "INFO"],
        cwd=ROOT,
        env=dict(os.environ, LOG_LEVEL="INFO"),
        stdout=open(FOLDER_LOG, "w"),
        stderr=subprocess.STDOUT,
    )


def ensure_database(url):
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--nodes", type=int, default=None, help="nodes (x 8 GPUs) per cluster; default 5000, 100 with --spread"
    )
    parser.add_argument("--claims", type=int, default=None, help="claims (and pods) per cluster; default 4 per node")
    parser.add_argument("--spread", action="store_true", help="several clusters and worker processes (see above)")
    parser.add_argument("--clusters", type=int, default=12)
    parser.add_argument("--workers", default="1,2,3", help="numbers of worker processes to measure, e.g. 1,2,3")
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument(
        "--events",
        type=int,
        default=None,
        help="claim modifications for the steady-state figure (default 20000; with --spread one per claim of each cluster)",
    )
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--profile", action="store_true", help="profile the steady-state watcher thread")
    parser.add_argument("--no-publish", action="store_true", help="skip change messages (to see what they cost)")
    parser.add_argument("--no-ledger", action="store_true", help="no allocation ledger writes (to see what they cost)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nodes is None:
        args.nodes = 250 if args.spread else 5000
    if args.claims is None:
        args.claims = 4 * args.nodes
    if args.events is None:
        args.events = args.claims if args.spread else 20000
    if args.serve:
        return serve(args)

    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    ensure_database(db_url)
    os.environ["DATABASE_URL"] = db_url
    os.environ["GPUDASH_LIST_PAGE_SIZE"] = str(args.page_size)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    if args.no_ledger:
        os.environ["GPUDASH_USAGE_LEDGER"] = "0"  # read by usage.apps at setup: no ledger hooks at all
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from inventory.models import Device
    from mirror.models import Cluster, SyncState
    from mirror.sync.kinds import KINDS
    from mirror.sync.publish import publisher
    from mirror.sync.runner import Supervisor
    from mirror.sync.watcher import Watcher

    if args.no_publish:
        publisher.publish = lambda changes: None
    call_command("migrate", verbosity=0)
    if args.spread:
        return spread(args, db_url)
    Cluster.objects.filter(name="bench").delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE") if connection.vendor == "postgresql" else None

    print(f"load average before: {load()}")
    workdir = tempfile.mkdtemp(prefix="gpudash-bench-")
    print(
        f"generating and serving a fleet of {args.nodes} nodes x 8 GPUs, {args.claims} claims and pods ...", flush=True
    )
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", workdir, "--nodes", str(args.nodes), "--claims", str(args.claims)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    folder = None
    try:
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit(f"devcluster did not start: {ready}")
        kubeconfig, fleet_counts = ready[1], ready[4]
        print(f"devcluster ready in {ready[3]} s: {fleet_counts}")
        cluster = Cluster.objects.create(name="bench", kubeconfig=kubeconfig)
        folder = start_folder() if os.environ.get("REDIS_URL") else None

        # --- initial sync: every kind listed in parallel (one thread each), as the watchers do ---
        supervisor = Supervisor(cluster_names=["bench"], once=True)
        server_cpu, db_cpu = cpu_seconds(server.pid), postgres_cpu()
        started, cpu_started = time.monotonic(), time.process_time()
        supervisor.run()
        initial = time.monotonic() - started
        initial_cpu = time.process_time() - cpu_started
        server_cpu, db_cpu = cpu_seconds(server.pid) - server_cpu, postgres_cpu() - db_cpu
        publisher.flush()
        print(
            f"\nINITIAL SYNC into {connection.vendor}: {initial:.1f} s (page size {args.page_size}, kinds in parallel; "
            f"worker CPU {initial_cpu:.1f} s; load average {load()})"
        )
        print(
            f"  CPU meanwhile: API server (devcluster) {server_cpu:.1f} s, PostgreSQL {db_cpu:.1f} s; "
            f"all three {initial_cpu + server_cpu + db_cpu:.1f} s on {os.cpu_count()} cores"
        )
        print(f"{'kind':24} {'objects':>8} {'fetch+parse s':>14} {'db apply s':>11}")
        total = 0
        for (_, kind), (watcher, _) in sorted(supervisor.watchers.items(), key=lambda kv: kv[0][1]):
            st = SyncState.objects.get(cluster=cluster, kind=kind)
            total += st.object_count
            print(
                f"{kind:24} {st.object_count:>8} {watcher.stats.list_fetch_seconds:>14.1f} {watcher.stats.apply_seconds:>11.1f}  {st.status}"
            )
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
        target_rv = int(churned[1].split(",")[0])
        watcher = Watcher(cluster.pk, "ResourceClaim", holder="bench")
        # What the ledger's hook costs inside the batches: the watcher thread's CPU and the wall time
        # (the difference is mostly waiting for PostgreSQL).
        from mirror.sync.hooks import hooks

        ledger_time = {"cpu": 0.0, "wall": 0.0, "calls": 0, "ops": 0}
        on_claims = hooks.ledger_claims

        def timed_ledger(cluster, ops):
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return on_claims(cluster, ops)
            finally:
                ledger_time["cpu"] += time.thread_time() - cpu
                ledger_time["wall"] += time.perf_counter() - wall
                ledger_time["calls"] += 1
                ledger_time["ops"] += len(ops)

        hooks.ledger_claims = timed_ledger
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
        import gc

        tracked = len(gc.get_objects())
        pauses = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}  # generation -> [collections, seconds]
        gc_started = {}

        def on_gc(phase, info):
            if phase == "start":
                gc_started[info["generation"]] = time.perf_counter()
            else:
                pauses[info["generation"]][0] += 1
                pauses[info["generation"]][1] += time.perf_counter() - gc_started.pop(
                    info["generation"], time.perf_counter()
                )

        gc.callbacks.append(on_gc)
        folder_cpu = cpu_seconds(folder.pid) if folder else 0.0
        started, cpu_started, db_cpu = time.monotonic(), time.process_time(), postgres_cpu()
        thread.start()
        while True:
            rv = (
                SyncState.objects.filter(cluster=cluster, kind="ResourceClaim")
                .values_list("resource_version", flat=True)
                .first()
            )
            if rv and int(rv) >= target_rv:
                break
            if time.monotonic() - started > 600:
                raise SystemExit("steady-state phase did not finish in 10 minutes")
            time.sleep(0.05)
        steady = time.monotonic() - started
        steady_cpu = time.process_time() - cpu_started
        db_cpu = postgres_cpu() - db_cpu
        watcher.stop.set()
        watcher.close_stream()
        thread.join(10)
        gc.callbacks.remove(on_gc)
        s = watcher.stats
        print(
            f"\nSTEADY STATE: {s.events} watch events (claims reserved/released or annotated) in {steady:.1f} s -> {s.events / steady:.0f} events/s by one worker "
            f"(worker CPU {steady_cpu:.1f} s -> {s.events / max(steady_cpu, 1e-9):.0f} events per CPU second; PostgreSQL CPU {db_cpu:.1f} s; load average {load()})"
        )
        print(
            f"  batches {s.batches} (avg {s.events / max(s.batches, 1):.0f} events), parse {s.parse_seconds:.1f} s, "
            f"db apply {s.apply_seconds:.1f} s, rest (HTTP read, waiting) {max(steady - s.parse_seconds - s.apply_seconds, 0):.1f} s"
        )
        hooks.ledger_claims = on_claims
        if ledger_time["calls"]:
            print(
                f"  allocation ledger hook (queueing): {ledger_time['ops']} claim events in {ledger_time['calls']} calls, "
                f"worker CPU {ledger_time['cpu']:.2f} s, wall {ledger_time['wall']:.2f} s"
            )
        if folder is not None:
            from usage.models import LedgerEvent

            waited = time.monotonic()
            queued = LedgerEvent.objects.filter(cluster=cluster)
            left_at_end = queued.count()
            while queued.exists() and time.monotonic() - waited < 600:
                time.sleep(0.05)
            print(
                f"  ledger fold (celery worker): {left_at_end} events still queued when the steady phase ended, "
                f"folded {time.monotonic() - waited:.1f} s later; worker CPU {cpu_seconds(folder.pid) - folder_cpu:.1f} s "
                f"during the steady phase and the catch-up"
            )
            for line in FOLDER_LOG.read_text().splitlines():  # each fold and any other task's end
                if "allocation ledger" in line or "succeeded in" in line or "ERROR" in line:
                    print("    worker:", line.split("] ", 1)[-1][:160])
        print(
            f"  garbage collector: {tracked} tracked objects in the worker after the initial sync; collections during the steady phase "
            + ", ".join(f"gen{g} {n} ({t:.2f} s)" for g, (n, t) in pauses.items())
        )
        if profile is not None:
            import pstats

            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
            if os.environ.get("BENCH_PROFILE_OUT"):  # the whole profile, for pstats / snakeviz
                profile.dump_stats(os.environ["BENCH_PROFILE_OUT"])
        from usage.models import AllocationInterval

        ledger = AllocationInterval.objects.filter(cluster=cluster)
        print(
            f"  allocation ledger: {'off (--no-ledger)' if args.no_ledger else 'on'}; "
            f"{ledger.count()} intervals, {ledger.filter(ended_at__isnull=True).count()} open"
        )
        layer = "none (--no-publish)" if args.no_publish else ("Redis" if os.environ.get("REDIS_URL") else "in-memory")
        print(f"  change messages sent: {publisher.sent_messages} (channel layer: {layer})")
    finally:
        if folder is not None:
            folder.terminate()
            folder.wait(30)
        try:
            server.stdin.write("quit\n")
            server.stdin.flush()
            server.wait(30)
        except Exception:
            server.kill()


if __name__ == "__main__":
    main()
