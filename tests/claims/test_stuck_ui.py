"""The operations pages: stuck claims (finding appears in the live region, dry run, confirm, release), Pending
pods, readiness; viewers and outsiders cannot release."""

import pytest
from django.test import Client

from claims import stuck
from claims.models import AuditEntry, Finding
from mirror import roles
from tests.ops_fixtures import claim_raw, make_user, new_uid, pod_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def login(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def orphan(server, live_cluster):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    resync(live_cluster)
    return live_cluster


def test_finding_appears_in_the_live_region_then_release_with_confirmation(server, orphan):
    client = login(make_user("olivia", roles.OPERATOR))
    assert "No stuck claims" in client.get("/stuck/?cluster=dev&fragment=findings").content.decode()
    stuck.detect(orphan)
    region = client.get("/stuck/?cluster=dev&fragment=findings").content.decode()
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    assert f'data-finding="{finding.id}"' in region and "held for nobody" in region
    assert f'name="ids" value="{finding.id}"' in region  # selectable for release

    dry = client.post("/stuck/release/", {"ids": [finding.id], "step": "dry-run"}).content.decode()
    assert "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1/status" in dry
    assert "application/merge-patch+json" in dry and 'id="confirm-form"' in dry and "data-confirm=" in dry
    rv = server.store.get("resourceclaims", "team-a", "c1")["metadata"]["resourceVersion"]
    assert f'name="rv-{finding.id}" value="{rv}"' in dry
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["allocation"]

    done = client.post(
        "/stuck/release/", {"ids": [finding.id], "step": "release", f"rv-{finding.id}": rv}
    ).content.decode()
    assert "outcome-done" in done
    assert "allocation" not in server.store.get("resourceclaims", "team-a", "c1")["status"]
    finding.refresh_from_db()
    assert finding.cleared_at is not None  # the answer was applied to the mirror and the detector re-ran
    page = client.get("/stuck/?cluster=dev").content.decode()
    assert "No stuck claims" in page and "deallocate" in page  # recent attempts listed


def test_viewer_cannot_release_but_the_attempt_is_audited(server, orphan):
    stuck.detect(orphan)
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    viewer = login(make_user("victor", roles.VIEWER))
    page = viewer.get("/stuck/?cluster=dev").content.decode()
    assert "held for nobody" in page and 'name="ids"' not in page
    assert viewer.post("/stuck/release/", {"ids": [finding.id], "step": "release"}).status_code == 403
    assert AuditEntry.objects.get().outcome == "refused"
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["allocation"]


def test_operator_outside_the_namespace_sees_nothing_to_release(server, orphan):
    stuck.detect(orphan)
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    outsider = login(make_user("oscar", roles.OPERATOR, ["team-b"]))
    assert "No stuck claims" in outsider.get("/stuck/?cluster=dev").content.decode()
    response = outsider.post("/stuck/release/", {"ids": [finding.id], "step": "release"}, follow=True)
    assert "Select at least one finding" in response.content.decode()
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["allocation"]


def test_pending_page(server, live_cluster):
    seed(server.store, claim=claim_raw("c1"), pods=[pod_raw("p", claim="c1", phase="Pending", node="")])
    resync(live_cluster)
    client = login(make_user("victor", roles.VIEWER))
    index = client.get("/pending/?cluster=dev").content.decode()
    assert "/pending/dev/team-a/p/" in index
    page = client.get("/pending/dev/team-a/p/").content.decode()
    assert 'id="verdict"' in page and "Not allocated" in page
    assert "not found" in client.get("/pending/dev/team-a/nope/").content.decode()


def test_readiness_page(server, live_cluster):
    seed(server.store)
    resync(live_cluster)
    page = login(make_user("victor", roles.VIEWER)).get("/readiness/?cluster=dev").content.decode()
    for check_id in ("versions", "drivers", "rbac", "reporting", "recovery"):
        assert f'id="check-{check_id}"' in page
    assert 'id="overall"' in page


def test_stale_reservation_bulk_dry_run_shows_refusal_when_pod_is_back(server, live_cluster):
    uid = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    finding = Finding.objects.get(rule=stuck.STALE_RESERVATION)
    server.store.create("pods", pod_raw("p1", uid=uid, claim="c1"))
    page = (
        login(make_user("olivia", roles.OPERATOR))
        .post("/stuck/release/", {"ids": [finding.id], "step": "dry-run"})
        .content.decode()
    )
    assert "outcome-refused" in page and "Not safe now" in page and 'id="confirm-form"' not in page


def test_claim_changed_after_the_dry_run_is_a_conflict_on_the_page(server, orphan):
    stuck.detect(orphan)
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    client = login(make_user("olivia", roles.OPERATOR))
    dry = client.post("/stuck/release/", {"ids": [finding.id], "step": "dry-run"}).content.decode()
    rv = server.store.get("resourceclaims", "team-a", "c1")["metadata"]["resourceVersion"]
    assert f'name="rv-{finding.id}" value="{rv}"' in dry
    # Someone else changes the claim between the dry run and the confirmation.
    server.store.patch(
        "resourceclaims", "team-a", "c1", {"metadata": {"labels": {"touched": "yes"}}}, "application/merge-patch+json"
    )
    response = client.post("/stuck/release/", {"ids": [finding.id], "step": "release", f"rv-{finding.id}": rv})
    page = response.content.decode()
    assert response.status_code == 200 and "outcome-conflict" in page and "re-evaluate" in page
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["allocation"]  # nothing was sent
    assert not any(method == "PATCH" for method, _ in server.requests)
    assert list(AuditEntry.objects.order_by("id").values_list("username", "outcome")) == [
        ("olivia", "dry-run"),
        ("olivia", "conflict"),
    ]


@pytest.mark.parametrize("sent", [None, "", "stale"])
def test_a_ui_release_without_the_dry_runs_resource_version_is_refused(server, orphan, sent):
    """The confirm form carries the resourceVersion the dry run showed. A post without it once went
    through against whatever the claim was by then; one with another version is a conflict."""
    stuck.detect(orphan)
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    client = login(make_user("olivia", roles.OPERATOR))
    form = {"ids": [finding.id], "step": "release"}
    if sent is not None:
        current = server.store.get("resourceclaims", "team-a", "c1")["metadata"]["resourceVersion"]
        form[f"rv-{finding.id}"] = str(int(current) - 1) if sent == "stale" else sent
    response = client.post("/stuck/release/", form)
    page = response.content.decode()
    assert response.status_code == 200
    if sent == "stale":
        assert "outcome-conflict" in page and "re-evaluate" in page
    else:
        assert "outcome-refused" in page and "Run the dry run again" in page
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["allocation"]  # nothing was sent
    assert not any(method == "PATCH" for method, _ in server.requests)
    assert list(AuditEntry.objects.values_list("username", "dry_run", "outcome")) == [
        ("olivia", False, "conflict" if sent == "stale" else "refused")
    ]
    finding.refresh_from_db()
    assert finding.cleared_at is None
