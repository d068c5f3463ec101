"""Each stuck-claim rule: the situation makes a finding appear (after its grace period), the end of the
situation clears it, and the cleared row stays as history."""

from datetime import UTC, datetime, timedelta

import pytest

from claims import stuck
from claims.models import Finding, StuckObservation
from mirror.models import SyncState
from mirror.sync.apply import delete_object
from tests.ops_fixtures import DRIVER, apply, bump, claim_raw, cluster, new_uid, node_raw, pod_raw, slice_raw, ts  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GRACE = 60


@pytest.fixture(autouse=True)
def thresholds(settings):
    settings.GPUDASH_STUCK = dict.fromkeys(stuck.DEFAULTS, GRACE) | {"BINDING_TIMEOUT": 600}


@pytest.mark.parametrize(
    ("value", "why"),
    [("soon", "a number of seconds"), (-1, "0 or more"), ("nan", "0 or more"), ("inf", "0 or more")],
)
def test_a_bad_threshold_is_refused_by_name(settings, value, why):
    settings.GPUDASH_STUCK = {"PENDING_GRACE": value}
    with pytest.raises(ValueError, match=rf"GPUDASH_STUCK\['PENDING_GRACE'\] must be {why}"):
        stuck.thresholds()


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def active(cluster, rule):
    return list(Finding.objects.filter(cluster=cluster, rule=rule).active())


def world(cluster, node="node-1", devices=("gpu-0", "gpu-1")):
    apply(cluster, "Node", node_raw(node))
    apply(cluster, "ResourceSlice", slice_raw(node, devices))


def test_stale_reservation_pod_gone_appears_after_grace_and_clears(cluster):
    world(cluster)
    pod_uid = new_uid()
    claim = claim_raw("c1", devices=["gpu-0"], reserved=[("p1", pod_uid)])
    apply(cluster, "ResourceClaim", claim)
    # No pod p1 in the mirror: the start is unknown, so the grace counts from the first sighting.
    stuck.detect(cluster, now=at(0))
    assert active(cluster, stuck.STALE_RESERVATION) == []
    assert StuckObservation.objects.filter(rule=stuck.STALE_RESERVATION, subject=pod_uid).exists()
    stuck.detect(cluster, now=at(GRACE - 1))
    assert active(cluster, stuck.STALE_RESERVATION) == []
    stuck.detect(cluster, now=at(GRACE))
    [finding] = active(cluster, stuck.STALE_RESERVATION)
    assert (finding.claim_name, finding.subject, finding.remedy) == ("c1", pod_uid, "remove_reservations")
    assert "no longer exists" in finding.summary
    assert finding.first_seen == at(GRACE)

    # The controller (or an operator) removes the entry: the finding clears and stays as history.
    released = bump(claim_raw("c1", uid=claim["metadata"]["uid"], devices=["gpu-0"]), 11)
    apply(cluster, "ResourceClaim", released)
    stuck.detect(cluster, now=at(GRACE + 10))
    assert active(cluster, stuck.STALE_RESERVATION) == []
    finding.refresh_from_db()
    assert finding.cleared_at == at(GRACE + 10)
    assert not StuckObservation.objects.filter(rule=stuck.STALE_RESERVATION).exists()


def test_stale_reservation_of_finished_pod_uses_its_finish_time(cluster):
    world(cluster)
    pod_uid = new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", pod_uid)]))
    apply(cluster, "Pod", pod_raw("p1", uid=pod_uid, claim="c1", phase="Succeeded", finished=ts(at(-GRACE))))
    stuck.detect(cluster, now=at(0))
    [finding] = active(cluster, stuck.STALE_RESERVATION)
    assert "finished (phase Succeeded)" in finding.summary


def test_running_pod_and_terminating_pod_are_not_stale(cluster):
    world(cluster)
    uid1, uid2 = new_uid(), new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0", "gpu-1"], reserved=[("p1", uid1), ("p2", uid2)]))
    apply(cluster, "Pod", pod_raw("p1", uid=uid1, claim="c1"))
    terminating = pod_raw("p2", uid=uid2, claim="c1")
    terminating["metadata"]["deletionTimestamp"] = ts(at(-3600))
    apply(cluster, "Pod", terminating)
    stuck.detect(cluster, now=at(0))
    stuck.detect(cluster, now=at(10 * GRACE))
    assert active(cluster, stuck.STALE_RESERVATION) == []


