"""Release-action planning (the dry run's exact request and the safety refusals), as pure functions."""

import pytest

from claims.release.plans import MERGE, STRATEGIC, plan_action
from tests.ops_fixtures import FINALIZER, claim_raw, new_uid, pod_raw

PATH = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1"


def pods(*raws):
    return {p["metadata"]["name"]: p for p in raws}


def test_remove_reservations_builds_the_strategic_merge_patch():
    gone, running = new_uid(), new_uid()
    claim = claim_raw("c1", rv="42", devices=["gpu-0"], reserved=[("gone", gone), ("run", running)])
    plan = plan_action("remove_reservations", claim, pods(pod_raw("run", uid=running, claim="c1")))
    assert not plan.refused
    assert plan.request.as_dict() == {
        "method": "PATCH",
        "path": PATH + "/status",
        "body": {
            "metadata": {"uid": claim["metadata"]["uid"], "resourceVersion": "42"},
            "status": {"reservedFor": [{"$patch": "delete", "uid": gone}]},
        },
        "content_type": STRATEGIC,
        "resource_version": "42",
    }
    assert any("node-1" in w and "double allocation" in w for w in plan.warnings)


def test_remove_reservations_refuses_a_named_live_pod():
    uid = new_uid()
    claim = claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)])
    plan = plan_action("remove_reservations", claim, pods(pod_raw("p1", uid=uid, claim="c1", phase="Running")))
    assert plan.request is None and "p1" in plan.refused and "Running" in plan.refused


def test_remove_reservations_refuses_a_terminating_pod():
    uid = new_uid()
    pod = pod_raw("p1", uid=uid, claim="c1")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    plan = plan_action(
        "remove_reservations", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)]), pods(pod), uids=[uid]
    )
    assert plan.refused.startswith("Not safe now")


def test_remove_reservations_accepts_finished_and_replaced_pods_and_warns_about_deallocation():
    done, old = new_uid(), new_uid()
    claim = claim_raw("c1", devices=["gpu-0"], reserved=[("done", done), ("p2", old)])
    world = pods(pod_raw("done", uid=done, claim="c1", phase="Succeeded"), pod_raw("p2", uid=new_uid(), claim="c1"))
    plan = plan_action("remove_reservations", claim, world)
    assert [e["uid"] for e in plan.request.body["status"]["reservedFor"]] == [done, old]
    assert any("Run 'deallocate' next" in w for w in plan.warnings)


def test_remove_reservations_never_touches_non_pod_consumers():
    claim = claim_raw("c1", devices=["gpu-0"])
    claim["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "u1"}
    ]
    plan = plan_action("remove_reservations", claim, {})
    assert plan.request is None and "not a pod" in plan.refused


def test_remove_reservations_with_an_entry_that_went_away():
    plan = plan_action("remove_reservations", claim_raw("c1", devices=["gpu-0"]), {}, uids=["nope"])
    assert "no longer has an entry" in plan.refused


def test_deallocate_builds_a_merge_patch():
    claim = claim_raw("c1", rv="7", devices=["gpu-0"])
    plan = plan_action("deallocate", claim, pods(pod_raw("other", claim="c2")))
    assert plan.request.method == "PATCH" and plan.request.path == PATH + "/status"
    assert plan.request.content_type == MERGE
    assert plan.request.body == {
        "metadata": {"uid": claim["metadata"]["uid"], "resourceVersion": "7"},
        "status": {"allocation": None, "reservedFor": None},
    }


@pytest.mark.parametrize(
    "claim, world, reason",
    [
        (claim_raw("c1"), {}, "not allocated"),
        (claim_raw("c1", devices=["gpu-0"], reserved=[("p", "u")]), {}, "reservedFor is not empty"),
        (
            claim_raw("c1", devices=["gpu-0"]),
            pods(pod_raw("p", claim="c1", phase="Pending", node="")),
            "Live pods reference",
        ),
        (claim_raw("c1", devices=["gpu-0"]), pods(pod_raw("p", claim="c1", template=True)), "Live pods reference"),
    ],
)
def test_deallocate_refusals(claim, world, reason):
    plan = plan_action("deallocate", claim, world)
    assert plan.request is None and reason in plan.refused


def test_deallocate_ignores_finished_pods():
    plan = plan_action("deallocate", claim_raw("c1", devices=["gpu-0"]), pods(pod_raw("p", claim="c1", phase="Failed")))
    assert plan.request is not None


def test_finish_deletion_only_without_allocation():
    allocated = claim_raw("c1", devices=["gpu-0"], deleting="2026-01-01T00:00:00Z")
    assert "leak" in plan_action("finish_deletion", allocated, {}).refused
    assert "not being deleted" in plan_action("finish_deletion", claim_raw("c1", finalizers=[FINALIZER]), {}).refused
    claim = claim_raw("c1", rv="9", finalizers=[FINALIZER, "example.com/keep"], deleting="2026-01-01T00:00:00Z")
    plan = plan_action("finish_deletion", claim, {})
    assert plan.request.method == "PATCH" and plan.request.path == PATH
    assert plan.request.body == {
        "metadata": {"uid": claim["metadata"]["uid"], "resourceVersion": "9", "finalizers": ["example.com/keep"]}
    }
    only_other = claim_raw("c1", finalizers=["example.com/keep"], deleting="2026-01-01T00:00:00Z")
    assert "does not carry" in plan_action("finish_deletion", only_other, {}).refused


def test_delete_claim_only_for_generated_claims_of_gone_pods():
    owner_uid = new_uid()
    claim = claim_raw("c1", rv="3", owner=("owner", owner_uid))
    assert (
        "still exists"
        in plan_action("delete_claim", claim, pods(pod_raw("owner", uid=owner_uid, claim="c1", template=True))).refused
    )
    assert "not generated" in plan_action("delete_claim", claim_raw("c1"), {}).refused
    plan = plan_action("delete_claim", claim, {})
    assert plan.request.as_dict() == {
        "method": "DELETE",
        "path": PATH,
        "body": {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": claim["metadata"]["uid"], "resourceVersion": "3"},
        },
        "content_type": "application/json",
        "resource_version": "3",
    }
    # Another live pod still references it by name: refused.
    referencing = pods(pod_raw("other", claim="c1"))
    assert "other" in plan_action("delete_claim", claim, referencing).refused


def test_unknown_action_is_named():
    with pytest.raises(ValueError, match="force_everything"):
        plan_action("force_everything", claim_raw("c1"), {})
