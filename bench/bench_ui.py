"""Web UI benchmark on a 5,000-node (or --nodes) fleet in PostgreSQL: page server time and websocket fan-out.

    .venv/bin/python bench/bench_ui.py [--nodes 5000] [--claims 20000] [--runs 10] [--clients 200]
                                       [--rate 100] [--seconds 10] [--reload] [--skip-pages] [--skip-fanout]
                                       [--sorts desc|asc|both|none] [--only TEXT ...] [--explain [DIR]]

Pages: every list page plain, filtered, and sorted by each sortable column (--sorts: descending by
default, ascending, both or none; every list that declares sortable columns, the fleet map, stuck
findings and pending pods included); --only times just the pages whose label contains one of the
given texts. Requests go through Django's whole stack in-process (test client: sessions, auth, view,
template rendering), so the time is server time without network; each row gives the median and max
wall time, the median CPU time of this process (Python: Django, the view, templates; PostgreSQL's
own work is in the wall time only), the queries and the 1-minute load average when the row was
measured. Figures are printed, not asserted.
Fan-out: an ASGI server (subprocess; --server uvicorn as `manage.py serve` runs it, or daphne) with the
Redis channel layer of the settings, N authenticated websocket
clients subscribed to the cluster's claims, and a producer committing --rate claim changes per
second through mirror.sync.apply.apply_object (the watchers' write path, which publishes after
commit). Latency = time a client receives a change - time its transaction committed.
Uses BENCH_DATABASE_URL (default: a `gpudash_bench_ui` database on the local PostgreSQL) and
REDIS_URL (default redis://127.0.0.1:6379/6). The fleet is the same as bench/bench_api.py's.
"""

