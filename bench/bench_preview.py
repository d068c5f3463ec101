"""Preview page server time on the 5,000-node bench fleet (the one bench/bench_ui.py and bench_api.py load).

    .venv/bin/python bench/bench_preview.py [--runs 5]
    .venv/bin/python bench/bench_preview.py --live [--rate 100] [--seconds 30]

--live: the live preview inventory (claims/live_inventory.py) in this process, the sync in another
(a second process applies --rate claim changes per second through mirror.sync.apply.apply_batch,
as a watcher does, each transaction carrying every change due by then): the first preview after
start (inventory build + first engine run), warm previews, then previews while the changes land
(each preview catches up from the change log first). With no `bench` cluster of --nodes nodes in the
database, --live loads bench_api.py's fleet first (minutes); give it its own BENCH_DATABASE_URL.

In-process Django test client (sessions, auth, view, engine, template): figures are printed, not asserted.
Uses BENCH_DATABASE_URL (default: the `gpudash_bench_ui` database; load it first with bench/bench_ui.py).
"""

import time

STARTED = time.perf_counter()  # --startup-child: "since start" counts from here (Python itself is up)

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONE_GPU = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: %s, count: 1}
"""
EIGHT_GPUS = ONE_GPU.replace("count: 1", "count: 8").replace("one-gpu", "eight-gpus")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--live", action="store_true", help="The live inventory: first preview after start, warm, and under sync churn."
    )
    parser.add_argument("--rate", type=float, default=100, help="--live: changes per second the sync applies meanwhile")
    parser.add_argument("--seconds", type=float, default=30, help="--live: how long the churn runs")
    parser.add_argument(
        "--engine",
        action="store_true",
        help="The engine alone, in process (no database): node filters + DRA for a pod.",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=5000,
        help="--engine: fleet size; --live/page: the fleet to load when the database has none (or another size)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="--engine: cProfile one warm pod preview and print the top functions"
    )
    parser.add_argument(
        "--startup-child", choices=("ready", "during"), help=argparse.SUPPRESS
    )  # --live runs these in fresh processes
    args = parser.parse_args()
    if args.startup_child:
        return startup_child(args.startup_child)
    if args.live:
        return live_main(args)
    if args.engine:
        return engine_main(args)
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui"
    )
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # responses carry their template context (the report's counts)

    from inventory.models import DeviceClass, Node
    from mirror.models import Cluster

    settings.ALLOWED_HOSTS = ["*"]
    cluster = Cluster.objects.filter(name="bench").first()
    if cluster is None:
        sys.exit("no `bench` cluster: run bench/bench_ui.py first (it loads the fleet)")
    cls = next(
        (n for n in DeviceClass.objects.filter(cluster=cluster).values_list("name", flat=True) if "gpu" in n), None
    )
    user = User.objects.filter(username="bench-ui").first() or User.objects.create_superuser(
        "bench-ui", password="bench-ui-pass"
    )
    client = Client()
    client.force_login(user)
    url = "/preview/?cluster=bench"
    print(f"fleet: {Node.objects.filter(cluster=cluster).count()} nodes; class {cls}")
    cases = [
        ("1 GPU, no headroom", {"yaml": ONE_GPU % cls, "namespace": "default"}),
        ("1 GPU + headroom", {"yaml": ONE_GPU % cls, "namespace": "default", "headroom": "1"}),
        ("1 GPU, fits page 40", {"yaml": ONE_GPU % cls, "namespace": "default", "show": "fits:40"}),
        ("8 GPUs + headroom", {"yaml": EIGHT_GPUS % cls, "namespace": "default", "headroom": "1"}),
    ]
    t0 = time.perf_counter()
    resp = client.post(url, cases[0][1])
    print(
        f"cold (builds the cluster's Inventory): {(time.perf_counter() - t0) * 1000:.0f} ms, {len(resp.content) // 1024} KiB"
    )
    # Timed through Django's handler (server_post); one test-client request per case reads the
    # report's counts from the template context.
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    cookie = {"HTTP_COOKIE": f"{settings.SESSION_COOKIE_NAME}={session}"}
    for name, data in cases:
        times = [server_post(url, data, **cookie)[0] for _ in range(args.runs)]
        resp = client.post(url, data)
        assert resp.status_code == 200, resp.status_code
        report = resp.context["report"]
        engine = report.summary.get("seconds", 0) * 1000
        room = (report.headroom or {}).get("seconds")
        print(
            f"{name:24s} median {statistics.median(times):6.0f} ms  max {max(times):6.0f} ms  engine {engine:5.0f} ms"
            f"{f'  headroom {room * 1000:5.0f} ms' if room is not None else ''}  fit {report.fit_count}/{report.total}"
            f"  groups {len(resp.context['groups'])}  html {len(resp.content) // 1024} KiB"
        )
    del resp
    gc.collect()  # the test client's responses above sit in reference cycles: not the API rows' to pay for
    api_main(args, user, cls)


def server_post(url, data, content_type=None, **meta):
    """(server time in ms, response) of one POST through Django's handler as a server calls it. The
    test client keeps each response in a reference cycle (its `json` helper), which would leave every
    20,000-node answer to the cyclic collector and bill its collections to later requests."""
    from django.test.client import ClientHandler, RequestFactory

    kwargs = {"content_type": content_type} if content_type else {}
    environ = RequestFactory().post(url, data, **kwargs).environ
    environ.update(meta)
    t0 = time.perf_counter()
    response = ClientHandler(enforce_csrf_checks=False)(environ)
    elapsed = (time.perf_counter() - t0) * 1000
    assert response.status_code == 200, response.content[:300]
    return elapsed, response


def api_main(args, user, cls):
    """POST /api/v1/preview (server_post): a 1-GPU claim with a new name each time, and the pod."""
    import json

    from rest_framework.authtoken.models import Token

    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.get_or_create(user=user)[0].key}"}

    def post(yaml_text):
        body = json.dumps(
            {
                "cluster": "bench",
                "namespace": "team-00",
                "yaml": yaml_text.replace("namespace: default", "namespace: team-00"),
            }
        )
        elapsed, response = server_post("/api/v1/preview", body, content_type="application/json", **auth)
        return elapsed, len(response.content)

    for name, texts in (
        ("API, 1 GPU, new name", ((ONE_GPU % cls).replace("name: ", f"name: api-{i}-", 1) for i in range(10**6))),
        ("API, pod", iter(lambda: POD, None)),
    ):
        post(next(texts))
        measured = [post(next(texts)) for _ in range(max(args.runs, 5))]
        times = [m[0] for m in measured]
        print(
            f"{name:24s} median {statistics.median(times):6.0f} ms  max {max(times):6.0f} ms  JSON {measured[-1][1] // 1024} KiB"
        )


POD = """apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-00}
spec:
  nodeSelector: {topology.kubernetes.io/zone: zone-1}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: trainer
    resources:
      requests: {cpu: "8", memory: 64Gi}
      claims: [{name: gpu}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-1}]
