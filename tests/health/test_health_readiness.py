"""Readiness (check 4 of ops/readiness.py, ops/readiness_dra.py): per driver with allocated devices, whether it reports device status
(claims' status.devices) and device health (pods' allocatedResourcesStatus) at all."""

import pytest

from ops.readiness import PASS, check_reporting
from tests.ops_fixtures import DRIVER, apply, claim_raw, cluster, new_uid, node_raw, slice_raw  # noqa: F401

from .health_fixtures import health_pod

pytestmark = pytest.mark.django_db

NET = "net.example.com"


def line(cluster):
    [item] = [i for i in check_reporting(cluster)["items"] if "drivers" in (i.get("data") or {})] or [None]
    return item


def test_nothing_allocated_says_so(cluster):
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0"]))
    [item] = [i for i in check_reporting(cluster)["items"] if "report device status" in i["text"]]
    assert item["status"] == PASS and item["text"].startswith("No device is allocated")


def test_per_driver_status_and_health(cluster):
    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0", "gpu-1"]))
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["nic-0"], driver=NET, pool="node-1-net"))
    uid = new_uid()
    status = [
        {"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "conditions": [{"type": "Ready", "status": "True"}]}
    ]
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)], device_status=status))
    nic = claim_raw("n1", devices=[])
    nic["status"]["allocation"] = {
        "devices": {"results": [{"request": "gpu", "driver": NET, "pool": "node-1-net", "device": "nic-0"}]}
    }
    apply(cluster, "ResourceClaim", nic)
    # A CDI resource ID: the driver is known through the claim's allocation.
    apply(cluster, "Pod", health_pod("p1", "c1", uid, [("gpu.example.com/gpu=gpu-0", "Healthy", None)]))
    item = line(cluster)
    assert item["status"] == PASS
    assert item["data"]["drivers"] == {
        DRIVER: {"device_status": True, "health": True},
        NET: {"device_status": False, "health": False},
    }
    assert item["text"] == (
        "Drivers that report device status and health: gpu.example.com: device status yes, health yes; "
        "net.example.com: device status no, health no."
    )
