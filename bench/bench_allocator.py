"""Allocation-engine benchmark (issue 3): a 5,000-node fleet, previews over every node, headroom.

    .venv/bin/python bench/bench_allocator.py [--nodes 5000] [--profile a|b|c|d|headroom] [--no-freeze]

Fleet: 5,000 nodes x 8 GPUs (40,000 whole-GPU devices); a fifth of the nodes are A100 nodes whose
GPUs also offer MIG partitions as partitionable devices (a counter set per GPU); 30% of the GPUs are
allocated (on MIG nodes some as a MIG partition instead of the whole GPU). Prints figures; no asserts.
"""

import argparse
import cProfile
import gc
import os
import pstats
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dra import Features, Inventory, headroom, preview  # noqa: E402
from dra.model import ClaimSpec  # noqa: E402

DRIVER = "gpu.nvidia.com"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"
# MIG placements of an A100 80GB: (profile, first memory slice, slices, multiprocessors)
MIG = (
    [("1g.10gb", i, 1, 14) for i in range(7)]
    + [("2g.20gb", i, 2, 28) for i in (0, 2, 4)]
    + [("3g.40gb", i, 4, 42) for i in (0, 4)]
    + [("7g.80gb", 0, 8, 98)]
)


def _s(v):
    return {"string": v}


def gpu_device(node, i, product):
    return {
        "name": f"gpu-{i}",
        "attributes": {
            "type": _s("gpu"),
            "uuid": _s(f"GPU-{node}-{i}"),
            "productName": _s(product),
            "brand": _s("Nvidia"),
            "architecture": _s("Hopper" if product == H100 else "Ampere"),
            "cudaComputeCapability": {"version": "9.0.0" if product == H100 else "8.0.0"},
            "driverVersion": {"version": "580.95.5"},
            "nvlinkDomain": _s(f"{node}-nvl"),
            "resource.kubernetes.io/pcieRoot": _s(f"pci0000:{i // 4}"),
            "resource.kubernetes.io/numaNode": {"int": i // 4},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def make_fleet(nodes=5000, gpus=8, mig_fraction=0.2, allocated_fraction=0.3, seed=1):
    """{plural: [raw objects]} shaped like devcluster.fleet.generate_fleet's output."""
    rng = random.Random(seed)
    out = {k: [] for k in ("deviceclasses", "resourceslices", "resourceclaims", "nodes")}
    out["deviceclasses"] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'
                        }
                    }
                ]
            },
        },
        {
            "kind": "DeviceClass",
            "metadata": {"name": "mig.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "mig"'
                        }
                    }
                ]
            },
        },
    ]
    mig_every = round(1 / mig_fraction) if mig_fraction else 0
    results = []
    for n in range(nodes):
        node = f"node-{n:05d}"
        is_mig = bool(mig_every) and n % mig_every == 0
        pool_label = "a100-mig" if is_mig else "h100"
        out["nodes"].append(
            {
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {"gpudash.io/node-pool": pool_label, "kubernetes.io/hostname": node},
                },
            }
        )
        product = A100 if is_mig else H100
        devs = [gpu_device(node, i, product) for i in range(gpus)]
        if not is_mig:
            out["resourceslices"].append(_slice(f"{node}-gpu", node, 1, devs))
        else:
            counter_sets, parts = [], []
            for i, d in enumerate(devs):
                cs = f"gpu-{i}-counter-set"
                counters = {
                    "multiprocessors": {"value": "98"},
                    **{f"memory-slice-{k}": {"value": "1"} for k in range(8)},
                }
                counter_sets.append({"name": cs, "counters": counters})
                d["consumesCounters"] = [{"counterSet": cs, "counters": counters}]
                parts.append(d)
                for profile, start, size, sms in MIG:
                    used = {
                        "multiprocessors": {"value": str(sms)},
                        **{f"memory-slice-{k}": {"value": "1"} for k in range(start, start + size)},
                    }
                    parts.append(
                        {
                            "name": f"gpu-{i}-mig-{profile.replace('.', '')}-{start}",
                            "attributes": {
                                "type": _s("mig"),
                                "profile": _s(profile),
                                "productName": _s(product),
                                "parentUUID": _s(f"GPU-{node}-{i}"),
                            },
                            "capacity": {"memory": {"value": f"{10 * size}Gi"}, "multiprocessors": {"value": str(sms)}},
                            "consumesCounters": [{"counterSet": cs, "counters": used}],
                        }
                    )
            # at most 64 devices per slice when they consume counters; counters in their own slice
            chunks = [parts[k : k + 56] for k in range(0, len(parts), 56)]
            count = len(chunks) + 1
            for k, chunk in enumerate(chunks):
                out["resourceslices"].append(_slice(f"{node}-gpu-{k}", node, count, chunk))
            counter_slice = _slice(f"{node}-gpu-counters", node, count, None)
            counter_slice["spec"]["sharedCounters"] = counter_sets
            out["resourceslices"].append(counter_slice)
        for i in range(gpus):
            if rng.random() < allocated_fraction:
                name = f"gpu-{i}"
                if is_mig and rng.random() < 0.5:
                    name = f"gpu-{i}-mig-1g10gb-{rng.randrange(7)}"
                results.append((node, name))
    for k, (node, name) in enumerate(results):
        out["resourceclaims"].append(
            {
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{k}", "namespace": f"team-{k % 20}", "uid": f"uid-{k}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
                "status": {
                    "allocation": {
                        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": name}]}
                    }
                },
            }
        )
    return out


