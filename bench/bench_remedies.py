"""Verdict and remedies for one pending pod on the 5,000-node in-process fleet (issue 33: < 1 s warm).

    .venv/bin/python bench/bench_remedies.py [--nodes 5000] [--runs 5]

The fleet is devcluster.fleet.generate_fleet with 80 % of the GPUs allocated (no 8-GPU node is
entirely free), every 50th node cordoned, every 97th NotReady, 1 in 40 allocated claims held stuck
and 1 in 60 being deleted. The pod wants 8 whole GPUs on one node at priority 1000. Times: the
preview (what the page runs anyway), the verdict over every node (dra.verdict), and the remedy search
(dra.remedies: each candidate change re-run by the engine). Figures are printed, not asserted.
"""

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-00}
spec:
  priority: 1000
  containers: [{name: main, resources: {claims: [{name: gpus}]}}]
  resourceClaims: [{name: gpus, resourceClaimName: eight}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: eight, namespace: team-00}
spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 8}}]}}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from devcluster.fleet import generate_fleet
    from dra import Inventory, load_documents, preview, remedies, resolve_claims, verdict
    from dra.nodefilters import NOT_READY_KEY, scheduling_pod

    objects = generate_fleet(nodes=args.nodes, claims=args.nodes * 8, allocated_fraction=0.8)
    for i, node in enumerate(objects["nodes"]):
        if i % 50 == 49:
            node["spec"]["unschedulable"] = True
        if i % 97 == 96:
            node["spec"].setdefault("taints", []).append({"key": NOT_READY_KEY, "effect": "NoSchedule"})
    allocated = [c for c in objects["resourceclaims"] if (c.get("status") or {}).get("allocation")]
    stuck = {f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in allocated[::40]}
    for c in allocated[7::60]:
        c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    t0 = time.perf_counter()
    inv = Inventory.from_objects(objects)
    gc.collect()
    gc.freeze()  # as the live inventory does after its build
    print(
        f"fleet: {len(inv.node_names)} nodes, {len(allocated)} allocated claims ({len(stuck)} stuck); "
        f"inventory built in {(time.perf_counter() - t0) * 1000:.0f} ms"
    )
    docs = load_documents(POD)
    # Nodes where the pod fits anyway get one more allocated device: then it fits nowhere.
    claims, bound = resolve_claims(inv, docs)
    taken = []
    for e in preview(inv, claims, bound=bound, pod=scheduling_pod(docs))["nodes"]:
        if e["fits"]:
            r = e["results"][0]
            taken.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": f"filler-{e['node']}",
                        "namespace": "team-01",
                        "uid": f"uid-filler-{e['node']}",
                    },
                    "spec": {
                        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {"request": "gpu", "driver": r["driver"], "pool": r["pool"], "device": r["device"]}
                                ]
                            }
                        }
                    },
                }
            )
    if taken:
        inv = inv.with_changes(upserts={"resource_claims": taken})
    times = {"preview": [], "verdict": [], "remedies": []}
    cpu = {"preview": [], "verdict": [], "remedies": []}
    for i in range(args.runs + 1):
        claims, bound = resolve_claims(inv, docs)
        pod = scheduling_pod(docs)
        t0, c0 = time.perf_counter(), time.process_time()
        result = preview(inv, claims, bound=bound, pod=pod)
        t1, c1 = time.perf_counter(), time.process_time()
        answer = verdict(inv, claims, result, stuck=stuck)
        t2, c2 = time.perf_counter(), time.process_time()
        found = remedies(inv, claims, pod, result, answer, bound=bound, stuck=stuck, deadline=10)
        t3, c3 = time.perf_counter(), time.process_time()
        if i == 0:
            print(
                f"first: preview {(t1 - t0) * 1000:.0f} ms, verdict {(t2 - t1) * 1000:.0f} ms, "
                f"remedies {(t3 - t2) * 1000:.0f} ms"
            )
            continue
        times["preview"].append((t1 - t0) * 1000)
        times["verdict"].append((t2 - t1) * 1000)
        times["remedies"].append((t3 - t2) * 1000)
        cpu["preview"].append((c1 - c0) * 1000)
        cpu["verdict"].append((c2 - c1) * 1000)
        cpu["remedies"].append((c3 - c2) * 1000)
    print(f"fits: {result['summary']['fits']}/{result['summary']['nodes']}")
    for item in answer["requests"]:
        print(
            "blocked:",
            {k: len(v) for k, v in item["blocked"].items()},
            "never:",
            {k: len(v) for k, v in item["never"].items()},
        )
    print("remedies:", [(r["kind"], r["fits"][0]["node"], len(r["fits"])) for r in found])
    for name, values in times.items():
        print(
            f"warm {name:9s} median {statistics.median(values):6.0f} ms (max {max(values):5.0f}), "
            f"CPU median {statistics.median(cpu[name]):6.0f} ms"
        )
    both = [v + r for v, r in zip(times["verdict"], times["remedies"])]
    both_cpu = [v + r for v, r in zip(cpu["verdict"], cpu["remedies"])]
    print(
        f"warm verdict + remedies median {statistics.median(both):6.0f} ms (max {max(both):5.0f}), "
        f"CPU median {statistics.median(both_cpu):6.0f} ms; target < 1,000 ms; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
