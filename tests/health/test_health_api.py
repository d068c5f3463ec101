"""REST API of device health: the devices' `health` field, GET /api/v1/health/devices and /api/v1/health/timeline
(filters, scoping of claims and pods to the reader's namespaces, bad filters as 400s)."""

import pytest

from mirror.models import Cluster
from mirror.sync.apply import apply_object
from tests.api_fixtures import NV, fleet, gpu, resource_slice, scoped_viewer, viewer  # noqa: F401

pytestmark = pytest.mark.django_db

XID = {"key": "nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def taint_node_a(devices):
    """node-a's slice again, the given devices tainted (a newer resourceVersion)."""
    from inventory.models import ResourceSlice

    old = ResourceSlice.objects.get(name="node-a-gpu")
    raw = resource_slice(
        "node-a-gpu",
        "node-a",
        NV,
        [
            gpu(f"gpu-{i}", "NVIDIA H100 80GB HBM3", "80Gi", **({"taints": [XID]} if i in devices else {}))
            for i in range(8)
        ],
    )
    raw["metadata"].update(uid=old.uid, resourceVersion=str(int(old.resource_version) + 1))
    apply_object(Cluster.objects.get(name="alpha"), "ResourceSlice", raw)


def ok(response):
    assert response.status_code == 200, response.content
    return response.json()


def test_devices_carry_their_health(fleet, viewer):
    body = ok(viewer.get("/api/v1/devices/?cluster=alpha&pool=node-a"))
    health = {d["name"]: d["health"] for d in body["results"]}
    assert health["gpu-7"] == "unhealthy"  # tainted NoSchedule in the fixture
    assert health["gpu-0"] == "healthy"
    detail = ok(viewer.get(f"/api/v1/devices/{body['results'][0]['id']}/"))
    assert detail["health"] in ("healthy", "unhealthy")


def test_device_health_list_and_filters(fleet, viewer):
    body = ok(viewer.get("/api/v1/health/devices?cluster=alpha"))
    [row] = body["results"]
    assert (row["device"], row["node"], row["state"], row["source"]) == ("gpu-7", "node-a", "unhealthy", "slice-taint")
    assert row["reason"] == "taint nvidia.com/xid=79:NoSchedule in its ResourceSlice"
    assert row["reasons"][0]["taint"] == XID
    assert ok(viewer.get("/api/v1/health/devices?state=degraded"))["results"] == []
    bad = viewer.get("/api/v1/health/devices?state=sick")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "state"
    assert bad.json()["error"]["message"] == "Must be one of unhealthy, degraded, unknown, not 'sick'."
    unknown = viewer.get("/api/v1/health/devices?colour=red")
    assert unknown.status_code == 400 and unknown.json()["error"]["field"] == "colour"


def test_timeline_names_who_sat_on_the_device_within_scope(fleet, viewer, scoped_viewer):
    taint_node_a({0, 1, 7})  # gpu-0 held by team-a/train (pod trainer), gpu-1 watched by ops/monitor
    body = ok(viewer.get("/api/v1/health/timeline?cluster=alpha&to_state=unhealthy&device=gpu-0"))
    [change] = body["results"]
    assert (change["from_state"], change["to_state"], change["source"]) == ("healthy", "unhealthy", "slice-taint")
    assert change["claims"] == ["team-a/train"] and change["pods"] == ["team-a/trainer"]
    everyone = ok(viewer.get("/api/v1/health/timeline?device=gpu-1"))["results"]
    assert everyone[0]["claims"] == ["ops/monitor"]
    # A viewer of team-a only sees the change, not the claims of other namespaces.
    scoped = ok(scoped_viewer.get("/api/v1/health/timeline?device=gpu-1"))["results"]
    assert scoped[0]["to_state"] == "unhealthy" and scoped[0]["claims"] == []
    assert ok(scoped_viewer.get("/api/v1/health/timeline?device=gpu-0"))["results"][0]["pods"] == ["team-a/trainer"]

    taint_node_a({7})
    newest = ok(viewer.get("/api/v1/health/timeline?device=gpu-0"))["results"]
    assert [(c["from_state"], c["to_state"]) for c in newest] == [("unhealthy", "healthy"), ("healthy", "unhealthy")]
    since = newest[0]["at"]
    assert len(ok(viewer.get(f"/api/v1/health/timeline?since={since}&device=gpu-0"))["results"]) == 1
    assert viewer.get("/api/v1/health/timeline?since=yesterday").status_code == 400


def test_scoped_reader_gets_no_pod_of_other_namespaces(fleet, scoped_viewer):
    """A pod of team-b reports a device Unhealthy; a reader of team-a learns that, not which pod."""
    from tests.api_fixtures import pod
    from tests.health.health_fixtures import with_health

    raw = with_health(pod("other", "team-b", "stuck"), [(f"{NV}/node-b/gpu-0", "Unhealthy", "XID 48")])
    apply_object(Cluster.objects.get(name="alpha"), "Pod", raw)
    [row] = ok(scoped_viewer.get("/api/v1/health/devices?pool=node-b"))["results"]
    assert row["state"] == "unhealthy"
    assert row["reason"] == "a pod in another namespace reports it Unhealthy"
    assert "pod" not in row["reasons"][0] and "XID" not in str(row)
    [change] = ok(scoped_viewer.get("/api/v1/health/timeline?pool=node-b"))["results"]
    assert change["reason"] == "a pod in another namespace reports it Unhealthy" and change["pods"] == []
