"""Load on the web tier while previews run in preview workers (issue 31): /healthz, pages, API and previews at once.

    .venv/bin/python bench/bench_load.py [--mode production|embedded] [--seconds 60] [--clients 20] [--previews 4]
                                         [--quiet-previews 4] [--embedded-db sqlite|postgres] [--nodes 5000]
                                         [--claims 20000] [--reload] [--port 8765] [--load-only]

production: PostgreSQL, Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379/14; flushed at start),
`manage.py serve --workers 2` and one
`celery -A gpudash worker -Q preview -c 2 -P prefork` (two preview worker processes).
embedded: no REDIS_URL, `manage.py serve` with its local pool of GPUDASH_PREVIEW_WORKERS (2) processes,
on a SQLite file (BENCH_SQLITE, default /tmp/gpudash_bench_load.sqlite3) holding the same fleet;
--embedded-db postgres runs the embedded mode on PostgreSQL instead. Both servers run with
--no-watchers: the bench cluster has no API server to watch. DB_CONN_MAX_AGE is left at 0 (the
default): persistent connections under ASGI are kept per request thread and ran a shared PostgreSQL
(max_connections 100) out of connections within seconds. Server logs go to --logs (bench_load_logs in the temporary directory).

The fleet is bench_api.py's 5,000-node fleet (loaded by its loader when the database lacks it;
BENCH_DATABASE_URL, default a `gpudash_bench_load` database). Users are made here, one operator per
client (so the per-user preview limit never refuses one client's back-to-back previews); pages use a
session cookie, the API a token.

Load, each class from a process of its own so that one class's client work does not delay another's
timing (the probe especially):
- probe: GET /healthz every 100 ms on a new connection each time (as a load balancer would), 5 s timeout;
- --clients clients, back to back, cycling through pages and API GETs (PAGES, API below);
- --previews clients posting worst-case previews back to back (PREVIEWS below): a List of 500 distinct
  claims and a pod with 16 claims that fits nowhere (the scheduler's PostFilter on every node), both
  ending at the 20 s preview deadline, and a claim for 8 MIG devices whose constraint cannot be met
  (a search on every MIG node; about 0.6 s alone, seconds under this load).
Before the measured --seconds: one GET of each page and two rounds of light previews (both workers warm).

Printed: p50/p95/p99/max client-observed time per class and per URL, counts by status (5xx counted and
listed; 429 is expected for previews past admission), the preview's Server-Timing (claims/api/preview.py):
`queue` = the web process's wall time from queueing to the answer minus the worker's run time, split
into waiting until a worker started it and the rest; the pick-up when a worker was free, estimated per
preview as min(wait, the worker's idle time before it); then a second, quiet phase (--quiet-previews,
one preview at a time, nothing else running) for the queue's cost with idle workers. Also the CPU seconds
each group of processes used during the measured window (processes replaced meanwhile included), the
load clients' and the rest of the machine's, how busy other users kept the machine in 5 s before the
window, and the load average. Figures are printed, not
asserted.
"""

import argparse
import asyncio
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_load"
DEFAULT_SQLITE = os.path.join(tempfile.gettempdir(), "gpudash_bench_load.sqlite3")
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
SECRET = "bench-load-secret-key-not-for-production-0123456789"
PYTHON = sys.executable

PAGES = [
    "/?cluster=bench",
    "/fleet/map/",
    "/devices/",
    "/devices/?q=productName+%3D+NVIDIA+H100+80GB+HBM3%3B+memory+%3E%3D+40Gi",
    "/claims/",
    "/claims/?namespace=team-03&state=pending",
    "/claims/?state=reserved&namespace=team-07",
    "/nodes/",
    "/nodes/?min_free_gpus=8&gpu_model=NVIDIA+H100+80GB+HBM3",
    "/nodes/bench/node-02500/",
    "/pods/",
]
API = [
    "/api/v1/devices/?attribute=productName:NVIDIA%20H100%2080GB%20HBM3&capacity=memory%3E%3D40Gi&page_size=100",
    "/api/v1/devices/?state=free&page_size=100",
    "/api/v1/devices/?node=node-01234",
    "/api/v1/claims/",
    "/api/v1/claims/?state=pending&page_size=100",
    "/api/v1/claims/?namespace=team-05&state=reserved",
    "/api/v1/nodes/?page_size=100",
    "/api/v1/aggregates/devices",
    "/api/v1/aggregates/allocation",
]


