"""Memory of a preview worker per fleet size: what to give the `preview` Deployment (and the local pool).

    .venv/bin/python bench/bench_preview_memory.py [--nodes 1000,5000,20000] [--timeout 600]
    .venv/bin/python bench/bench_preview_memory.py --database 1000      # cross-check through the database

Each size runs in a fresh child process, so nothing of an earlier size stays in the figures. The child
starts as a preview worker does (imports, Django set up), notes its RSS, then builds the engine
Inventory of a bench fleet (devcluster.fleet.generate_fleet, 8 GPUs a node, a fifth of the nodes with
MIG partitions, 4 claims and pods a node, as bench_preview.py --engine), drops the fleet's objects,
runs one preview per DeviceClass (what the warm-up runs: it fills the CEL results and node views) and
then one warm pod preview. Printed per size: RSS before, RSS after (what the worker keeps) and the
peak (VmHWM: the fleet's objects and the Inventory side by side while it is built; a limit must leave
room for it), and the growth per 1,000 nodes.

--database N: the real path instead, as a preview worker runs it: a fresh process that sets Django up,
imports gpudash.asgi (which starts the preview warm-up) and builds the live inventory from PostgreSQL
rows (bench_preview.py's startup_child); it loads bench_api.py's fleet of N nodes into
BENCH_DATABASE_URL first when that database holds another one (default database
`gpudash_bench_memory`; loading takes a minute per few thousand nodes).

Figures are printed, not asserted (BENCHMARKS.md, "Preview worker memory").
"""

import argparse
import gc
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_preview import EIGHT_GPUS, ONE_GPU, POD, _peak_rss_mib, _rss_mib  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpudash_bench_memory"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nodes", default="1000,5000,20000", help="comma-separated fleet sizes, one fresh process each"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds one size may take before it is skipped")
    parser.add_argument("--database", type=int, metavar="N", help="the live inventory from PostgreSQL rows, N nodes")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    if args.database:
        return through_database(args.database)
    rows = []
    for nodes in (int(n) for n in args.nodes.split(",")):
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(nodes)],
                capture_output=True,
                text=True,
                timeout=args.timeout,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            print(f"{nodes} nodes: skipped, over {args.timeout:.0f} s")
            continue
        if out.returncode != 0:
            print(f"{nodes} nodes: the child failed:\n{out.stderr[-3000:]}")
            continue
        figures = dict(line.split("=", 1) for line in out.stdout.split() if "=" in line)
        print(out.stdout.strip().splitlines()[0])
        rows.append((nodes, float(figures["before"]), float(figures["after"]), float(figures["peak"])))
    if not rows:
        return
    print()
    print(
        "| nodes | RSS before (Django up) | RSS after build + warm previews | peak RSS (VmHWM) | kept per 1,000 nodes | peak per 1,000 nodes |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for nodes, before, after, peak in rows:
        print(
            f"| {nodes:,} | {before:.0f} MiB | {after:.0f} MiB | {peak:.0f} MiB | "
            f"{(after - before) / nodes * 1000:.0f} MiB | {(peak - before) / nodes * 1000:.0f} MiB |"
        )
    if len(rows) > 1:  # the slope between the smallest and the largest fleet: fixed costs cancel out
        (n0, _, a0, p0), (n1, _, a1, p1) = rows[0], rows[-1]
        print(
            f"\nslope {n0:,} -> {n1:,} nodes: kept {(a1 - a0) / (n1 - n0) * 1000:.0f} MiB, "
            f"peak {(p1 - p0) / (n1 - n0) * 1000:.0f} MiB per 1,000 nodes"
        )


def child(nodes):
    """One fleet size in this (fresh) process; prints `before= after= peak=` (MiB) for the parent."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import django

    django.setup()  # a preview worker has Django and the apps loaded before it builds anything
    from devcluster.fleet import generate_fleet
    from dra import Inventory, load_documents, preview, resolve_claims
    from dra.nodefilters import scheduling_pod

    gc.collect()
    before = _rss_mib()
    t0 = time.perf_counter()
    objects = generate_fleet(nodes=nodes, claims=nodes * 4)
    devices = sum(len(s["spec"].get("devices") or []) for s in objects["resourceslices"])
    classes = [c["metadata"]["name"] for c in objects["deviceclasses"]]
    inv = Inventory.from_objects(objects)
    built = time.perf_counter() - t0
    del objects  # the worker keeps the Inventory, not the rows it was built from
    gc.collect()
    gc.freeze()  # as the live inventory does after its build

    def run(text):
        docs = load_documents(text)
        claims, bound = resolve_claims(inv, docs)
        pod = scheduling_pod(docs)
        return preview(inv, claims, bound=bound, pod=pod, node_filters=True)

    t0 = time.perf_counter()
    for name in classes:  # the warm-up: one preview per class
        run(ONE_GPU % name)
    run(EIGHT_GPUS % classes[0])
    warmed = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = run(POD)
    warm = time.perf_counter() - t0
    gc.collect()
    after, peak = _rss_mib(), _peak_rss_mib()
    print(
        f"{nodes:,} nodes ({devices:,} devices, {nodes * 4:,} claims): Django up {before:.0f} MiB; "
        f"built in {built:.1f} s, warm-up previews {warmed:.1f} s, a warm pod preview {warm * 1000:.0f} ms "
        f"({result['summary']['fits']} fit); kept {after:.0f} MiB, peak {peak:.0f} MiB"
    )
    print(f"before={before:.1f} after={after:.1f} peak={peak:.1f}")


def through_database(nodes):
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    os.environ["BENCH_DATABASE_URL"] = url
    os.environ["DATABASE_URL"] = url
    os.environ.pop("GPUDASH_TEST_DB_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    from bench_api import ensure_database, fleet_matches, load

    ensure_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not fleet_matches(nodes):
        load(nodes, nodes * 4)
    # bench_preview.py's startup child: Django, gpudash.asgi (its warm-up thread builds the live
    # inventory from the rows and runs a preview per class), then seven previews; it prints its RSS.
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_preview.py"), "--startup-child", "ready"],
        capture_output=True,
        text=True,
        env=dict(os.environ, GPUDASH_PREVIEW_BACKEND="inline"),
        cwd=ROOT,
    )
    print(f"{nodes:,} nodes through PostgreSQL: " + (out.stdout.strip() or f"the child failed:\n{out.stderr[-3000:]}"))


if __name__ == "__main__":
    main()
