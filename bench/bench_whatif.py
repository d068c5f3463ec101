"""What-if capacity planning at fleet scale, in process (the engine alone, no database).

    .venv/bin/python bench/bench_whatif.py [--nodes 5000] [--pending 1000] [--shapes 96] [--add 10] [--runs 3]

The fleet is devcluster.fleet.generate_fleet's, filled so that --pending pods stay Pending. Their
requests are varied so that the what-if cannot reuse one engine run for all: each pending pod asks
for 1-8 GPUs of one node (a template per count), on one of the fleet's three zones (nodeSelector),
with one of four cpu requests: up to 96 distinct shapes (--shapes caps how many are used; pods of
equal shape share one answer, and all share the engine's per-node verdicts, as the what-if does). The scenario adds --add nodes cloned from a
whole-GPU node; the figure is dra.whatif.apply + evaluate over every pending pod (warm: the
inventory's node views and CEL results exist, as on the preview workers after their warm-up).
Figures are printed, wall clock and this process's CPU time (the machine may be shared).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def vary_pending(fleet, pending, shapes):
    """Keep `pending` Pending pods, each given one of `shapes` distinct request shapes."""
    import random

    from devcluster import builders as b

    rng = random.Random(7)
    cpus = ["1", "4", "16", "64"]
    combos = [(n, z, c) for c in cpus for z in range(3) for n in range(1, 9)][:shapes]  # counts vary first
    keep = [p for p in fleet["pods"] if p["status"]["phase"] == "Pending"][:pending]
    kept = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in keep}
    fleet["pods"] = [
        p
        for p in fleet["pods"]
        if p["status"]["phase"] != "Pending" or (p["metadata"]["namespace"], p["metadata"]["name"]) in kept
    ]
    namespaces = sorted({p["metadata"]["namespace"] for p in keep})
    for ns in namespaces:
        for n in range(1, 9):
            spec = b.claim_spec([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": n}])
            fleet["resourceclaimtemplates"].append(b.make_template(ns, f"gpu-x{n}", spec, rng))
    for i, pod in enumerate(keep):
        n, zone, cpu = combos[i % len(combos)]
        spec = dict(pod["spec"])
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpu-x{n}"}]
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": f"zone-{zone}"}
        container = dict(spec["containers"][0], resources={"claims": [{"name": "gpu"}], "requests": {"cpu": cpu}})
        spec["containers"] = [container]
        pod["spec"] = spec
        pod["status"] = {"phase": "Pending"}
    return keep


def warm_up(inv):
    """What a preview worker does before it serves (claims.live_inventory.warm_up): one preview of a
    one-device claim per DeviceClass over every node, which fills the node views and the classes' CEL
    results; then the long-lived objects are frozen out of the collector's scans."""
    import gc

    from dra import preview
    from dra.model import ClaimSpec

    for name in sorted(inv.classes):
        spec = {"devices": {"requests": [{"name": "one", "exactly": {"deviceClassName": name}}]}}
        preview(inv, [ClaimSpec("default", "warm-up", spec)])
    gc.freeze()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--shapes", type=int, default=96)
    parser.add_argument("--add", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="every run as the first scenario on the inventory")
    args = parser.parse_args()

    from devcluster.fleet import generate_fleet
    from dra import Inventory
    from dra.whatif import Workload, apply, evaluate, parse_changes, summary

    started = time.perf_counter()
    # Nearly every GPU unit allocated: most pending pods are blocked before the change.
    units = args.nodes * 8 + (args.nodes // 5) * 8  # whole GPUs + the MIG nodes' extra partitions
    allocated = units - args.pending // 2
    fleet = generate_fleet(nodes=args.nodes, claims=allocated + args.pending, allocated_fraction=allocated / units)
    pending = vary_pending(fleet, args.pending, args.shapes)
    inv = Inventory.from_objects(fleet)
    nodes = {n["metadata"]["name"]: n for n in fleet["nodes"]}
    workloads = [Workload("pod", p["metadata"]["namespace"], p["metadata"]["name"], p) for p in pending]
    source = next(n for n in inv.node_names if not n.endswith("4"))  # a whole-GPU node (every 5th is MIG)
    print(
        f"fleet: {len(inv.node_names)} nodes, {len(inv.claims)} claims, {len(workloads)} pending pods, "
        f"{min(args.shapes, 96)} shapes; built in {time.perf_counter() - started:.1f} s"
    )
    changes = parse_changes([f"add {source} {args.add}"])
    warm_up(inv)
    from dra import whatif

    times, cpu = [], []
    for run in range(args.runs):
        if run == 0 or args.cold:
            whatif._BEFORE.clear()  # the first scenario on this inventory: every shape's "before" is run
        label = "first" if run == 0 or args.cold else "later"
        c0, t0 = time.process_time(), time.perf_counter()
        applied = apply(inv, changes, nodes)
        t1 = time.perf_counter()
        entries = evaluate(inv, applied, workloads)
        t2 = time.perf_counter()
        capacity = whatif.capacity_of(inv, applied)  # whole-GPU and partition capacity, before and after
        t3 = time.perf_counter()
        times.append(t3 - t0)
        cpu.append(time.process_time() - c0)
        print(
            f"  {label}: apply {1000 * (t1 - t0):.0f} ms, evaluate {1000 * (t2 - t1):.0f} ms, "
            f"capacity {1000 * (t3 - t2):.0f} ms ({capacity['after']['gpusFree'] if capacity else '-'} GPUs free after) "
            f"(CPU {1000 * cpu[-1]:.0f} ms, load {os.getloadavg()[0]:.1f}): {summary(entries, applied)['verdicts']}"
        )
    print(
        f"what-if adding {args.add} nodes, {len(workloads)} pending pods: first scenario {times[0]:.2f} s "
        f"(CPU {cpu[0]:.2f} s); later scenarios median {statistics.median(times[1:] or times):.2f} s "
        f"(CPU {statistics.median(cpu[1:] or cpu):.2f} s)"
    )


if __name__ == "__main__":
    main()