def claim_yaml(name, namespace, body):
    return f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{body}"


ONE_GPU = "  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com, count: 1}\n"


def list_of_claims(n, namespace="team-00"):
    """A `kind: List` of n distinct 1-GPU claims (the issue's 500 claims: the engine runs into the deadline)."""
    items = []
    for i in range(n):
        items.append(
            f"- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaim\n  metadata: {{name: load-{i}, namespace: {namespace}}}\n"
            f"  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {{deviceClassName: gpu.nvidia.com, count: 1}}\n"
        )
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


# 8 MIG devices whose uuids must all be equal: never true, so on every MIG node the allocator searches
# the combinations of its MIG devices (the counters cut it short: about 0.6 s over the fleet alone).
HARD_CONSTRAINT = claim_yaml(
    "hard-search",
    "team-01",
    """  devices:
    requests:
    - name: mig
      exactly: {deviceClassName: mig.nvidia.com, count: 8}
    constraints:
    - matchAttribute: gpu.nvidia.com/uuid
""",
)


def pod_with_claims(n, namespace="team-02"):
    """A pod with n claims from the fleet's 1-GPU template: n > 8 fits on no node (8 GPUs each), so the
    scheduler's PostFilter runs too."""
    claims = "".join(f"  - name: c{i}\n    resourceClaimTemplateName: gpu-1\n" for i in range(n))
    refs = "".join(f"        - name: c{i}\n" for i in range(n))
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: many-claims, namespace: {namespace}}}\nspec:\n"
        f"  containers:\n  - name: main\n    image: busybox\n    resources:\n      claims:\n{refs}"
        f"  resourceClaims:\n{claims}"
    )


PREVIEWS = [
    ("List of 500 claims", list_of_claims(500), "team-00"),
    ("claim, 8 MIG devices with an unmeetable constraint", HARD_CONSTRAINT, "team-01"),
    ("pod with 16 claims", pod_with_claims(16), "team-02"),
]
LIGHT = ("1 GPU", claim_yaml("light", "team-00", ONE_GPU), "team-00")


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------- database, users


