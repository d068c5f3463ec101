"""Release actions against the built-in API server over HTTP with the real kubernetes client:
dry run shows the exact request, the action changes the API server's object, the finding clears after a
re-sync; races, permissions, read-only clusters, and an audit entry for every attempt."""

import json

import pytest
import yaml

from claims import stuck
from claims.models import AuditEntry, Finding
from claims.release.actions import release, release_finding
from claims.release.audit import CONFLICT, DONE, DRY_RUN, ERROR, REFUSED
from claims.release.plans import STRATEGIC, plan_action
from claims.release.transport import send
from devcluster.store import NotFound
from mirror import roles
from mirror.bounded import KEEP, TEXT_MAX, bounded
from mirror.kube import api_client_for
from tests.ops_fixtures import FINALIZER, claim_raw, make_user, new_uid, pod_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(transactional_db):
    return make_user("olivia", roles.OPERATOR)


def findings(cluster, rule):
    return list(Finding.objects.filter(cluster=cluster, rule=rule).active())


def store_claim(server, name="c1"):
    return server.store.get("resourceclaims", "team-a", name)


def test_stale_reservation_then_deallocate_end_to_end(server, live_cluster, operator):
    gone_uid = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("gone", gone_uid)]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    [finding] = findings(live_cluster, stuck.STALE_RESERVATION)
    before = store_claim(server)

    dry = release_finding(operator, finding, dry_run=True)
    assert dry.outcome == DRY_RUN, dry.reason
    request = dry.plan.request.as_dict()
    assert request == {
        "method": "PATCH",
        "path": "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1/status",
        "body": {
            "metadata": {"uid": before["metadata"]["uid"], "resourceVersion": before["metadata"]["resourceVersion"]},
            "status": {"reservedFor": [{"$patch": "delete", "uid": gone_uid}]},
        },
        "content_type": STRATEGIC,
        "resource_version": before["metadata"]["resourceVersion"],
    }
    assert store_claim(server) == before  # nothing sent
    assert any("double allocation" in w for w in dry.plan.warnings)

    done = release_finding(operator, finding, dry_run=False, expected_resource_version=request["resource_version"])
    assert done.outcome == DONE, done.reason
    after = store_claim(server)
    assert after["status"].get("reservedFor") in (None, [])
    assert after["status"]["allocation"] == before["status"]["allocation"]
    assert ("PATCH", request["path"]) in list(server.requests)

    resync(live_cluster)
    stuck.detect(live_cluster)
    finding.refresh_from_db()
    assert finding.cleared_at is not None
    [orphan] = findings(live_cluster, stuck.ORPHANED_ALLOCATION)
    assert orphan.remedy == "deallocate"

    assert release_finding(operator, orphan, dry_run=False).outcome == DONE
    assert "allocation" not in store_claim(server)["status"]
    resync(live_cluster)
    stuck.detect(live_cluster)
    assert list(Finding.objects.filter(cluster=live_cluster).active()) == []

    audit = list(AuditEntry.objects.order_by("id").values_list("action", "outcome", "username", "dry_run"))
    assert audit == [
        ("remove_reservations", DRY_RUN, "olivia", True),
        ("remove_reservations", DONE, "olivia", False),
        ("deallocate", DONE, "olivia", False),
    ]
    entry = AuditEntry.objects.get(action="deallocate")
    assert entry.before["status"]["allocation"] and "allocation" not in entry.after["status"]
    assert entry.request["request"]["method"] == "PATCH" and entry.rule == stuck.ORPHANED_ALLOCATION
    assert entry.claim_uid == before["metadata"]["uid"] and entry.cluster_name == "dev"