def test_replaced_pod_with_same_name_is_stale(cluster):
    world(cluster)
    old_uid = new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", old_uid)]))
    # A StatefulSet-like replacement: same name, new uid, its own claim.
    apply(cluster, "Pod", pod_raw("p1", uid=new_uid(), claim="c2", created=ts(at(-2 * GRACE))))
    stuck.detect(cluster, now=at(0))
    [finding] = active(cluster, stuck.STALE_RESERVATION)
    assert "replaced" in finding.summary


def test_missing_pods_are_not_judged_while_the_pod_list_is_incomplete(cluster):
    world(cluster)
    SyncState.objects.create(cluster=cluster, kind="Pod", status=SyncState.Status.LISTING)
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", new_uid())]))
    stuck.detect(cluster, now=at(0))
    stuck.detect(cluster, now=at(10 * GRACE))
    assert active(cluster, stuck.STALE_RESERVATION) == []
    assert active(cluster, stuck.ORPHANED_ALLOCATION) == []


def test_deletion_blocked(cluster):
    world(cluster)
    claim = claim_raw("c1", devices=["gpu-0"], deleting=ts(at(-GRACE - 1)))
    apply(cluster, "ResourceClaim", claim)
    stuck.detect(cluster, now=at(0))
    [finding] = active(cluster, stuck.DELETION_BLOCKED)
    assert finding.remedy == "deallocate"
    assert finding.evidence["allocated"] is True
    # Deallocated but the finalizer is still there: same finding, remedy moves on.
    apply(
        cluster,
        "ResourceClaim",
        bump(
            claim_raw("c1", uid=claim["metadata"]["uid"], finalizers=[stuck_finalizer()], deleting=ts(at(-GRACE - 1))),
            11,
        ),
    )
    stuck.detect(cluster, now=at(5))
    [same] = active(cluster, stuck.DELETION_BLOCKED)
    assert same.id == finding.id and same.remedy == "finish_deletion"
    delete_object(cluster, "ResourceClaim", bump(claim, 12))
    stuck.detect(cluster, now=at(10))
    assert active(cluster, stuck.DELETION_BLOCKED) == []
    assert Finding.objects.filter(id=finding.id, cleared_at=at(10)).exists()


def stuck_finalizer():
    return "resource.kubernetes.io/delete-protection"


def test_deletion_within_grace_is_not_reported(cluster):
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], deleting=ts(at(-GRACE + 5))))
    stuck.detect(cluster, now=at(0))
    assert active(cluster, stuck.DELETION_BLOCKED) == []


def test_orphaned_allocation(cluster):
    world(cluster)
    claim = claim_raw("c1", devices=["gpu-0"])
    apply(cluster, "ResourceClaim", claim)
    stuck.detect(cluster, now=at(0))
    assert active(cluster, stuck.ORPHANED_ALLOCATION) == []
    stuck.detect(cluster, now=at(GRACE))
    [finding] = active(cluster, stuck.ORPHANED_ALLOCATION)
    assert finding.remedy == "deallocate" and "held for nobody" in finding.summary
    # A pod that references the claim shows up (about to use it): no longer orphaned.
    apply(cluster, "Pod", pod_raw("p1", claim="c1", phase="Pending", node=""))
    stuck.detect(cluster, now=at(GRACE + 1))
    assert active(cluster, stuck.ORPHANED_ALLOCATION) == []


def test_orphan_ignores_finished_referencing_pods(cluster):
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"]))
    apply(cluster, "Pod", pod_raw("p1", claim="c1", phase="Failed"))
    stuck.detect(cluster, now=at(0))
    stuck.detect(cluster, now=at(GRACE))
    assert len(active(cluster, stuck.ORPHANED_ALLOCATION)) == 1


