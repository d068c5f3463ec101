"""Builders for raw Kubernetes objects and users, for the operations tests (stuck claims, release, pending, readiness)."""

import uuid

import pytest

from mirror import roles
from mirror.models import Cluster
from mirror.sync.apply import apply_object

from .fleet_data import make_user

DRIVER = "gpu.example.com"
FINALIZER = "resource.kubernetes.io/delete-protection"


def new_uid():
    return str(uuid.uuid4())


def ts(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_raw(name, ready=True, since="2026-01-01T00:00:00Z", labels=None, uid=None, rv="1"):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": uid or new_uid(), "resourceVersion": rv, "labels": labels or {}},
        # A kubelet always reports allocatable; the scheduler counts a node without it as full.
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": since}],
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }


def slice_raw(
    node, devices=("gpu-0", "gpu-1"), driver=DRIVER, pool=None, name=None, generation=0, count=1, rv="1", extra=None
):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-{driver}", "uid": new_uid(), "resourceVersion": rv},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
            "devices": [{"name": d, **(extra or {})} for d in devices],
        },
    }


def claim_raw(
    name,
    namespace="team-a",
    uid=None,
    rv="10",
    devices=(),
    node="node-1",
    reserved=(),
    deleting=None,
    finalizers=None,
    owner=None,
    binding_conditions=None,
    device_status=None,
    admin_access=False,
    share_id=None,
):
    """A ResourceClaim; `devices` = device names on `node` (allocated when non-empty); `reserved` = (pod name, pod uid)."""
    meta = {
        "name": name,
        "namespace": namespace,
        "uid": uid or new_uid(),
        "resourceVersion": rv,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if finalizers is None:
        finalizers = [FINALIZER] if devices else []
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleting:
        meta["deletionTimestamp"] = deleting
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1], "controller": True}
        ]
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    status = {}
    if devices:
        results = []
        for d in devices:
            r = {"request": "gpu", "driver": DRIVER, "pool": node, "device": d}
            if admin_access:
                r["adminAccess"] = True
            if share_id:
                r["shareID"] = share_id
            if binding_conditions:
                r["bindingConditions"], r["bindingFailureConditions"] = binding_conditions
            results.append(r)
        status["allocation"] = {
            "devices": {"results": results},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            },
        }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved]
    if device_status:
        status["devices"] = device_status
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        "status": status,
    }


def pod_raw(
    name,
    namespace="team-a",
    uid=None,
    claim=None,
    phase="Running",
    node="node-1",
    rv="5",
    created="2026-01-01T00:00:00Z",
    template=False,
    finished=None,
    labels=None,
    scheduled=None,
):
    spec = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    status = {"phase": phase}
    if claim:
        if template:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
            status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
        else:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    if finished:
        status["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": finished}]
    if scheduled:
        status.setdefault("conditions", []).append({"type": "PodScheduled", **scheduled})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or new_uid(),
            "resourceVersion": rv,
            "creationTimestamp": created,
            "labels": labels or {},
        },
        "spec": spec,
        "status": status,
    }


def apply(cluster, kind, raw):
    return apply_object(cluster, kind, raw)


def bump(raw, rv):
    raw = {**raw, "metadata": {**raw["metadata"], "resourceVersion": str(rv)}}
    return raw


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="ops-test")


@pytest.fixture
def operator(db):
    return make_user("olivia", roles.OPERATOR)


@pytest.fixture
def viewer(db):
    return make_user("victor", roles.VIEWER)


@pytest.fixture
def scoped_operator(db):
    """An operator who may only touch namespace team-b."""
    return make_user("oscar", roles.OPERATOR, ["team-b"])
