"""REST API: claims, claim templates, pods, audit log, allocation aggregate, namespace scoping."""

import pytest

from tests.api_fixtures import fleet, queries_for, scoped_viewer, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def keys(response):
    assert response.status_code == 200, response.content
    return sorted(f"{r['namespace']}/{r['name']}" for r in response.json()["results"])


def test_claim_fields(fleet, viewer):
    body = viewer.get("/api/v1/claims/?namespace=team-a&name=train").json()["results"][0]
    assert body["state"] == "reserved" and body["allocated"] is True and body["node"] == "node-a"
    assert body["stuck"] is False  # its only finding is cleared
    assert body["results"] == [
        {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "node-a",
            "device": "gpu-0",
            "admin_access": False,
            "share_id": "",
            "consumed_capacity": {},
        }
    ]
    assert body["reserved_for"] == [
        {"api_group": "", "resource": "pods", "name": "trainer", "uid": "uid-team-a-trainer"}
    ]
    assert body["device_classes"] == ["gpu.nvidia.com"]
    assert "raw" not in body


def test_claim_raw(fleet, viewer):
    body = viewer.get("/api/v1/claims/?name=stuck&raw=1").json()["results"][0]
    assert body["raw"]["metadata"]["deletionTimestamp"] == "2026-01-06T10:00:00Z"


@pytest.mark.parametrize(
    "state, expected",
    [
        ("pending", ["team-a/pending"]),
        ("allocated", ["ops/monitor", "team-b/share"]),
        ("reserved", ["team-a/train"]),
        ("deleting", ["team-b/stuck"]),
        ("stuck", ["team-b/stuck"]),
    ],
)
def test_claim_state_filter(fleet, viewer, state, expected):
    assert keys(viewer.get(f"/api/v1/claims/?state={state}")) == expected


def test_claim_filters(fleet, viewer):
    assert keys(viewer.get("/api/v1/claims/?node=node-b")) == ["team-b/share", "team-b/stuck"]
    assert keys(viewer.get("/api/v1/claims/?device_class=nic.example.com")) == ["team-b/share"]
    assert keys(viewer.get("/api/v1/claims/?pod=trainer")) == ["team-a/train"]
    assert keys(viewer.get("/api/v1/claims/?pod=waiter")) == ["team-b/stuck"]
    assert keys(viewer.get("/api/v1/claims/?namespace=ops&cluster=alpha")) == ["ops/monitor"]
    assert keys(viewer.get("/api/v1/claims/?cluster=beta")) == []


def test_claim_ordering(fleet, viewer):
    body = viewer.get("/api/v1/claims/?ordering=-name").json()
    assert [c["name"] for c in body["results"]] == ["train", "stuck", "share", "pending", "monitor"]


@pytest.mark.parametrize("url", ["/api/v1/claims/", "/api/v1/pods/", "/api/v1/claim-templates/", "/api/v1/audit/"])
def test_list_query_count_does_not_grow_with_page_size(fleet, viewer, url):
    # Fixed cost: token, role, scope, count, page, prefetches (device status and health included) --
    # the same for 1 row or all rows.
    one, small = queries_for(viewer, url + "?page_size=1")
    many, large = queries_for(viewer, url + "?page_size=1000")
    assert len(small.json()["results"]) == 1 and len(large.json()["results"]) == large.json()["count"] > 1
    assert one == many <= 9


def test_templates(fleet, viewer):
    body = viewer.get("/api/v1/claim-templates/?device_class=gpu.nvidia.com").json()
    assert [(t["namespace"], t["name"], t["device_classes"]) for t in body["results"]] == [
        ("team-a", "tpl", ["gpu.nvidia.com"])
    ]
    assert viewer.get("/api/v1/claim-templates/?device_class=other").json()["count"] == 0


def test_pods_filters(fleet, viewer):
    assert keys(viewer.get("/api/v1/pods/?phase=Running")) == ["team-a/trainer"]
    assert keys(viewer.get("/api/v1/pods/?node=node-a")) == ["team-a/trainer"]
    assert keys(viewer.get("/api/v1/pods/?namespace=team-b")) == ["team-b/waiter"]
    assert keys(viewer.get("/api/v1/pods/?claim=stuck")) == ["team-b/waiter"]
    pod = viewer.get("/api/v1/pods/?name=trainer").json()["results"][0]
    assert pod["claims"] == [{"pod_claim_name": "gpu", "template_name": "", "claim_name": "train"}]


def test_audit_log_is_read_only_and_filterable(fleet, viewer):
    body = viewer.get("/api/v1/audit/?outcome=done").json()
    assert [(a["namespace"], a["action"]) for a in body["results"]] == [("team-b", "remove-finalizer")]
    assert viewer.get("/api/v1/audit/?claim=train").json()["results"][0]["outcome"] == "refused"
    entry = body["results"][0]["id"]
    assert viewer.delete(f"/api/v1/audit/{entry}/").status_code == 405
    assert viewer.post("/api/v1/audit/", {}).status_code == 405


def test_allocation_per_namespace(fleet, viewer):
    rows = {r["namespace"]: r for r in viewer.get("/api/v1/aggregates/allocation?cluster=alpha").json()["results"]}
    assert rows["team-b"] == {
        "cluster": "alpha",
        "namespace": "team-b",
        "claims": 2,
        "pending": 0,
        "allocated": 1,
        "reserved": 0,
        "deleting": 1,
        "stuck": 1,
        "devices": 2,
        "admin_access_devices": 0,
    }
    assert rows["ops"]["devices"] == 0 and rows["ops"]["admin_access_devices"] == 1
    assert rows["team-a"]["pending"] == 1 and rows["team-a"]["reserved"] == 1


def test_scoped_viewer_sees_only_own_namespaces(fleet, scoped_viewer):
    assert keys(scoped_viewer.get("/api/v1/claims/")) == ["team-a/pending", "team-a/train"]
    assert keys(scoped_viewer.get("/api/v1/pods/")) == ["team-a/trainer"]
    assert keys(scoped_viewer.get("/api/v1/claim-templates/")) == ["team-a/tpl"]
    assert [a["namespace"] for a in scoped_viewer.get("/api/v1/audit/").json()["results"]] == ["team-a"]
    assert [r["namespace"] for r in scoped_viewer.get("/api/v1/aggregates/allocation").json()["results"]] == ["team-a"]
    # Explicitly asking for another namespace gives nothing, and its objects are 404, not 403 (no leak).
    assert scoped_viewer.get("/api/v1/claims/?namespace=team-b").json()["count"] == 0
    other = fleet[0].pk and viewer_claim_id("team-b", "stuck")
    assert scoped_viewer.get(f"/api/v1/claims/{other}/").status_code == 404


def test_scoped_viewer_device_detail_hides_foreign_allocations(fleet, scoped_viewer):
    from inventory.models import Device

    dev = Device.objects.get(pool="node-b", name="gpu-0")  # held by team-b/stuck
    body = scoped_viewer.get(f"/api/v1/devices/{dev.pk}/").json()
    assert body["state"] == "allocated" and body["allocations"] == []


def viewer_claim_id(namespace, name):
    from claims.models import ResourceClaim

    return ResourceClaim.objects.get(namespace=namespace, name=name).pk