def test_unallocatable_includes_engine_explanation_or_says_why_not(cluster):
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("c1"))
    pod = pod_raw(
        "p1",
        claim="c1",
        phase="Pending",
        node="",
        created=ts(at(-GRACE)),
        scheduled={"status": "False", "reason": "Unschedulable", "message": "0/1 nodes: cannot allocate all claims"},
    )
    apply(cluster, "Pod", pod)
    stuck.detect(cluster, now=at(0))
    [finding] = active(cluster, stuck.UNALLOCATABLE)
    assert finding.subject == pod["metadata"]["uid"]
    assert "cannot allocate all claims" in finding.summary
    explanation = finding.evidence["explanation"]
    assert "available" in explanation
    if not explanation["available"]:
        assert explanation["message"]
    # Allocation happens: cleared.
    apply(
        cluster,
        "ResourceClaim",
        bump(claim_raw("c1", uid=finding.claim_uid, devices=["gpu-0"], reserved=[("p1", pod["metadata"]["uid"])]), 11),
    )
    stuck.detect(cluster, now=at(1))
    assert active(cluster, stuck.UNALLOCATABLE) == []


def test_engine_explanations_are_budgeted_per_run(settings, cluster):
    settings.GPUDASH_STUCK = {**settings.GPUDASH_STUCK, "EXPLAIN_PER_RUN": 0}
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("c1"))
    apply(cluster, "Pod", pod_raw("p1", claim="c1", phase="Pending", node="", created=ts(at(-GRACE))))
    stuck.detect(cluster, now=at(0))
    [finding] = active(cluster, stuck.UNALLOCATABLE)
    assert finding.evidence["explanation"]["deferred"] is True
    settings.GPUDASH_STUCK = {**settings.GPUDASH_STUCK, "EXPLAIN_PER_RUN": 1}
    stuck.detect(cluster, now=at(1))
    finding.refresh_from_db()
    assert "deferred" not in finding.evidence["explanation"]


def test_node_gone_and_node_not_ready(cluster):
    apply(cluster, "ResourceSlice", slice_raw("node-2", ["gpu-0"]))
    apply(cluster, "Node", node_raw("node-2", ready=False, since=ts(at(-GRACE))))
    apply(
        cluster,
        "ResourceClaim",
        claim_raw("on-notready", devices=["gpu-0"], node="node-2", reserved=[("p", new_uid())]),
    )
    apply(cluster, "ResourceSlice", slice_raw("node-9", ["gpu-0"]))
    apply(cluster, "ResourceClaim", claim_raw("on-gone", devices=["gpu-0"], node="node-9"))
    stuck.detect(cluster, now=at(0))
    found = {f.claim_name: f for f in active(cluster, stuck.NODE_GONE)}
    assert set(found) == {"on-notready"}
    assert found["on-notready"].remedy == ""  # still reserved: never offer a blind release
    stuck.detect(cluster, now=at(GRACE))
    found = {f.claim_name: f for f in active(cluster, stuck.NODE_GONE)}
    assert set(found) == {"on-notready", "on-gone"}
    assert found["on-gone"].severity == Finding.Severity.CRITICAL
    apply(cluster, "Node", node_raw("node-2", ready=True, rv="2"))
    stuck.detect(cluster, now=at(GRACE + 1))
    assert {f.claim_name for f in active(cluster, stuck.NODE_GONE)} == {"on-gone"}


def test_binding_failure_and_binding_timeout(cluster):
    world(cluster)
    allocated_at = ts(at(-10))
    failed = claim_raw(
        "failed",
        devices=["gpu-0"],
        binding_conditions=(["dra.example.com/attached"], ["dra.example.com/failed"]),
        device_status=[
            {
                "driver": DRIVER,
                "pool": "node-1",
                "device": "gpu-0",
                "conditions": [{"type": "dra.example.com/failed", "status": "True"}],
            }
        ],
    )
    failed["status"]["allocation"]["allocationTimestamp"] = allocated_at
    waiting = claim_raw("waiting", devices=["gpu-1"], binding_conditions=(["dra.example.com/attached"], []))
    waiting["status"]["allocation"]["allocationTimestamp"] = allocated_at
    apply(cluster, "ResourceClaim", failed)
    apply(cluster, "ResourceClaim", waiting)
    stuck.detect(cluster, now=at(0))
    found = {f.claim_name: f for f in active(cluster, stuck.NOT_PREPARED)}
    assert set(found) == {"failed"} and found["failed"].severity == Finding.Severity.CRITICAL
    stuck.detect(cluster, now=at(600))
    # Conditions still pending past the timeout are health's binding_timeout finding (tests/health/test_health_findings.py).
    assert {f.claim_name for f in active(cluster, stuck.NOT_PREPARED)} == {"failed"}
    assert {f.claim_name for f in active(cluster, "binding_timeout")} == {"waiting"}


