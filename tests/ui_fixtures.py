"""A small, hand-made fleet for the UI tests: every device state the pages must show.

cluster "alpha":
  node-a  Ready, 8 x H100 (gpu.nvidia.com): gpu-0/1 held by team-a/train-1 (reserved by a Running pod),
          gpu-0 also watched by ops/monitor (admin access), gpu-7 held by team-b/stuck-claim (deleting, finding).
  node-b  Ready, one A100 as a partitionable device: gpu-0 (full) + two MIG placements sharing
          gpu-0-counter-set; team-b/infer holds gpu-0-mig-1g10gb-19-0 -> gpu-0 is "partial".
  node-c  NotReady, 2 x A100; gpu-1 carries a NoSchedule xid taint.
  team-a/pending-claim: no allocation, its pod is Pending (Unschedulable).
"""

from django.utils import timezone

from claims.models import Finding
from mirror import roles
from mirror.models import Cluster, SyncState

from . import fleet_data
from .fleet_data import apply_all, meta

DRIVER = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100 80GB PCIe"


def node(name, ready=True):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(name, labels={"kubernetes.io/hostname": name, "gpu": "true"}),
        "spec": {},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-01-05T10:00:00Z"}
            ]
        },
    }


def gpu(name, product, memory="80Gi", **extra):
    dev = {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "architecture": {"string": "Hopper" if "H100" in product else "Ampere"},
            "driverVersion": {"version": "580.95.5"},
            "uuid": {"string": f"GPU-{name}"},
        },
        "capacity": {"memory": {"value": memory}},
    }
    dev.update(extra)
    return dev


def mig(name, profile, memory, counters):
    return {
        "name": name,
        "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}, "productName": {"string": A100}},
        "capacity": {"memory": {"value": memory}},
        "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": counters}],
    }


def resource_slice(node_name, devices, shared_counters=None):
    spec = {
        "driver": DRIVER,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    }
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta(f"{node_name}-gpu.nvidia.com-x1"),
        "spec": spec,
    }


def device_class(name, cel):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": meta(name),
        "spec": {"selectors": [{"cel": {"expression": cel}}]},
    }


def claim(
    namespace,
    name,
    cls="gpu.nvidia.com",
    count=1,
    results=(),
    node_name="",
    reserved_for=(),
    deleting=False,
    admin=False,
):
    request = {"name": "gpus", "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}}
    if admin:
        request["exactly"]["adminAccess"] = True
    extra = {"finalizers": ["resource.kubernetes.io/delete-protection"]} if results else {}
    if deleting:
        extra["deletionTimestamp"] = "2026-01-05T11:00:00Z"
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta(name, namespace, **extra),
        "spec": {"devices": {"requests": [request]}},
        "status": {},
    }
    if results:
        raw["status"]["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "gpus",
                        "driver": DRIVER,
                        "pool": node_name,
                        "device": d,
                        **({"adminAccess": True} if admin else {}),
                    }
                    for d in results
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        }
    if reserved_for:
        raw["status"]["reservedFor"] = [
            {"resource": "pods", "name": p, "uid": f"uid-{namespace}-{p}"} for p in reserved_for
        ]
    return raw


def pod(namespace, name, claim_name, node_name="", phase="Running", unschedulable_message=""):
    conditions = []
    if unschedulable_message:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable_message}
        )
    elif node_name:
        conditions.append({"type": "PodScheduled", "status": "True"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(name, namespace),
        "spec": {
            "nodeName": node_name,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [{"name": "main", "image": "cuda"}],
        },
        "status": {"phase": phase, "conditions": conditions},
    }


def fleet_objects():
    """(kind, raw) pairs in apply order."""
    counters = {"memory": {"value": "80Gi"}, "memory-slice-0": {"value": "1"}, "memory-slice-4": {"value": "1"}}
    yield "Node", node("node-a")
    yield "Node", node("node-b")
    yield "Node", node("node-c", ready=False)
    yield (
        "DeviceClass",
        device_class(
            "gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        ),
    )
    yield (
        "DeviceClass",
        device_class(
            "mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        ),
    )
    yield "ResourceSlice", resource_slice("node-a", [gpu(f"gpu-{i}", H100) for i in range(8)])
    yield (
        "ResourceSlice",
        resource_slice(
            "node-b",
            [
                gpu("gpu-0", A100, consumesCounters=[{"counterSet": "gpu-0-counter-set", "counters": counters}]),
                mig(
                    "gpu-0-mig-1g10gb-19-0",
                    "1g.10gb",
                    "9728Mi",
                    {"memory": {"value": "9728Mi"}, "memory-slice-0": {"value": "1"}},
                ),
                mig(
                    "gpu-0-mig-3g40gb-9-4",
                    "3g.40gb",
                    "40192Mi",
                    {"memory": {"value": "40192Mi"}, "memory-slice-4": {"value": "1"}},
                ),
            ],
            shared_counters=[{"name": "gpu-0-counter-set", "counters": counters}],
        ),
    )
    yield (
        "ResourceSlice",
        resource_slice(
            "node-c",
            [
                gpu("gpu-0", A100),
                gpu("gpu-1", A100, taints=[{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]),
            ],
        ),
    )
    # train-1 goes pending -> allocated -> reserved, so the watcher's timeline has three entries.
    yield "ResourceClaim", claim("team-a", "train-1", count=2)
    yield "ResourceClaim", claim("team-a", "train-1", count=2, results=["gpu-0", "gpu-1"], node_name="node-a")
    yield (
        "ResourceClaim",
        claim(
            "team-a", "train-1", count=2, results=["gpu-0", "gpu-1"], node_name="node-a", reserved_for=["train-1-pod"]
        ),
    )
    yield "ResourceClaim", claim("ops", "monitor", results=["gpu-0"], node_name="node-a", admin=True)
    yield "ResourceClaim", claim("team-b", "stuck-claim", results=["gpu-7"], node_name="node-a", deleting=True)
    yield (
        "ResourceClaim",
        claim("team-b", "infer", cls="mig.nvidia.com", results=["gpu-0-mig-1g10gb-19-0"], node_name="node-b"),
    )
    yield "ResourceClaim", claim("team-a", "pending-claim", count=8)
    yield "Pod", pod("team-a", "train-1-pod", "train-1", node_name="node-a")
    yield (
        "Pod",
        pod(
            "team-a",
            "waiting-pod",
            "pending-claim",
            phase="Pending",
            unschedulable_message="0/3 nodes are available: 3 cannot allocate all claims.",
        ),
    )


def load_fleet(cluster_name="alpha"):
    cluster = Cluster.objects.create(name=cluster_name)
    apply_all(cluster, fleet_objects())
    now = timezone.now()
    SyncState.objects.create(
        cluster=cluster, kind="ResourceClaim", status=SyncState.Status.CONNECTED, connected_since=now, last_event_at=now
    )
    stuck_uid = "uid-team-b-stuck-claim"
    Finding.objects.create(
        cluster=cluster,
        rule="deleting-with-finalizer",
        namespace="team-b",
        claim_name="stuck-claim",
        claim_uid=stuck_uid,
        summary="Claim has been deleting for 2h; finalizer still present.",
        first_seen=now,
        last_seen=now,
    )
    return cluster


def make_user(username, role=roles.VIEWER, namespaces=None, password=None):
    """The UI tests' users are viewers unless told otherwise."""
    return fleet_data.make_user(username, role, namespaces, password)
