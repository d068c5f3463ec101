"""REST endpoints of the operations issue, against the built-in API server: findings, release (single and
bulk, dry run first), permission boundaries, conflicts, the Pending checklist and readiness."""

import pytest
from rest_framework.test import APIClient

from claims import stuck
from claims.models import AuditEntry, Finding
from mirror import roles
from tests.ops_fixtures import claim_raw, make_user, new_uid, pod_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def stale(server, live_cluster):
    """A claim in team-a reserved for a pod that is gone, mirrored and detected."""
    gone = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("gone", gone)]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    return Finding.objects.get(rule=stuck.STALE_RESERVATION)


def test_findings_list_is_scoped_and_validated(stale):
    operator = make_user("olivia", roles.OPERATOR)
    body = client_for(operator).get("/api/v1/findings").json()
    assert [f["id"] for f in body["results"]] == [stale.id]
    assert body["results"][0]["rule_title"] == "Stale reservation" and body["results"][0]["active"] is True
    outsider = make_user("oscar", roles.OPERATOR, ["team-b"])
    assert client_for(outsider).get("/api/v1/findings").json()["results"] == []
    assert client_for(outsider).get(f"/api/v1/findings/{stale.id}").status_code == 404
    bad = client_for(operator).get("/api/v1/findings?active=maybe")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "active"
    assert client_for(operator).get("/api/v1/findings?rule=nope").json()["error"]["field"] == "rule"
    assert APIClient().get("/api/v1/findings").status_code == 401


def test_dry_run_then_release_through_the_api(server, stale):
    operator = make_user("olivia", roles.OPERATOR)
    api = client_for(operator)
    dry = api.post(f"/api/v1/findings/{stale.id}/release", {}, format="json")
    assert dry.status_code == 200
    result = dry.json()["result"]
    assert result["outcome"] == "dry-run"
    request = result["plan"]["request"]
    assert request["method"] == "PATCH" and request["content_type"] == "application/strategic-merge-patch+json"
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["reservedFor"]

    done = api.post(
        f"/api/v1/findings/{stale.id}/release",
        {"dry_run": False, "resource_version": request["resource_version"]},
        format="json",
    )
    assert done.status_code == 200 and done.json()["result"]["outcome"] == "done"
    assert not server.store.get("resourceclaims", "team-a", "c1")["status"].get("reservedFor")
    audit = api.get("/api/v1/audit/").json()["results"]
    assert [a["outcome"] for a in audit] == ["done", "dry-run"]


def test_changed_claim_is_409(server, stale):
    api = client_for(make_user("olivia", roles.OPERATOR))
    response = api.post(
        f"/api/v1/findings/{stale.id}/release", {"dry_run": False, "resource_version": "1"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict" and "re-evaluate" in response.json()["error"]["message"]


def test_viewer_and_outsider_get_403_and_are_audited(server, stale):
    viewer = make_user("victor", roles.VIEWER)
    response = client_for(viewer).post(f"/api/v1/findings/{stale.id}/release", {"dry_run": False}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    outsider = make_user("oscar", roles.OPERATOR, ["team-b"])
    response = client_for(outsider).post(
        "/api/v1/claims/dev/team-a/c1/release", {"action": "deallocate", "dry_run": False}, format="json"
    )
    assert response.status_code == 403 and "outside your scope" in response.json()["error"]["message"]
    assert list(AuditEntry.objects.order_by("id").values_list("username", "outcome")) == [
        ("victor", "refused"),
        ("oscar", "refused"),
    ]
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["reservedFor"]


def test_claim_release_by_name_validates_input(server, stale):
    api = client_for(make_user("olivia", roles.OPERATOR))
    assert api.post("/api/v1/claims/dev/team-a/c1/release", {}, format="json").json()["error"]["field"] == "action"
    wrong = api.post("/api/v1/claims/dev/team-a/c1/release", {"action": "explode"}, format="json")
    assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "action"
    uids = api.post("/api/v1/claims/dev/team-a/c1/release", {"action": "deallocate", "uids": ["x"]}, format="json")
    assert uids.json()["error"]["field"] == "uids"
    assert api.post("/api/v1/claims/nope/team-a/c1/release", {"action": "deallocate"}, format="json").status_code == 404
    unsafe = api.post("/api/v1/claims/dev/team-a/c1/release", {"action": "deallocate", "dry_run": False}, format="json")
    assert unsafe.status_code == 409 and "reservedFor is not empty" in unsafe.json()["error"]["message"]


def test_bulk_release(server, live_cluster):
    seed(server.store, claim=claim_raw("a", devices=["gpu-0"]))
    server.store.create("resourceclaims", claim_raw("b", devices=["gpu-1"]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    ids = list(
        Finding.objects.filter(rule=stuck.ORPHANED_ALLOCATION).order_by("claim_name").values_list("id", flat=True)
    )
    assert len(ids) == 2
    api = client_for(make_user("olivia", roles.OPERATOR))
    dry = api.post("/api/v1/findings/release", {"ids": ids}, format="json").json()["results"]
    assert [r["outcome"] for r in dry] == ["dry-run", "dry-run"]
    rvs = {str(r["finding"]): r["plan"]["request"]["resource_version"] for r in dry}
    done = api.post(
        "/api/v1/findings/release", {"ids": ids, "dry_run": False, "resource_versions": rvs}, format="json"
    ).json()["results"]
    assert [r["outcome"] for r in done] == ["done", "done"]
    assert all("allocation" not in server.store.get("resourceclaims", "team-a", n)["status"] for n in ("a", "b"))
    assert api.post("/api/v1/findings/release", {"ids": [999999]}, format="json").json()["error"]["field"] == "ids"


def test_pending_and_readiness_endpoints(server, live_cluster):
    seed(server.store, claim=claim_raw("c1"), pods=[pod_raw("p", claim="c1", phase="Pending", node="")])
    resync(live_cluster)
    api = client_for(make_user("victor", roles.VIEWER))
    report = api.get("/api/v1/pods/dev/team-a/p/pending")
    assert report.status_code == 200 and report.json()["claims"][0]["claim"] == "c1"
    assert api.get("/api/v1/pods/dev/team-a/nope/pending").status_code == 404
    outsider = client_for(make_user("tina", roles.VIEWER, ["team-b"]))
    assert outsider.get("/api/v1/pods/dev/team-a/p/pending").status_code == 404
    readiness = api.get("/api/v1/clusters/dev/readiness")
    assert readiness.status_code == 200 and {c["id"] for c in readiness.json()["checks"]} == {
        "versions",
        "drivers",
        "rbac",
        "reporting",
        "recovery",
        "mirror",
        "transition",
    }
    assert api.get("/api/v1/clusters/nope/readiness").status_code == 404