def _slice(name, node, count, devices):
    spec = {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}
    if devices is not None:
        spec["devices"] = devices
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def claim(name, requests, constraints=None):
    return ClaimSpec("bench", name, {"devices": {"requests": requests, "constraints": constraints or []}})


def cel(expr):
    return {"cel": {"expression": expr}}


PRODUCT = f'device.attributes["{DRIVER}"].productName == "{H100}"'
CLAIMS = {
    "a": claim(
        "one-h100", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [cel(PRODUCT)]}}]
    ),
    "b": claim(
        "eight-nvlink",
        [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}}],
        [{"matchAttribute": f"{DRIVER}/productName"}],
    ),
    "d": claim(
        "four-same-model",
        [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}],
        [{"matchAttribute": f"{DRIVER}/productName"}],
    ),
    "c": claim(
        "first-available",
        [
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": "two-a100",
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 2,
                        "selectors": [cel(f'device.attributes["{DRIVER}"].productName == "{A100}"')],
                    },
                    {
                        "name": "mig-3g",
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [cel(f'device.attributes["{DRIVER}"].profile == "3g.40gb"')],
                    },
                ],
            }
        ],
    ),
}


def timed(label, fn, repeat=1):
    """Best wall time of `repeat` runs, with that run's CPU time (other jobs share the cores)."""
    best, result = None, None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        dt, dc = time.perf_counter() - t, time.process_time() - c
        if best is None or dt < best[0]:
            best = (dt, dc)
    print(f"{label:<48} {best[0] * 1000:9.1f} ms  (CPU {best[1] * 1000:7.1f} ms)")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument(
        "--fleet",
        choices=["bench", "devcluster"],
        default="bench",
        help="this script's generator, or devcluster.fleet.generate_fleet",
    )
    parser.add_argument(
        "--profile", choices=["a", "b", "c", "d", "headroom"], help="cProfile one warm run and print the top functions"
    )
    parser.add_argument(
        "--no-freeze", dest="freeze", action="store_false", help="leave the Inventory in the garbage collector's scans"
    )
    parser.add_argument("--sort", default="cumulative", help="--profile: pstats sort key (cumulative, tottime)")
    args = parser.parse_args()

    t = time.perf_counter()
    if args.fleet == "devcluster":
        from devcluster.fleet import generate_fleet

        fleet = generate_fleet(nodes=args.nodes)
    else:
        fleet = make_fleet(args.nodes)
    n_dev = sum(len(s["spec"].get("devices") or []) for s in fleet["resourceslices"])
    print(
        f"fleet ({args.fleet}): {args.nodes} nodes, {len(fleet['resourceslices'])} slices, {n_dev} devices, "
        f"{len(fleet['resourceclaims'])} allocated claims (generated in {time.perf_counter() - t:.1f} s)"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    inv = timed("build Inventory", lambda: Inventory.from_objects(fleet, features=Features()))
    timed("node views for every node (pools, order)", lambda: [inv.node(n) for n in inv.node_names])
    if args.freeze:
        gc.collect()
        gc.freeze()  # as the live inventory does after its build: no full collections over the Inventory
    for key, label in (
        ("a", "1 GPU by productName"),
        ("d", "4 GPUs + matchAttribute"),
        ("b", "8 GPUs + matchAttribute"),
        ("c", "firstAvailable (2 A100 | 1 MIG 3g)"),
    ):
        c = CLAIMS[key]
        cold = timed(f"({key}) {label}: cold (CEL evaluated)", lambda: preview(inv, [c]))
        if args.freeze:
            gc.freeze()  # and the views and CEL results the cold run made (the live inventory freezes after its first preview)
        timed(f"({key}) {label}: warm, best of 3", lambda: preview(inv, [c]), repeat=3)
        s = cold["summary"]
        reason = s["mostCommonReason"]
        print(
            f"    fits on {s['fits']}/{s['nodes']} nodes; most common reason ({reason['nodes'] if reason else 0}): {reason['example'] if reason else '-'}"
        )
    room = timed("(a) headroom, greedy copies", lambda: headroom(inv, [CLAIMS["a"]]), repeat=2)
    print(f"    {room['copies']} copies; by node pool {room['byNodePool']}; by model {room['byDeviceModel']}")
    room_c = timed("(c) headroom, greedy copies", lambda: headroom(inv, [CLAIMS["c"]]))
    print(f"    {room_c['copies']} copies; by node pool {room_c['byNodePool']}; by model {room_c['byDeviceModel']}")
    import resource

    print(
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (generated fleet and Inventory); load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    if args.profile:
        c = CLAIMS.get(args.profile, CLAIMS["a"])
        prof = cProfile.Profile()
        prof.enable()
        if args.profile == "headroom":
            headroom(inv, [c])
        else:
            preview(inv, [c])
        prof.disable()
        pstats.Stats(prof).sort_stats(args.sort).print_stats(25)


if __name__ == "__main__":
    main()
