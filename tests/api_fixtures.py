"""Kubernetes objects for the API tests, loaded through the real sync path (apply_object).

cluster "alpha":
  node-a  8 x H100 (gpu.nvidia.com, memory 80Gi): gpu-0 held by team-a/train (reserved by pod trainer),
          gpu-1 watched by ops/monitor (admin access only), gpu-7 tainted NoSchedule.
  node-b  2 x A100 (memory 40Gi); gpu-0 held by team-b/stuck (deleting, with an active finding).
  node-b  1 shareable NIC (net.example.com, allowMultipleAllocations) shared by team-b/share.
  team-a/pending: no allocation; team-a template "tpl"; pod trainer uses team-a/train.
cluster "beta": one node, one H100, nothing allocated (so cluster filters have something to exclude).
"""

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from claims.models import AuditEntry, Finding
from mirror import roles
from mirror.models import Cluster, SyncState
from mirror.sync.apply import apply_object

from .fleet_data import make_user, meta

NV = "gpu.nvidia.com"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"


def node(name):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(name, labels={"kubernetes.io/hostname": name}),
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-05T10:00:00Z"}],
            "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110"},
        },  # the scheduler counts a node without it as full
    }


def gpu(name, product, memory, **extra):
    return {
        "name": name,
        "attributes": {
            "productName": {"string": product},
            "index": {"int": int(name.split("-")[-1])},
            "driverVersion": {"version": "580.95.5"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{name[-1]}0"},
        },
        "capacity": {"memory": {"value": memory}, "multiprocessors": {"value": "132"}},
        **extra,
    }


def resource_slice(name, node_name, driver, devices):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta(name),
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(
    name,
    namespace,
    *,
    results=(),
    reserved=(),
    deleting=False,
    device_class="gpu.nvidia.com",
    node_name=None,
    owner=None,
):
    md = meta(name, namespace)
    if deleting:
        md["deletionTimestamp"] = "2026-01-06T10:00:00Z"
        md["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    if owner:
        md["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{namespace}-{owner}", "controller": True}
        ]
    status = {}
    if results:
        status["allocation"] = {
            "devices": {"results": [dict(request="gpu", **r) for r in results]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
            "allocationTimestamp": "2026-01-05T11:00:00Z",
        }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{namespace}-{p}"} for p in reserved]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": md,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
        "status": status,
    }


def pod(name, namespace, claim_name, node_name="", phase="Running"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(name, namespace),
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "busybox"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
        "status": {"phase": phase},
    }


def load_fleet():
    alpha = Cluster.objects.create(name="alpha")
    beta = Cluster.objects.create(name="beta", read_only=True)
    for kind in ("Node", "ResourceSlice", "ResourceClaim"):
        SyncState.objects.create(cluster=alpha, kind=kind, status=SyncState.Status.CONNECTED)
    SyncState.objects.create(
        cluster=beta, kind="ResourceSlice", status=SyncState.Status.ERROR, last_error="connection refused"
    )
    taint = {"key": "nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    objects = [
        (alpha, "Node", node("node-a")),
        (alpha, "Node", node("node-b")),
        (
            alpha,
            "DeviceClass",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": meta("gpu.nvidia.com"),
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
            },
        ),
        (
            alpha,
            "ResourceSlice",
            resource_slice(
                "node-a-gpu",
                "node-a",
                NV,
                [gpu(f"gpu-{i}", H100, "80Gi", **({"taints": [taint]} if i == 7 else {})) for i in range(8)],
            ),
        ),
        (
            alpha,
            "ResourceSlice",
            resource_slice("node-b-gpu", "node-b", NV, [gpu(f"gpu-{i}", A100, "40Gi") for i in range(2)]),
        ),
        (
            alpha,
            "ResourceSlice",
            resource_slice(
                "node-b-nic",
                "node-b",
                "net.example.com",
                [
                    {
                        "name": "nic-0",
                        "allowMultipleAllocations": True,
                        "attributes": {
                            "model": {"string": "cx7"},
                            "gpu.nvidia.com/productName": {"string": "not a gpu"},
                        },
                        "capacity": {"bandwidth": {"value": "400G"}},
                    }
                ],
            ),
        ),
        (
            alpha,
            "ResourceClaim",
            claim(
                "train",
                "team-a",
                results=[{"driver": NV, "pool": "node-a", "device": "gpu-0"}],
                reserved=["trainer"],
                node_name="node-a",
            ),
        ),
        (alpha, "ResourceClaim", claim("pending", "team-a")),
        (
            alpha,
            "ResourceClaim",
            claim(
                "monitor",
                "ops",
                results=[{"driver": NV, "pool": "node-a", "device": "gpu-1", "adminAccess": True}],
                node_name="node-a",
            ),
        ),
        (
            alpha,
            "ResourceClaim",
            claim(
                "stuck",
                "team-b",
                results=[{"driver": NV, "pool": "node-b", "device": "gpu-0"}],
                deleting=True,
                node_name="node-b",
            ),
        ),
        (
            alpha,
            "ResourceClaim",
            claim(
                "share",
                "team-b",
                device_class="nic.example.com",
                results=[
                    {
                        "driver": "net.example.com",
                        "pool": "node-b",
                        "device": "nic-0",
                        "shareID": "0b7c5a1e-0000-4000-8000-000000000001",
                    }
                ],
                node_name="node-b",
            ),
        ),
        (
            alpha,
            "ResourceClaimTemplate",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": meta("tpl", "team-a"),
                "spec": {
                    "spec": {
                        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
                    }
                },
            },
        ),
        (
            alpha,
            "ResourceClaimTemplate",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": meta("nic", "team-b"),
                "spec": {
                    "spec": {
                        "devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}}]}
                    }
                },
            },
        ),
        (alpha, "Pod", pod("trainer", "team-a", "train", node_name="node-a")),
        (alpha, "Pod", pod("waiter", "team-b", "stuck", phase="Pending")),
        (beta, "Node", node("node-z")),
        (beta, "ResourceSlice", resource_slice("node-z-gpu", "node-z", NV, [gpu("gpu-0", H100, "80Gi")])),
    ]
    for cluster, kind, raw in objects:
        apply_object(cluster, kind, raw)
    now = timezone.now()
    Finding.objects.create(
        cluster=alpha,
        rule="deletion-blocked",
        namespace="team-b",
        claim_name="stuck",
        claim_uid="uid-team-b-stuck",
        summary="deletion blocked",
        first_seen=now,
        last_seen=now,
    )
    Finding.objects.create(
        cluster=alpha,
        rule="old",
        namespace="team-a",
        claim_name="train",
        claim_uid="uid-team-a-train",
        summary="cleared long ago",
        first_seen=now,
        last_seen=now,
        cleared_at=now,
    )
    AuditEntry.objects.create(
        username="op",
        cluster=alpha,
        cluster_name="alpha",
        namespace="team-b",
        claim_name="stuck",
        action="remove-finalizer",
        outcome="done",
    )
    AuditEntry.objects.create(
        username="op",
        cluster=alpha,
        cluster_name="alpha",
        namespace="team-a",
        claim_name="train",
        action="deallocate",
        outcome="refused",
    )
    return alpha, beta


def client_for(user):
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def fleet(db):
    return load_fleet()


@pytest.fixture
def viewer(db):
    return client_for(make_user("vera", roles.VIEWER))


@pytest.fixture
def operator(db):
    return client_for(make_user("otto", roles.OPERATOR))


@pytest.fixture
def scoped_viewer(db):
    return client_for(make_user("sam", roles.VIEWER, namespaces=["team-a"]))


@pytest.fixture
def norole(db):
    return client_for(make_user("nora"))


@pytest.fixture
def anonymous():
    return APIClient()


def queries_for(client, url):
    """(number of SQL queries, response) of one GET."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(ctx.captured_queries), response