"""


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def churn(db_url, cluster_id, rate, seconds, started, counts, batches=None, elapsed=None):
    """(a child process) The sync's side: `rate` claim changes per second through apply_batch. Each
    batch carries every change that is due by then, as a watcher applies what waits in its stream
    together: a fifth of a second's worth when the transactions keep up, more when one took longer
    (a fixed batch size fell behind the rate on a loaded machine: 67/s instead of 100/s)."""
    os.environ["DATABASE_URL"] = db_url
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import copy
    import random

    import django

    django.setup()
    from claims.models import ResourceClaim
    from mirror.models import Cluster
    from mirror.sync.apply import MODIFIED, apply_batch

    cluster = Cluster.objects.get(pk=cluster_id)
    rows = list(ResourceClaim.objects.filter(cluster=cluster).values_list("raw", flat=True)[:4000])
    originals = {r["metadata"]["name"]: r for r in rows}
    current = {name: copy.deepcopy(r) for name, r in originals.items()}
    from django.db.models import Max

    # Newer than anything stored (an earlier run's changes included), or apply_batch drops them as stale.
    rng = random.Random(5)
    rv = ResourceClaim.objects.filter(cluster=cluster).aggregate(rv=Max("resource_version_num"))["rv"] or 0
    names = sorted(current)
    per_batch = max(1, int(rate / 5))
    started.set()
    t0 = time.monotonic()
    n = k = 0
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate) - n  # changes that should have landed by now
        if due < per_batch:
            time.sleep((n + per_batch) / rate - (time.monotonic() - t0))
            due = per_batch
        batch = []
        for name in rng.sample(names, min(due, len(names))):
            raw = copy.deepcopy(current[name])
            rv += 1
            raw["metadata"]["resourceVersion"] = str(rv)
            status = raw.setdefault("status", {})
            if status.get("allocation"):  # released ...
                status.pop("allocation")
                status.pop("reservedFor", None)
            elif (originals[name].get("status") or {}).get("allocation"):  # ... and allocated again
                status.update(copy.deepcopy(originals[name]["status"]))
            else:
                raw["metadata"].setdefault("annotations", {})["bench/touched"] = str(rv)
            current[name] = raw
            batch.append((MODIFIED, raw))
        apply_batch(cluster, "ResourceClaim", batch, publish=False)
        n += len(batch)
        k += 1
    counts.value = n
    if batches is not None:
        batches.value = k
        elapsed.value = time.monotonic() - t0


def ensure_footprints(cluster):
    """The bench fleet is bulk-loaded without the pod watcher: give its pods the footprints the watcher
    would store (the pod preview's NodeResourcesFit counts them)."""
    from claims.models import Pod, PodFootprint
    from mirror.models import resource_version_number
    from mirror.sync.footprints import footprint_document

    if PodFootprint.objects.filter(cluster=cluster).exists():
        return
    rows = []
    for raw in Pod.objects.filter(cluster=cluster).values_list("raw", flat=True).iterator(chunk_size=2000):
        meta, doc = raw.get("metadata") or {}, footprint_document(raw)
        rows.append(
            PodFootprint(
                cluster=cluster,
                namespace=meta.get("namespace") or "",
                name=meta["name"],
                uid=meta.get("uid") or "",
                node_name=doc["node"],
                phase=doc.get("phase") or "",
                resource_version_num=resource_version_number(meta.get("resourceVersion")),
                raw=doc,
            )
        )
    PodFootprint.objects.bulk_create(rows, batch_size=2000)
    print(f"stored {len(rows)} pod footprints")


def live_main(args):
    import multiprocessing

    db_url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui")
    os.environ["DATABASE_URL"] = db_url
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_api import ensure_database, fleet_matches, load

    ensure_database(db_url)
    import django

    django.setup()
    from django.core.management import call_command

    from claims.live_inventory import forget, live_inventory
    from claims.preview import cluster_inventory, run_preview
    from inventory.models import DeviceClass
    from mirror.models import Cluster

    call_command("migrate", verbosity=0)
    if not fleet_matches(args.nodes):  # an empty database, or another fleet size: load bench_api's fleet
        load(args.nodes, args.nodes * 4)
    cluster = Cluster.objects.get(name="bench")
    cls = next(n for n in DeviceClass.objects.filter(cluster=cluster).values_list("name", flat=True) if "gpu" in n)
    claim = ONE_GPU % cls
    ensure_footprints(cluster)

    forget()
    t0, c0 = time.perf_counter(), time.process_time()
    inv = cluster_inventory(cluster)
    built, built_cpu = time.perf_counter() - t0, time.process_time() - c0
    t1, c1 = time.perf_counter(), time.process_time()
    first = run_preview(cluster, yaml_text=claim)
    engine, engine_cpu = time.perf_counter() - t1, time.process_time() - c1
    print(f"fleet: {len(inv.node_names)} nodes, {len(inv.devices_by_key)} devices, {len(inv.claims)} claims")
    print(
        f"first preview after start, cold: {(built + engine) * 1000:.0f} ms (inventory build {built * 1000:.0f} ms, "
        f"engine {engine * 1000:.0f} ms; CPU of this process {(built_cpu + engine_cpu) * 1000:.0f} ms = "
        f"{built_cpu * 1000:.0f} + {engine_cpu * 1000:.0f}; {first['summary']['fits']} nodes fit); load {os.getloadavg()[0]:.2f}"
    )
    from claims.live_inventory import warm_up

    forget()
    t0 = time.perf_counter()
    warm_up([cluster])  # what `manage.py serve` starts in a background thread
    warmed = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_preview(cluster, yaml_text=POD)
    print(
        f"start-up warm-up (build + one preview per class, in the background): {warmed * 1000:.0f} ms; "
        f"first user preview after it (the pod below): {(time.perf_counter() - t0) * 1000:.0f} ms"
    )
    for mode in ("ready", "during"):  # a fresh web process each: imports, Django, gpudash.asgi's warm-up
        child = subprocess.run(
            [sys.executable, __file__, "--startup-child", mode], capture_output=True, text=True, env=dict(os.environ)
        )
        print(child.stdout.strip() or f"--startup-child {mode} failed: {child.stderr[-2000:]}")
    # The same claim again and again (the node views keep its answers), and a claim with a new name
    # each time, as users paste them: the kept answers serve it too, under its own names.
    renamed = (claim.replace("name: ", f"name: probe-{i}-", 1) for i in range(10**6))
    for name, texts in (
        ("1 GPU claim, the same claim each time", None),
        ("1 GPU claim, a new claim name each time", renamed),
        ("pod: 1 GPU, toleration, node selector, CPU", None),
    ):
        times, cpu = [], []
        for _ in range(max(args.runs, 5)):
            text = next(texts) if texts is not None else (POD if name.startswith("pod") else claim)
            t0, c0 = time.perf_counter(), time.process_time()
            result = run_preview(cluster, yaml_text=text)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        print(
            f"warm, {name:48s} median {statistics.median(times):5.0f} ms  max {max(times):5.0f} ms  "
            f"(CPU median {statistics.median(cpu):4.0f} ms)  fit {result['summary']['fits']}"
        )

    live = live_inventory(cluster.pk)
    builds, updates = live.builds, live.updates
    ctx = multiprocessing.get_context("spawn")
    started, counts, batches, elapsed = ctx.Event(), ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("d", 0.0)
    worker = ctx.Process(
        target=churn, args=(db_url, cluster.pk, args.rate, args.seconds, started, counts, batches, elapsed)
    )
    worker.start()
    started.wait(120)
    times, cpu, catch_up, t_start = [], [], [], time.monotonic()
    n = 0
    while worker.is_alive():
        text = claim if n % 2 == 0 else POD
        t0, c0 = time.perf_counter(), time.process_time()
        before = live.updates
        run_preview(cluster, yaml_text=text)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        if live.updates != before:
            catch_up.append(live.last_update)
        n += 1
    worker.join()
    wall = time.monotonic() - t_start
    print(
        f"under churn: {counts.value} claim changes in {wall:.1f} s ({counts.value / max(elapsed.value, 1e-9):.0f}/s over its {elapsed.value:.1f} s, {batches.value} transactions) by another process; "
        f"{len(times)} previews (claim and pod alternating): p50 {pct(times, 50):.0f} ms, p95 {pct(times, 95):.0f} ms, "
        f"max {max(times):.0f} ms (CPU p50 {pct(cpu, 50):.0f} ms, p95 {pct(cpu, 95):.0f} ms); {live.updates - updates} updates, "
        f"{live.builds - builds} rebuilds"
    )
    if catch_up:
        print(
            f"catching up (per preview that found changes): reading log + rows p50 {pct([c[1] for c in catch_up], 50) * 1000:.0f} ms, "
            f"applying p50 {pct([c[2] for c in catch_up], 50) * 1000:.0f} ms (p95 {pct([c[1] + c[2] for c in catch_up], 95) * 1000:.0f} ms together)"
        )
    import resource

    print(
        f"peak RSS of this process (inventory, caches, Django): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mib():
    """This process's peak RSS (VmHWM): not ru_maxrss, which in a child started by fork + exec from
    a big parent (the --live bench) still holds the parent's size at the fork."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def startup_child(mode):
    """A fresh process that starts as the web process does (Django, then gpudash.asgi, whose import
    starts the preview warm-up thread), then asks for a 1-GPU claim preview: `ready` after the warm-up
    finished (time from start to inventory ready, then that preview), `during` at once (the preview
    waits for the warm-up's build; time from start to its answer)."""
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpudash_bench_ui"
    )
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    os.environ["GPUDASH_PREVIEW_WARM_UP"] = "1"
    import django

    django.setup()
    import gpudash.asgi  # noqa: F401  (starts the warm-up, as daphne / uvicorn / `manage.py serve` do)
    from claims import live_inventory
    from claims.preview import run_preview
    from inventory.models import DeviceClass
    from mirror.models import Cluster

    imported = time.perf_counter() - STARTED
    cluster = Cluster.objects.get(name="bench")
    cls = next(n for n in DeviceClass.objects.filter(cluster=cluster).values_list("name", flat=True) if "gpu" in n)
    load = os.getloadavg()[0]
    if mode == "ready":
        live_inventory._warm_up_thread.join()
        ready = time.perf_counter() - STARTED
        t0, c0 = time.perf_counter(), time.process_time()
        run_preview(cluster, yaml_text=ONE_GPU % cls)
        first = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        for _ in range(3):  # a few more of both shapes: what a serving web worker holds (caches of both)
            run_preview(cluster, yaml_text=ONE_GPU % cls)
            run_preview(cluster, yaml_text=POD)
        print(
            f"fresh process: Django + gpudash.asgi imported at {imported:.2f} s; preview inventory ready (built + warmed) "
            f"{ready:.2f} s after start; the first 1-GPU preview then {first[0]:.0f} ms (CPU {first[1]:.0f} ms); load {load:.2f}; "
            f"after six more previews (claim and pod) this web process holds {_rss_mib():.0f} MiB (peak {_peak_rss_mib():.0f} MiB)"
        )
    else:
        t0 = time.perf_counter()
        run_preview(cluster, yaml_text=ONE_GPU % cls)
        done = time.perf_counter()
        live = live_inventory.live_inventory(cluster.pk)
        print(
            f"fresh process: a 1-GPU preview asked at {t0 - STARTED:.2f} s, during the warm-up, answered {done - STARTED:.2f} s "
            f"after start (it waited {done - t0:.2f} s for the warm-up's build; builds {live.builds}); load {load:.2f}"
        )


def engine_main(args):
    """The 5,000-node fleet in process: GPU nodes tainted `nvidia.com/gpu=present:NoSchedule` (as GPU
    node pools commonly are), every 50th node cordoned, each of the fleet's pods requesting 4 cpu and
    16Gi; previews of the POD above (1 GPU from a template, a toleration, a node selector, 8 cpu)."""
    from devcluster.fleet import generate_fleet
    from dra import Inventory

    objects = generate_fleet(nodes=args.nodes, claims=args.nodes * 4)
    for i, node in enumerate(objects["nodes"]):
        node["spec"].setdefault("taints", []).append(
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        )
        if i % 50 == 49:
            node["spec"]["unschedulable"] = True
    for pod in objects["pods"]:
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4", "memory": "16Gi"}}
    t0 = time.perf_counter()
    inv = Inventory.from_objects(objects)
    gc.collect()
    gc.freeze()  # as the live inventory does after its build
    print(
        f"fleet: {len(inv.node_names)} nodes, {len(inv.pod_footprints)} bound pods counted; inventory built in {(time.perf_counter() - t0) * 1000:.0f} ms"
    )
    claim = ONE_GPU % "gpu.nvidia.com"
    cases = (
        ("pod: 1 GPU, toleration, node selector, CPU", POD, {}),
        ("1 GPU claim, would-be pod (no toleration)", claim, {}),
        (
            "1 GPU claim, would-be pod tolerating the taint",
            claim,
            {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
        ),
        ("1 GPU claim, node filters off", claim, {"node_filters": False}),
    )
    for name, text, kw in cases:
        run_engine_case(args, inv, name, text, kw)
    # No node fits, so the PostFilters run (preemption.py): every node has a lower-priority pod, the pod
    # wants a whole node's cpu (each rejection resolvable) and 16 GPUs (after the evictions
    # DynamicResources still rejects): the worst case, every node rechecked with DRA.
    for node in objects["nodes"]:
        objects["pods"].append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"agent-{node['metadata']['name']}", "namespace": "kube-system"},
                "spec": {
                    "nodeName": node["metadata"]["name"],
                    "priority": 0,
                    "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    inv = Inventory.from_objects(objects)
    gc.collect()
    gc.freeze()
    big = POD.replace('requests: {cpu: "8", memory: 64Gi}', 'requests: {cpu: "191"}').replace(
        "spec:\n", "spec:\n  priority: 1000\n  tolerations: [{operator: Exists}]\n", 1
    )
    big = big.replace("  nodeSelector: {topology.kubernetes.io/zone: zone-1}\n", "").replace(
        "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n", ""
    )
    big = (
        big.replace("resourceClaimTemplateName: gpu-1", "resourceClaimName: sixteen")
        + """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: sixteen, namespace: team-00}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 16}}]}}
"""
    )
    run_engine_case(args, inv, "pod fitting nowhere: PostFilter rechecks every node", big, {})


def run_engine_case(args, inv, name, text, kw):
    from dra import headroom, load_documents, preview, resolve_claims
    from dra.nodefilters import scheduling_pod

    docs = load_documents(text)
    times, room_times, cpu = [], [], []
    for i in range(max(args.runs, 5) + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        claims, bound = resolve_claims(inv, docs)
        filters = kw.get("node_filters", True)
        pod = scheduling_pod(docs, tolerations=kw.get("tolerations")) if filters else None
        result = preview(inv, claims, bound=bound, pod=pod, node_filters=filters)
        elapsed = (time.perf_counter() - t0) * 1000
        used = (time.process_time() - c0) * 1000
        t1 = time.perf_counter()
        room = headroom(inv, claims, pod=pod, node_filters=filters)
        if i:  # the first run pays for the CEL results of the class: "warm" is the rest
            times.append(elapsed)
            cpu.append(used)
            room_times.append((time.perf_counter() - t1) * 1000)
        else:
            first = (elapsed, used)
    s = result["summary"]
    print(
        f"first, {name:47s} preview {first[0]:6.0f} ms (CPU {first[1]:4.0f}; the first of this request shape on this Inventory)"
    )
    if args.profile and text is POD:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        claims, bound = resolve_claims(inv, docs)
        preview(inv, claims, bound=bound, pod=scheduling_pod(docs), node_filters=True)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    print(
        f"warm, {name:48s} preview median {statistics.median(times):5.0f} ms (max {max(times):4.0f}, CPU median {statistics.median(cpu):4.0f})  headroom median "
        f"{statistics.median(room_times):5.0f} ms  fit {s['fits']}/{s['nodes']}  filtered {s['filtered']}  copies {room['copies']}"
    )
    if s.get("postFilter"):
        print(f"      scheduler message: {s['schedulerMessage'][:300]}")


if __name__ == "__main__":
    main()