def test_scheduled_pod_pending_with_reserved_claim_is_not_prepared(cluster):
    world(cluster)
    uid = new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)]))
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1", phase="Pending", node="node-1"))
    stuck.detect(cluster, now=at(0))
    stuck.detect(cluster, now=at(GRACE))
    [finding] = active(cluster, stuck.NOT_PREPARED)
    assert finding.subject == f"pod:{uid}" and "kubelet" in finding.summary
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1", phase="Running", node="node-1", rv="6"))
    stuck.detect(cluster, now=at(GRACE + 1))
    assert active(cluster, stuck.NOT_PREPARED) == []


def test_device_vanished(cluster):
    apply(cluster, "Node", node_raw("node-1"))
    slc = slice_raw("node-1", ["gpu-0", "gpu-1"])
    apply(cluster, "ResourceSlice", slc)
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-1"], reserved=[]))
    stuck.detect(cluster, now=at(0))
    assert active(cluster, stuck.DEVICE_VANISHED) == []
    smaller = slice_raw("node-1", ["gpu-0"], rv="2")
    smaller["metadata"]["uid"] = slc["metadata"]["uid"]
    apply(cluster, "ResourceSlice", smaller)
    stuck.detect(cluster, now=at(1))
    stuck.detect(cluster, now=at(1 + GRACE))
    [finding] = active(cluster, stuck.DEVICE_VANISHED)
    assert finding.subject == f"{DRIVER}/node-1/gpu-1"
    apply(
        cluster,
        "ResourceSlice",
        slice_raw("node-1", ["gpu-0", "gpu-1"], rv="3") | {"metadata": {**slc["metadata"], "resourceVersion": "3"}},
    )
    stuck.detect(cluster, now=at(2 + GRACE))
    assert active(cluster, stuck.DEVICE_VANISHED) == []


def test_double_allocation_is_immediate_and_critical(cluster):
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("a", devices=["gpu-0"]))
    apply(cluster, "ResourceClaim", claim_raw("b", namespace="team-b", devices=["gpu-0"]))
    apply(cluster, "ResourceClaim", claim_raw("admin", devices=["gpu-0"], admin_access=True))
    stuck.detect(cluster, now=at(0))
    found = active(cluster, stuck.DOUBLE_ALLOCATION)
    assert sorted(f.claim_name for f in found) == ["a", "b"]
    assert all(f.severity == Finding.Severity.CRITICAL for f in found)


def test_shared_capacity_is_not_double_allocation(cluster):
    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0"], extra={"allowMultipleAllocations": True}))
    apply(cluster, "ResourceClaim", claim_raw("a", devices=["gpu-0"], share_id="s1"))
    apply(cluster, "ResourceClaim", claim_raw("b", devices=["gpu-0"], share_id="s2"))
    stuck.detect(cluster, now=at(0))
    assert active(cluster, stuck.DOUBLE_ALLOCATION) == []


def test_finding_that_comes_back_opens_a_new_row(cluster):
    world(cluster)
    apply(cluster, "ResourceClaim", claim_raw("a", devices=["gpu-0"]))
    b = claim_raw("b", devices=["gpu-0"])
    apply(cluster, "ResourceClaim", b)
    stuck.detect(cluster, now=at(0))
    delete_object(cluster, "ResourceClaim", bump(b, 11))
    stuck.detect(cluster, now=at(1))
    apply(cluster, "ResourceClaim", claim_raw("b", uid=b["metadata"]["uid"], devices=["gpu-0"], rv="20"))
    stuck.detect(cluster, now=at(2))
    rows = Finding.objects.filter(cluster=cluster, rule=stuck.DOUBLE_ALLOCATION, claim_name="a").order_by("first_seen")
    assert [(r.first_seen, r.cleared_at) for r in rows] == [(at(0), at(1)), (at(2), None)]


def test_bad_threshold_is_named(settings, cluster):
    settings.GPUDASH_STUCK = {"ORPHAN_GRACE": "soon"}
    with pytest.raises(ValueError, match="ORPHAN_GRACE"):
        stuck.detect(cluster)