def test_blocked_deletion_is_finished_in_two_safe_steps(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    server.store.delete("resourceclaims", "team-a", "c1")  # finalizer: only marks it Deleting
    resync(live_cluster)
    stuck.detect(live_cluster)
    [finding] = findings(live_cluster, stuck.DELETION_BLOCKED)
    assert finding.remedy == "deallocate"
    # Never offered while allocated: removing the finalizer now would leak the devices.
    early = release(operator, live_cluster, "team-a", "c1", "finish_deletion", dry_run=False)
    assert early.outcome == REFUSED and "leak" in early.reason
    assert FINALIZER in store_claim(server)["metadata"]["finalizers"]

    assert release_finding(operator, finding, dry_run=False).outcome == DONE
    stuck.detect(live_cluster)
    finding.refresh_from_db()
    assert finding.remedy == "finish_deletion" and finding.cleared_at is None
    assert release_finding(operator, finding, dry_run=False).outcome == DONE
    with pytest.raises(NotFound):
        store_claim(server)
    resync(live_cluster)
    stuck.detect(live_cluster)
    finding.refresh_from_db()
    assert finding.cleared_at is not None


def test_delete_generated_claim_of_gone_pod(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("pod-gpu-x1", owner=("gone-pod", new_uid())))
    refused = release(
        operator, live_cluster, "team-a", "pod-gpu-x1", "delete_claim", dry_run=False, expected_resource_version="1"
    )
    assert refused.outcome == CONFLICT and "changed since" in refused.reason
    dry = release(operator, live_cluster, "team-a", "pod-gpu-x1", "delete_claim", dry_run=True)
    assert dry.plan.request.method == "DELETE"
    done = release(
        operator,
        live_cluster,
        "team-a",
        "pod-gpu-x1",
        "delete_claim",
        dry_run=False,
        expected_resource_version=dry.plan.request.resource_version,
    )
    assert done.outcome == DONE, done.reason
    with pytest.raises(NotFound):
        store_claim(server, "pod-gpu-x1")


def test_pod_that_comes_back_between_dry_run_and_action_is_refused(server, live_cluster, operator):
    pod_uid = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("p1", pod_uid)]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    [finding] = findings(live_cluster, stuck.STALE_RESERVATION)
    dry = release_finding(operator, finding, dry_run=True)
    assert dry.outcome == DRY_RUN
    # The mirror lagged: the pod is there on the API server (same uid), running.
    server.store.create("pods", pod_raw("p1", uid=pod_uid, claim="c1"))
    before = store_claim(server)
    action = release_finding(
        operator, finding, dry_run=False, expected_resource_version=dry.plan.request.resource_version
    )
    assert action.outcome == REFUSED and "p1" in action.reason and "Running" in action.reason
    assert store_claim(server) == before
    assert not any(m == "PATCH" for m, _ in server.requests)


def test_claim_changed_between_dry_run_and_action_is_a_conflict(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    dry = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=True)
    server.store.patch(
        "resourceclaims", "team-a", "c1", {"metadata": {"labels": {"touched": "yes"}}}, "application/merge-patch+json"
    )
    action = release(
        operator,
        live_cluster,
        "team-a",
        "c1",
        "deallocate",
        dry_run=False,
        expected_resource_version=dry.plan.request.resource_version,
    )
    assert action.outcome == CONFLICT and "re-evaluate" in action.reason
    assert store_claim(server)["status"]["allocation"]


def test_a_stale_precondition_gets_409_from_the_api_server(server, live_cluster):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    stale = store_claim(server)
    plan = plan_action("deallocate", stale, {})
    server.store.patch(
        "resourceclaims", "team-a", "c1", {"metadata": {"labels": {"touched": "yes"}}}, "application/merge-patch+json"
    )
    client = api_client_for(live_cluster)
    try:
        status, body = send(client, plan.request)
    finally:
        client.close()
    assert status == 409 and body.get("reason") == "Conflict"
    assert store_claim(server)["status"]["allocation"]


def test_409_during_the_action_is_reported_and_not_retried(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    server.fail_next(
        1, status=409, path_prefix="/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1/status", method="PATCH"
    )
    action = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=False)
    assert action.outcome == CONFLICT and "not retried" in action.reason
    assert sum(1 for m, p in server.requests if m == "PATCH") == 1
    assert AuditEntry.objects.get().outcome == CONFLICT


@pytest.mark.parametrize("who", ["viewer", "outsider", "anonymous-ish"])
def test_permission_denied_is_refused_and_audited(server, live_cluster, who):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    user = {
        "viewer": lambda: make_user("victor", roles.VIEWER),
        "outsider": lambda: make_user("oscar", roles.OPERATOR, ["team-b"]),
        "anonymous-ish": lambda: make_user("nobody"),
    }[who]()
    before = store_claim(server)
    outcome = release(user, live_cluster, "team-a", "c1", "deallocate", dry_run=False)
    assert outcome.outcome == REFUSED and outcome.permission_denied
    assert ("outside your scope" if who == "outsider" else "operator role") in outcome.reason
    assert store_claim(server) == before
    entry = AuditEntry.objects.get()
    assert (entry.username, entry.outcome, entry.action) == (user.username, REFUSED, "deallocate")


