"""What the device status and device health rows cost the sync's apply path (issue 35).

    DATABASE_URL=... .venv/bin/python bench/bench_device_status.py [--claims 2000] [--rounds 3]

In process, against the configured database (a throw-away cluster row, deleted at the end):
list pages of allocated claims (2 devices each) and their pods applied with and without
status.devices / allocatedResourcesStatus, then watch-style updates: a pod whose container status
changes without touching health (rows rebuilt: the container statuses are their source) and a claim
whose reservation alone changes (device status rows left as they are). Figures are printed, best of
--rounds, not asserted.
"""

import argparse
import copy
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def claim(i, with_status):
    ns, name = f"ns-{i % 20}", f"claim-{i}"
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": f"node-{i // 4}", "device": f"gpu-{2 * (i % 4) + k}"}
        for k in range(2)
    ]
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-c-{i}", "resourceVersion": str(10 + i)},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }
    if with_status:
        raw["status"]["devices"] = [
            {
                **{k: r[k] for k in ("driver", "pool", "device")},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Prepared",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
                "data": {"uuid": f"GPU-{i}-{r['device']}"},
            }
            for r in results
        ]
    return raw


def pod(i, with_health, ready=True):
    ns, name = f"ns-{i % 20}", f"pod-{i}"
    status = {
        "phase": "Running",
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"claim-{i}"}],
        "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0, "image": "cuda", "imageID": ""}],
    }
    if with_health:
        status["containerStatuses"][0]["allocatedResourcesStatus"] = [
            {
                "name": "claim:gpu",
                "resources": [
                    {"resourceID": f"k8s.gpu.nvidia.com/device=gpu-{2 * (i % 4) + k}", "health": "Healthy"}
                    for k in range(2)
                ],
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-p-{i}", "resourceVersion": str(10 + i)},
        "spec": {
            "nodeName": f"node-{i // 4}",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"claim-{i}"}],
            "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
        },
        "status": status,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
    import django

    django.setup()
    from django.db import connection

    from claims.models import ClaimDeviceStatus, PodResourceHealth
    from mirror.models import Cluster
    from mirror.sync.apply import LISTED, MODIFIED, apply_batch

    n, page = args.claims, 500
    print(f"database: {connection.vendor}; {n} claims (2 devices each) and {n} pods, pages of {page}")
    best = {}

    def timed(label, fn):
        started = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - started
        best[label] = min(best.get(label, elapsed), elapsed)

    for _ in range(args.rounds):
        for with_rows in (False, True):
            cluster = Cluster.objects.create(name=f"bench-devstatus-{os.getpid()}")
            try:
                tag = "with status/health" if with_rows else "without"
                claims = [claim(i, with_rows) for i in range(n)]
                pods = [pod(i, with_rows) for i in range(n)]
                for kind, objects in (("ResourceClaim", claims), ("Pod", pods)):

                    def listed(kind=kind, objects=objects):
                        for start in range(0, len(objects), page):
                            apply_batch(
                                cluster, kind, [(LISTED, o) for o in objects[start : start + page]], publish=False
                            )

                    timed(f"list {kind}s, {tag}", listed)
                if with_rows:
                    assert ClaimDeviceStatus.objects.filter(cluster=cluster).count() == 2 * n
                    assert PodResourceHealth.objects.filter(cluster=cluster).count() == 2 * n
                flipped = []
                for i, p in enumerate(pods):
                    p = copy.deepcopy(p)
                    p["metadata"]["resourceVersion"] = str(100000 + i)
                    p["status"]["containerStatuses"][0]["ready"] = False
                    flipped.append(p)
                reserved = []
                for i, c in enumerate(claims):
                    c = copy.deepcopy(c)
                    c["metadata"]["resourceVersion"] = str(100000 + i)
                    c["status"]["reservedFor"] = [{"resource": "pods", "name": f"pod-{i}", "uid": f"uid-p-{i}"}]
                    reserved.append(c)

                def modified(kind, objects):
                    for start in range(0, len(objects), 100):
                        apply_batch(cluster, kind, [(MODIFIED, o) for o in objects[start : start + 100]], publish=False)

                timed(f"pod container status changes, {tag}", lambda: modified("Pod", flipped))
                timed(f"claim reservations, {tag}", lambda: modified("ResourceClaim", reserved))
            finally:
                cluster.delete()
    for label, seconds in best.items():
        print(f"{label:48s} {seconds:6.2f} s  ({n / seconds:7.0f} objects/s)")


if __name__ == "__main__":
    main()
