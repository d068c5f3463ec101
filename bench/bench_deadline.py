"""How far past its deadline a preview returns (issue 10: within deadline + 100 ms).

    .venv/bin/python bench/bench_deadline.py [--nodes 5000] [--runs 5]

Two loads on the bench fleet of bench_allocator.py (5,000 nodes x 8 GPUs, MIG nodes, 30% allocated):
(1) cold: a fresh Inventory, so the deadline falls while node views are built and selectors are
evaluated for the first time; (2) endless: every node also carries 30 devices and a claim whose
search cannot finish (C(30, 8) picks, each refused by a constraint), no filter timeout, so the
deadline falls deep inside one search. Prints the overshoot (returned - deadline); no asserts.

The inventories are frozen out of the garbage collector (`gc.freeze()`, what a long-lived process
holding an Inventory should do): otherwise a full collection scanning their millions of objects can
land inside a preview and add seconds (measured: 4.2 s once in 8 runs); `--no-freeze` shows it.
"""

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_allocator import make_fleet  # noqa: E402

from dra import Features, Inventory, preview  # noqa: E402
from dra.model import ClaimSpec  # noqa: E402

ONE_GPU = ClaimSpec(
    "bench", "one", {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
)
ENDLESS = ClaimSpec(
    "bench",
    "endless",
    {
        "devices": {
            "requests": [
                {
                    "name": "many",
                    "exactly": {
                        "deviceClassName": "side",
                        "count": 8,
                        "selectors": [{"cel": {"expression": 'device.attributes["side.example.com"].side == "left"'}}],
                    },
                },
                {
                    "name": "other",
                    "exactly": {
                        "deviceClassName": "side",
                        "selectors": [{"cel": {"expression": 'device.attributes["side.example.com"].side == "right"'}}],
                    },
                },
            ],
            "constraints": [{"matchAttribute": "side.example.com/side"}],
        }
    },
)


def endless_objects(fleet):
    fleet["deviceclasses"].append(
        {
            "kind": "DeviceClass",
            "metadata": {"name": "side"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "side.example.com"'}}]},
        }
    )
    for node in fleet["nodes"]:
        name = node["metadata"]["name"]
        devices = [{"name": f"a{i}", "attributes": {"side": {"string": "left"}}} for i in range(30)]
        devices += [{"name": f"b{i}", "attributes": {"side": {"string": "right"}}} for i in range(2)]
        fleet["resourceslices"].append(
            {
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-side"},
                "spec": {
                    "driver": "side.example.com",
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "nodeName": name,
                    "devices": devices,
                },
            }
        )
    return fleet


FREEZE = True


def overshoot(inv_factory, claims, deadline, runs, **kw):
    out = []
    for _ in range(runs):
        inv = inv_factory()
        if FREEZE:
            gc.collect()
            gc.freeze()
        t0 = time.perf_counter()
        result = preview(inv, claims, deadline=deadline, node_filters=False, **kw)
        out.append((time.perf_counter() - t0 - deadline) * 1000)
        undecided = result["summary"]["deadline"]["undecidedNodes"]
    return out, undecided


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-freeze", action="store_true")
    args = ap.parse_args()
    global FREEZE
    FREEZE = not args.no_freeze
    fleet = make_fleet(nodes=args.nodes)
    t0 = time.perf_counter()
    Inventory.from_objects(fleet, features=Features())
    print(f"fleet: {args.nodes} nodes, one Inventory build {time.perf_counter() - t0:.2f} s")
    for deadline in (0.2, 0.5, 1.0):
        ms, undecided = overshoot(
            lambda: Inventory.from_objects(fleet, features=Features()), [ONE_GPU], deadline, args.runs
        )
        print(
            f"cold 1-GPU preview, deadline {deadline:.1f} s: overshoot max {max(ms):.1f} ms, median {statistics.median(ms):.1f} ms ({undecided} nodes undecided)"
        )
    endless = endless_objects(make_fleet(nodes=args.nodes))
    warm = Inventory.from_objects(endless, features=Features())
    for deadline in (0.2, 0.5, 1.0):
        ms, undecided = overshoot(lambda: warm, [ENDLESS], deadline, args.runs, filter_timeout=None)
        print(
            f"endless search, deadline {deadline:.1f} s: overshoot max {max(ms):.1f} ms, median {statistics.median(ms):.1f} ms ({undecided} nodes undecided)"
        )


if __name__ == "__main__":
    main()