def test_read_only_cluster_refuses_the_action_but_shows_the_dry_run(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    live_cluster.read_only = True
    live_cluster.save()
    dry = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=True)
    assert dry.outcome == DRY_RUN and any("read-only" in w for w in dry.plan.warnings)
    action = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=False)
    assert action.outcome == REFUSED and "read-only" in action.reason
    assert store_claim(server)["status"]["allocation"]
    assert list(AuditEntry.objects.order_by("id").values_list("outcome", flat=True)) == [DRY_RUN, REFUSED]


def test_unreachable_api_server_never_acts_on_the_mirror_alone(server, live_cluster, operator, tmp_path):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    resync(live_cluster)
    config = yaml.safe_load(open(live_cluster.kubeconfig))
    config["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"  # discard port: connection refused
    path = tmp_path / "broken"
    path.write_text(yaml.safe_dump(config))
    live_cluster.kubeconfig = str(path)
    live_cluster.save()
    dry = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=True)
    assert dry.outcome == DRY_RUN and "database mirror" in dry.plan.warnings[0]
    action = release(operator, live_cluster, "team-a", "c1", "deallocate", dry_run=False)
    assert action.outcome == ERROR and "nothing sent" in action.reason


def test_cleared_finding_and_finding_without_remedy_are_refused(server, live_cluster, operator):
    seed(server.store, claim=claim_raw("a", devices=["gpu-0"]))
    server.store.create("resourceclaims", claim_raw("b", devices=["gpu-0"]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    [double, _] = findings(live_cluster, stuck.DOUBLE_ALLOCATION)
    outcome = release_finding(operator, double, dry_run=False)
    assert outcome.outcome == REFUSED and "no safe automatic remedy" in outcome.reason
    assert AuditEntry.objects.filter(outcome=REFUSED, rule=stuck.DOUBLE_ALLOCATION).count() == 1


def test_a_huge_refused_release_stores_a_bounded_audit_row_with_its_counts(server, live_cluster, operator):
    """30,000 made-up uids once stored a 5.9 MB row: an operator could grow the audit log at will."""
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("gone", new_uid())]))
    resync(live_cluster)
    uids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(30_000)]
    outcome = release(operator, live_cluster, "team-a", "c1", "remove_reservations", dry_run=False, uids=uids)
    assert outcome.outcome == REFUSED and uids[0] in outcome.reason
    row = AuditEntry.objects.get(pk=outcome.audit.pk)
    stored = json.dumps(
        {
            f: getattr(row, f)
            for f in ("reason", "reason_message", "request", "response", "before", "after", "kube_identity")
        }
    )
    assert len(stored) < 64 * 1024, len(stored)
    joined = ", ".join(uids)
    said = f"reservedFor no longer has an entry with uid {joined}: re-evaluate."
    assert outcome.reason == said  # the answer names them all; the row keeps the start and the length
    assert row.reason == said[:TEXT_MAX] + f"… ({len(said):,} characters in all)"
    assert row.reason_message["params"]["uids"] == joined[:TEXT_MAX] + f"… ({len(joined):,} characters in all)"
    assert row.before["metadata"]["name"] == "c1" and row.before["status"]["reservedFor"]  # the claim itself kept whole
    assert server.store.get("resourceclaims", "team-a", "c1")["status"]["reservedFor"]  # and nothing sent


def test_bounded_keeps_small_values_and_counts_what_it_leaves_out():
    small = {"a": [1, 2, {"b": "x" * 10}], "c": None, "d": 1.5, "e": True}
    assert bounded(small) == small
    big = bounded({"items": list(range(250)), "text": "y" * 5000, **{f"k{i}": i for i in range(150)}})
    assert big["items"] == list(range(KEEP)) + [f"… {250 - KEEP} more items (250 in all)"]
    assert big["text"] == "y" * TEXT_MAX + "… (5,000 characters in all)"
    assert len(big) == KEEP + 1 and big["…"] == f"{152 - KEEP} more keys (152 in all)"
    deep = []
    for _ in range(100):
        deep = [deep]
    assert "nested deeper than" in json.dumps(bounded(deep))