def open_database(args):
    """Point Django (this process) at the run's database, migrate, load the fleet if missing. Returns the env
    the servers get."""
    env = {
        "SECRET_KEY": SECRET,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SETTINGS_MODULE": "gpudash.settings",
        "DB_CONN_MAX_AGE": "0",
        "GPUDASH_PREVIEW_WORKERS": "2",
        "PYTHONUNBUFFERED": "1",
    }
    sqlite = args.mode == "embedded" and args.embedded_db == "sqlite"
    if sqlite:
        env["DATABASE_URL"] = f"sqlite:///{os.environ.get('BENCH_SQLITE', DEFAULT_SQLITE)}"
    else:
        env["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    if args.mode == "production":
        env["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS)
    else:
        env["REDIS_URL"] = ""
        if not sqlite:
            env["GPUDASH_PREVIEW_BACKEND"] = "local"
    os.environ.update(env)
    if not sqlite:
        from bench_api import ensure_database

        ensure_database(env["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench_api import fleet_matches, load

    if args.reload or not fleet_matches(args.nodes):
        load(args.nodes, args.claims)
    return env


def make_users(n_clients, n_previews):
    """One operator per client, with a token (API) and a session (pages). Returns ([(token, sessionid)], ...)."""
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    operator, _ = Group.objects.get_or_create(name="operator")

    def user(name):
        u, _ = User.objects.get_or_create(username=name)
        u.groups.add(operator)
        token, _ = Token.objects.get_or_create(user=u)
        client = Client()
        client.force_login(u)
        return token.key, client.cookies["sessionid"].value

    admin, _ = User.objects.get_or_create(
        username="bench-load-admin", defaults={"is_superuser": True, "is_staff": True}
    )
    admin_token, _ = Token.objects.get_or_create(user=admin)
    return (
        [user(f"bench-load-{i}") for i in range(n_clients)],
        [user(f"bench-load-preview-{i}") for i in range(n_previews)],
        admin_token.key,
    )


# ---------------------------------------------------------------- servers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_servers(args, env, port, logdir):
    full_env = {**os.environ, **env}
    if not env.get("REDIS_URL"):
        full_env.pop("REDIS_URL", None)
    procs = {}
    serve = [PYTHON, "manage.py", "serve", "--port", str(port), "--no-watchers"]
    if args.mode == "production":
        serve += ["--workers", "2"]
        celery = shutil.which("celery", path=str(Path(PYTHON).parent)) or "celery"
        procs["preview workers"] = subprocess.Popen(
            [
                celery,
                "-A",
                "gpudash",
                "worker",
                "-Q",
                "preview",
                "-c",
                "2",
                "-P",
                "prefork",
                "--loglevel",
                "warning",
                "-n",
                f"bench-load-preview@{socket.gethostname()}",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=open(logdir / "celery.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    procs["web"] = subprocess.Popen(
        serve,
        cwd=ROOT,
        env=full_env,
        stdout=open(logdir / "serve.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return procs


def stop_servers(procs):
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def process_tree(pid):
    """pid and every descendant (from /proc), for CPU accounting."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pid_cpu(pid):
    """CPU seconds (user + system) of one process so far, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """CPU seconds each group of server processes used over a window, processes that start (a replaced
    preview worker) or die during it included: the trees are re-read every 0.5 s and each process
    counts from its first sample (from 0 when it started inside the window) to its last."""

    def __init__(self, groups):
        self.groups = groups  # name -> callable giving the group's pids now
        self.first, self.last, self.owner = {}, {}, {}
        self.stop = threading.Event()
        self.sample(initial=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self, initial=False):
        for name, pids in self.groups.items():
            for pid in pids():
                value = pid_cpu(pid)
                if value is None:
                    continue
                if pid not in self.first:
                    self.first[pid] = value if initial else 0.0
                    self.owner[pid] = name
                self.last[pid] = value

    def run(self):
        while not self.stop.wait(0.5):
            self.sample()

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.sample()
        out = dict.fromkeys(self.groups, 0.0)
        for pid, name in self.owner.items():
            out[name] += self.last[pid] - self.first[pid]
        return out


def total_cpu():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


# ---------------------------------------------------------------- clients (each class in its own process)


def run_class(kind, base, until, payload, out):
    asyncio.run(_run_class(kind, base, until, payload, out))


async def _timed(session, method, url, **kw):
    import aiohttp

    t0 = time.perf_counter()
    try:
        async with session.request(method, url, **kw) as response:
            body = await response.read()
            seconds = time.perf_counter() - t0
            # The Server-Timing header of an answer, or the start of the body of a refusal or failure.
            info = (
                response.headers.get("Server-Timing")
                if response.status < 300
                else body[:240].decode("utf-8", "replace")
            )
            return response.status, seconds, info, len(body)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return f"error {type(exc).__name__}", time.perf_counter() - t0, None, 0


async def _run_class(kind, base, until, payload, out):
    import aiohttp

    rows = []  # (label, status, seconds, Server-Timing or a refusal's text, started since the window opened, bytes)
    window = until - payload["seconds"]
    if kind == "probe":
        # A new connection per probe, as a load balancer's health check makes it.
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True), timeout=aiohttp.ClientTimeout(total=5)
        ) as session:
            next_at = time.monotonic()
            while next_at < until:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                start = time.monotonic()
                status, seconds, info, size = await _timed(session, "GET", base + "/healthz")
                rows.append(("/healthz", status, seconds, info, start - window, size))
                next_at += 0.1
                if next_at < time.monotonic():
                    next_at = time.monotonic()  # a slow probe: the next one goes at once, none are bunched
    elif kind == "browse":
        urls = [("page", u) for u in PAGES] + [("api", u) for u in API]

        async def client(i, token, sessionid):
            headers = {"api": {"Authorization": f"Token {token}"}, "page": {"Cookie": f"sessionid={sessionid}"}}
            async with aiohttp.ClientSession(base, timeout=aiohttp.ClientTimeout(total=60)) as session:
                k = i * 7  # clients start at different places of the list
                while time.monotonic() < until:
                    what, url = urls[k % len(urls)]
                    k += 1
                    start = time.monotonic()
                    status, seconds, info, size = await _timed(session, "GET", url, headers=headers[what])
                    rows.append((f"{what} {url}", status, seconds, info, start - window, size))

        await asyncio.gather(*(client(i, t, s) for i, (t, s) in enumerate(payload["users"])))
    elif kind in ("previews", "warm", "quiet"):
        cases = payload["cases"]

        async def client(i, token):
            headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
            async with aiohttp.ClientSession(base, timeout=aiohttp.ClientTimeout(total=120)) as session:
                k = i
                rounds = 0
                while time.monotonic() < until and (payload.get("rounds") is None or rounds < payload["rounds"]):
                    label, text, namespace = cases[k % len(cases)]
                    k += 1
                    rounds += 1
                    import json

                    body = json.dumps({"cluster": "bench", "namespace": namespace, "yaml": text})
                    start = time.monotonic()
                    status, seconds, info, size = await _timed(
                        session, "POST", "/api/v1/preview", data=body, headers=headers
                    )
                    rows.append((label, status, seconds, info, start - window, size))
                    if status == 429:
                        await asyncio.sleep(
                            0.2
                        )  # what a script honouring Retry-After roughly does, without waiting seconds

        await asyncio.gather(*(client(i, t) for i, (t, _) in enumerate(payload["users"])))
    out.put((kind, rows))


def drive(classes, base, seconds):
    """Run each (kind, payload) in its own process for `seconds`; returns {kind: rows} and the wall window."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.monotonic() + 1.5  # processes start up before the window opens
    until = start + seconds
    procs = []
    for kind, payload in classes:
        p = ctx.Process(target=_delayed, args=(kind, base, start, until, {**payload, "seconds": seconds}, out))
        p.start()
        procs.append(p)
    results = {}
    for _ in procs:
        kind, rows = out.get()
        results[kind] = rows
    for p in procs:
        p.join()
    return results, procs


def _delayed(kind, base, start, until, payload, out):
    time.sleep(max(0.0, start - time.monotonic()))
    run_class(kind, base, until, payload, out)


def count_by(rows, label):
    out = {}
    for name, status, _, _, at, _ in rows:
        if name == label and at >= 0:
            out[status] = out.get(status, 0) + 1
    return out


def parse_timing(header):
    out = {}
    for part in (header or "").split(","):
        name, _, rest = part.strip().partition(";dur=")
        if rest:
            out[name] = float(rest)
    return out


# ---------------------------------------------------------------- report


def row(label, seconds_list):
    ms = [s * 1000 for s in seconds_list]
    if not ms:
        return f"{label:60} {'-':>7}"
    return f"{label:60} {len(ms):7d} {pct(ms, 50):8.0f} {pct(ms, 95):8.0f} {pct(ms, 99):8.0f} {max(ms):8.0f}"


def report(results, seconds):
    head = f"{'class / request':60} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    classes = {"healthz": [], "pages": [], "API": [], "previews (200)": []}
    statuses = {}
    per_url = {}
    five = []
    for kind, rows in results.items():
        for label, status, secs, info, at, _ in rows:
            if at < 0:
                continue
            cls = {"probe": "healthz", "previews": "previews"}.get(kind, kind)
            if kind == "browse":
                cls = "pages" if label.startswith("page ") else "API"
            statuses.setdefault(cls, {}).setdefault(status, 0)
            statuses[cls][status] += 1
            if isinstance(status, int) and status >= 500 or not isinstance(status, int):
                five.append((cls, label[:60], status, round(secs * 1000), round(at, 1), (info or "")[:200]))
            if cls == "previews":
                if status == 200:
                    classes["previews (200)"].append(secs)
                    per_url.setdefault(f"  preview: {label}", []).append(secs)
            else:
                classes[cls].append(secs)
                if cls in ("pages", "API"):
                    per_url.setdefault("  " + label, []).append(secs)
    print(head)
    for cls, secs in classes.items():
        print(row(cls, secs))
    print("\nper request (client-observed):")
    for label in sorted(per_url):
        print(row(label[:60], per_url[label]))
    print(
        "\nstatus counts: "
        + "; ".join(
            f"{cls}: " + ", ".join(f"{k} x{v}" for k, v in sorted(c.items(), key=str)) for cls, c in statuses.items()
        )
    )
    throughput = {cls: len(v) / seconds for cls, v in classes.items()}
    print("throughput (/s): " + ", ".join(f"{k} {v:.1f}" for k, v in throughput.items()))
    print(f"5xx and failed requests: {len(five)}")
    for entry in five[:20]:
        print("   ", entry)
    return classes


def queue_report(rows, title):
    timed = [parse_timing(t) for _, status, _, t, at, _ in rows if status == 200 and t and at >= 0]
    print(f"\n{title}: {len(timed)} previews answered by a worker (Server-Timing, ms)")
    if not timed:
        return None
    fields = {
        "queue = wall - run (all it added)": [t["queue"] for t in timed],
        "  of it, until a worker started it (wait)": [t["wait"] for t in timed],
        "  of it, the rest (answer back, encode/decode)": [t["queue"] - t["wait"] for t in timed],
        "  pick-up with a worker free: min(wait, idle)": [
            min(t["wait"], t["idle"]) if "idle" in t else t["wait"] for t in timed
        ],
        "queue minus waiting for a busy worker": [
            t["queue"] - t["wait"] + (min(t["wait"], t["idle"]) if "idle" in t else t["wait"]) for t in timed
        ],
        "run (the worker's own time)": [t["run"] for t in timed],
    }
    print(f"{'':60} {'n':>7} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}")
    for label, values in fields.items():
        print(row(label, [v / 1000 for v in values]))
    return statistics.median(fields["queue minus waiting for a busy worker"]), statistics.median(
        fields["queue = wall - run (all it added)"]
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("production", "embedded"), default="production")
    parser.add_argument("--embedded-db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--previews", type=int, default=4)
    parser.add_argument(
        "--quiet-previews",
        type=int,
        default=4,
        help="previews one at a time after the load, the worst cases and a 1-GPU claim in turn (0: none)",
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--logs", default=os.path.join(tempfile.gettempdir(), "bench_load_logs"))
    parser.add_argument(
        "--load-only", action="store_true", help="Load (or check) the fleet of --mode's database, measure nothing."
    )
    args = parser.parse_args()
    if args.load_only:
        open_database(args)
        return

    print(
        f"bench_load: mode {args.mode}, {args.clients} clients, {args.previews} preview clients, {args.seconds:g} s; "
        f"started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {load_average()}, {os.cpu_count()} CPUs",
        flush=True,
    )
    env = open_database(args)
    print(f"database {os.environ['DATABASE_URL']}; REDIS_URL {env.get('REDIS_URL') or '(none)'}", flush=True)
    users, preview_users, admin_token = make_users(args.clients, args.previews)
    from django.db import connections

    connections.close_all()  # SQLite: no lock held while the servers run
    if args.mode == "production":
        import redis

        redis.Redis.from_url(env["REDIS_URL"]).flushdb()  # no stale jobs or admission tickets of an earlier run
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    logdir = Path(args.logs) / args.mode
    logdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    procs = start_servers(args, env, port, logdir)
    try:
        import requests

        while True:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise SystemExit(f"{name} exited ({proc.returncode}); see {logdir}")
            try:
                if requests.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() - started > 120:
                raise SystemExit("the server did not answer /healthz within 120 s")
            time.sleep(0.3)
        print(f"server answering {time.monotonic() - started:.1f} s after start", flush=True)
        # Warm-up (not counted): every page once, then two rounds of light previews from every preview
        # client at once so that both preview workers have built their inventories.
        s = requests.Session()
        s.cookies.set("sessionid", users[0][1])
        for url in PAGES:
            r = s.get(base + url, timeout=60)
            assert r.status_code == 200, (url, r.status_code, r.text[:300])
        for url in API:
            r = s.get(base + url, headers={"Authorization": f"Token {users[0][0]}"}, timeout=60)
            assert r.status_code == 200, (url, r.status_code, r.text[:300])
        warm, _ = drive([("warm", {"users": preview_users, "cases": [LIGHT], "rounds": 2})], base, 120)
        print(
            "warm-up previews: " + ", ".join(f"{st} {secs:.1f}s" for _, st, secs, _, _, _ in warm["warm"]), flush=True
        )
        print(
            f"ready {time.monotonic() - started:.1f} s after start; workers: "
            + str(
                requests.get(
                    base + "/api/v1/preview/workers", headers={"Authorization": f"Token {admin_token}"}, timeout=10
                ).json()
            ),
            flush=True,
        )

        # The measured window.
        if args.mode == "embedded":  # the local pool's workers are the web process's children
            web = procs["web"].pid
            groups = {"web": lambda: [web], "preview workers": lambda: [p for p in process_tree(web) if p != web]}
        else:
            groups = {name: (lambda pid=proc.pid: process_tree(pid)) for name, proc in procs.items()}
        # What the rest of the machine (other users) keeps busy over 5 s with no load on this bench's
        # servers (their own CPU, e.g. a preview worker still warming up, taken out).
        a, ours = total_cpu(), CpuSampler(groups)
        time.sleep(5)
        b, ours = total_cpu(), sum(ours.finish().values())
        tick = os.sysconf("SC_CLK_TCK")
        background = max(0.0, ((b[0] - a[0]) - (b[1] - a[1])) / tick - ours) / max(1e-9, (b[0] - a[0]) / tick)
        print(
            f"before the window, no load: other users kept the machine {background:.0%} busy, this bench's servers used "
            f"{ours:.1f} CPU s in 5 s; load average {load_average()}"
        )
        sampler = CpuSampler(groups)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        children_before = usage.ru_utime + usage.ru_stime  # the warm-up's client process, reaped
        machine_before = total_cpu()
        load_before = load_average()
        print(
            f"\nmeasuring {args.seconds:g} s from {time.strftime('%H:%M:%S')}, load average {load_before}", flush=True
        )
        classes = [
            ("probe", {}),
            ("browse", {"users": users}),
            ("previews", {"users": preview_users, "cases": PREVIEWS}),
        ]
        results, client_procs = drive(classes, base, args.seconds)
        load_after = load_average()
        machine_after = total_cpu()
        used = sampler.finish()
        print(f"ended {time.strftime('%H:%M:%S')}, load average {load_after}\n")
        report(results, args.seconds)
        queue_report(results["previews"], "queue under load")
        tick = os.sysconf("SC_CLK_TCK")
        busy = ((machine_after[0] - machine_before[0]) - (machine_after[1] - machine_before[1])) / tick
        share = busy / max(1e-9, (machine_after[0] - machine_before[0]) / tick)
        clients = resource.getrusage(resource.RUSAGE_CHILDREN)
        clients = clients.ru_utime + clients.ru_stime - children_before
        ours = sum(used.values())
        elapsed = (machine_after[0] - machine_before[0]) / tick / os.cpu_count()
        print(
            f"\nCPU seconds from the clients' start to the last answer ({elapsed:.0f} s x {os.cpu_count()} CPUs; the machine was {share:.0%} busy, "
            f"{busy:.1f} CPU s): "
            + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
            + f", the load clients {clients:.1f}, everything else (PostgreSQL, Redis, other users of the machine) {busy - ours - clients:.1f}"
            + f" (other users alone, at the rate measured before the window: ~{background * elapsed * os.cpu_count():.0f})"
        )
        print(
            "preview answers per status: "
            + "; ".join(
                f"{label}: "
                + ", ".join(f"{st} x{n}" for st, n in sorted(count_by(results["previews"], label).items(), key=str))
                for label, _, _ in PREVIEWS
            )
        )

        if args.quiet_previews:
            print(
                f"\nquiet phase: {args.quiet_previews} previews one at a time, nothing else running, load average {load_average()}",
                flush=True,
            )
            quiet, _ = drive(
                [("quiet", {"users": preview_users[:1], "cases": PREVIEWS + [LIGHT], "rounds": args.quiet_previews})],
                base,
                600,
            )
            for label, status, secs, info, _, size in quiet["quiet"]:
                print(f"  {label:50} {status} {secs * 1000:8.0f} ms {size / 1e6:6.2f} MB  {info}")
            queue_report(quiet["quiet"], "queue with idle workers")
    finally:
        stop_servers(procs)


if __name__ == "__main__":
    main()