import argparse
import asyncio
import copy
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui"


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def measure(client, url, runs):
    """(median ms, max ms, median CPU ms of this process, queries, bytes) of `runs` GETs after one warm-up."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    times, cpu = [], []
    for i in range(1 + runs):
        reset_queries()  # the query log holds 9,000 entries: full, it would count 0 queries
        with CaptureQueriesContext(connection) as ctx:
            c0, t0 = time.process_time(), time.perf_counter()
            response = client.get(url)
            elapsed, cpu_used = time.perf_counter() - t0, time.process_time() - c0
        assert response.status_code == 200, (url, response.status_code, response.content[:500])
        if i:
            times.append(elapsed * 1000)
            cpu.append(cpu_used * 1000)
    return (
        statistics.median(times),
        max(times),
        statistics.median(cpu),
        len(ctx.captured_queries),
        len(response.content),
    )


def load_average():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


PAGES = [
    ("overview", "/?cluster=bench"),
    ("fleet map (page 1 of 25)", "/fleet/map/"),
    ("fleet map, nodes with stuck claims", "/fleet/map/?state=stuck"),
    ("devices, unfiltered (page 1)", "/devices/"),
    (
        "devices, productName = H100 and memory >= 40Gi",
        "/devices/?q=productName+%3D+NVIDIA+H100+80GB+HBM3%3B+memory+%3E%3D+40Gi",
    ),
    ("devices, state = free", "/devices/?state=free"),
    ("devices, profile ~ 3g (Python-side clause)", "/devices/?q=profile+~+3g"),
    ("claims (page 1)", "/claims/"),
    ("claims, state = stuck", "/claims/?state=stuck"),
    ("claims, namespace + pending", "/claims/?namespace=team-03&state=pending"),
    ("nodes (page 1)", "/nodes/"),
    ("nodes with >= 8 free H100s", "/nodes/?min_free_gpus=8&gpu_model=NVIDIA+H100+80GB+HBM3"),
    ("nodes sorted by free GPUs", "/nodes/?ordering=-free_gpus"),
    ("fleet map, nodes with >= 4 free GPUs", "/fleet/map/?min_free_gpus=4"),
    ("pods (page 1)", "/pods/"),
    ("pools (page 1)", "/pools/"),
    ("device classes (stored counts)", "/classes/"),
    ("search: node-0250", "/search/?q=node-0250"),
    ("search: a claim uid", "/search/?q=uid-of-nothing"),
]


def bench_pages(client, runs, sorts="desc", only=()):
    pages = [(n, u) for n, u in PAGES + sorted_pages(sorts) if not only or any(o in n for o in only)]
    print(f"\nstarted {time.strftime('%H:%M:%S')}, load average {open('/proc/loadavg').read().strip()}")
    print(f"\n{'page':52} {'median ms':>10} {'max ms':>8} {'CPU ms':>7} {'queries':>8} {'KB':>6} {'load':>5}")
    results = {}
    for name, url in pages:
        median, worst, cpu, queries, size = measure(client, url, runs)
        results[name] = median
        print(
            f"{name:52} {median:10.0f} {worst:8.0f} {cpu:7.0f} {queries:8d} {size / 1024:6.0f} {load_average():5.1f}",
            flush=True,
        )
    by_list = {}
    for name, median in results.items():
        if " sorted by " in name:
            by_list.setdefault(name.split(" sorted by ")[0], []).append((median, name))
    if by_list:
        print(
            "\nslowest sort per list (median ms): "
            + "; ".join(f"{k} {max(v)[0]:.0f} ({max(v)[1].split(' sorted by ')[1]})" for k, v in by_list.items())
        )
    return results


def sorted_pages(sorts="desc"):
    """Every list page sorted by each of its sortable columns (the columns the views declare:
    mirror/tables.py), descending, ascending or both; the classes list is left out (a handful of rows)."""
    from django.contrib.auth.models import AnonymousUser

    from claims.views import CLAIM_SORT, POD_SORT
    from inventory.views import MAP_SORT, NODE_SORT, POOL_SORT, device_sort_columns
    from ops.views import PENDING_SORT, finding_sort_columns

    lists = [
        ("nodes", "/nodes/", NODE_SORT),
        ("devices", "/devices/", device_sort_columns(AnonymousUser())),
        ("claims", "/claims/", CLAIM_SORT),
        ("pods", "/pods/", POD_SORT),
        ("pools", "/pools/", POOL_SORT),
        ("fleet map", "/fleet/map/", MAP_SORT),
        ("stuck findings", "/stuck/", finding_sort_columns()),
        ("pending pods", "/pending/", PENDING_SORT),
    ]
    signs = {"desc": ("-",), "asc": ("",), "both": ("", "-"), "none": ()}[sorts]
    return [
        (f"{label} sorted by {sign}{column}", f"{url}?ordering={sign}{column}")
        for label, url, columns in lists
        for column in columns
        for sign in signs
    ]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _clients(url, cookie, n, scope, received, ready, stop):
    import aiohttp

    # All at once, as pages reconnecting after a server restart would (the list-based layer ran out of
    # Redis connections here; the pub/sub layer subscribes once per group and process).
    gate = asyncio.Semaphore(n)

    async def one(i, session):
        await gate.acquire()
        async with session.ws_connect(url, headers={"Cookie": cookie, "Origin": url.replace("ws://", "http://")}) as ws:
            await ws.send_json({"subscribe": scope})
            msg = await ws.receive_json()
            gate.release()
            assert msg["type"] == "subscribed", msg
            ready.append(i)
            while not stop.is_set():
                try:
                    msg = await ws.receive(timeout=0.5)
                except TimeoutError:
                    continue
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                now = time.time()
                for change in msg.json().get("changes", []):
                    received.append((i, change.get("name"), change.get("resourceVersion"), now))

    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        await asyncio.gather(*(one(i, session) for i in range(n)))


def bench_fanout(cluster, cookie, n_clients, rate, seconds, server_kind="uvicorn"):
    from django.conf import settings

    from claims.models import ResourceClaim
    from mirror.sync.apply import apply_batch
    from mirror.sync.publish import publisher

    port = _free_port()
    env = dict(os.environ)
    log = open(ROOT / "artifacts" / "bench_ui_server.log", "ab")
    if server_kind == "uvicorn":  # what `manage.py serve` runs
        command = [sys.executable, "manage.py", "serve", "--no-watchers", "--host", "127.0.0.1", "--port", str(port)]
    else:
        command = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "-v",
            "0",
            "gpudash.asgi:application",
        ]
    print(f"\nserver: {server_kind}; channel layer: {settings.CHANNEL_LAYERS['default']['BACKEND']}")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_http(port)
        out_path = ROOT / "artifacts" / "bench_ui_clients.jsonl"
        scope = {"cluster": cluster.id, "kind": ["ResourceClaim"]}
        # The clients run in their own process so they do not share the producer's interpreter lock.
        clients = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--clients-only",
                str(port),
                cookie,
                str(n_clients),
                json.dumps(scope),
                str(out_path),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = clients.stdout.readline()
        print(f"\n{line.strip()}")
        raws = list(ResourceClaim.objects.filter(cluster=cluster).order_by("id").values_list("raw", flat=True)[:500])
        rv = 10**9 + int(time.time() * 1000)
        committed = {}
        batch = max(1, rate // 10)  # the watchers apply runs of events in one transaction; 10 per second here
        interval, t_start = batch / rate, time.perf_counter()
        for tick in range(int(rate * seconds / batch)):
            delay = t_start + tick * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            events, keys = [], []
            for j in range(batch):
                raw = copy.deepcopy(raws[(tick * batch + j) % len(raws)])
                rv += 1
                raw["metadata"]["resourceVersion"] = str(rv)
                raw["metadata"].setdefault("labels", {})["bench-tick"] = str(tick)
                events.append(("MODIFIED", raw))
                keys.append((raw["metadata"]["name"], str(rv)))
            apply_batch(cluster, "ResourceClaim", events)  # commits, then the publisher sends
            now = time.time()
            for key in keys:
                committed[key] = now
        produced_in = time.perf_counter() - t_start
        publisher.flush()
        time.sleep(8)  # let the tail arrive
        clients.terminate()
        clients.wait(10)
        received = [json.loads(x) for x in open(out_path)]
        lat = [(t - committed[(name, rv)]) * 1000 for _, name, rv, t in received if (name, rv) in committed]
        expected = len(committed) * n_clients
        print(
            f"produced {len(committed)} committed changes in {produced_in:.1f} s ({len(committed) / produced_in:.0f}/s, {batch} per transaction)"
        )
        print(f"deliveries: {len(lat)} of {expected} expected ({100 * len(lat) / max(1, expected):.1f} %)")
        if lat:
            print(
                f"commit -> client latency: p50 {pct(lat, 50):.0f} ms, p95 {pct(lat, 95):.0f} ms, p99 {pct(lat, 99):.0f} ms, max {max(lat):.0f} ms"
            )
        return lat, expected
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _wait_http(port):
    import urllib.request

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the ASGI server did not start; see artifacts/bench_ui_server.log")


def clients_only(port, cookie, n, scope, out_path):
    received, ready, stop = [], [], threading.Event()
    loop = asyncio.new_event_loop()
    runner = threading.Thread(
        target=lambda: loop.run_until_complete(
            _clients(f"ws://127.0.0.1:{port}/ws/live/", cookie, n, scope, received, ready, stop)
        ),
        daemon=True,
    )
    runner.start()
    deadline = time.monotonic() + 60
    while len(ready) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    print(f"{len(ready)} of {n} websocket clients connected and subscribed", flush=True)
    import signal

    def dump(*_):
        with open(out_path, "w") as fh:
            for row in list(received):
                fh.write(json.dumps(row) + "\n")
        os._exit(0)

    signal.signal(signal.SIGTERM, dump)
    while True:
        time.sleep(1)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--clients-only":
        port, cookie, n, scope, out_path = sys.argv[2:7]
        return clients_only(int(port), cookie, int(n), json.loads(scope), out_path)
    from bench_api import add_explain_option, explain_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rate", type=int, default=100, help="changes per second")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--skip-pages", action="store_true")
    parser.add_argument("--skip-fanout", action="store_true")
    add_explain_option(parser, "each page's queries over 1 ms")
    parser.add_argument(
        "--server", choices=("uvicorn", "daphne"), default="uvicorn", help="ASGI server for the fan-out part"
    )
    parser.add_argument(
        "--sorts",
        choices=("desc", "asc", "both", "none"),
        default="desc",
        help="which directions of every sortable column to time",
    )
    parser.add_argument(
        "--only", nargs="*", default=(), metavar="TEXT", help="time only the pages whose label contains one of these"
    )
    args = parser.parse_args()

    db_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    os.environ["DATABASE_URL"] = db_url
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/6")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    os.environ.setdefault("DB_CONN_MAX_AGE", "600")
    (ROOT / "artifacts").mkdir(exist_ok=True)
    from bench_api import ensure_database, load

    ensure_database(db_url)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from inventory.models import Device
    from mirror.models import Cluster

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from bench_api import fleet_matches

    if args.reload or not fleet_matches(args.nodes):
        load(args.nodes, args.claims)
    cluster = Cluster.objects.get(name="bench")
    user = User.objects.filter(username="bench-ui").first() or User.objects.create_superuser(
        "bench-ui", password="bench-ui-pass"
    )
    client = Client()
    client.force_login(user)
    print(f"fleet: {Device.objects.filter(cluster=cluster).count()} devices; database {db_url.rsplit('/', 1)[-1]}")
    if not args.skip_pages:
        from inventory.tasks import count_class_matches

        t0 = time.perf_counter()
        count_class_matches(cluster.id)  # what the background recount stores for the classes page
        print(f"device class match counts, background recount: {(time.perf_counter() - t0) * 1000:.0f} ms")
        bench_pages(client, args.runs, args.sorts, args.only)
        if args.explain:
            from bench_api import explain

            path = explain_file(args.explain, f"ui-{args.nodes}")
            with open(path, "w") as f:
                f.write(f"# EXPLAIN ANALYZE: bench/bench_ui.py, {args.nodes} nodes (queries over 1 ms)\n\n")
                pages = [
                    (n, u)
                    for n, u in PAGES + sorted_pages(args.sorts)
                    if not args.only or any(o in n for o in args.only)
                ]
                f.write("\n".join(explain(client, label, url, min_ms=1.0) for label, url in pages))
            print(f"plans written to {path}")
    if not args.skip_fanout:
        bench_fanout(
            cluster,
            f"sessionid={client.cookies['sessionid'].value}",
            args.clients,
            args.rate,
            args.seconds,
            args.server,
        )


if __name__ == "__main__":
    main()
