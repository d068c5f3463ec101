"""'Why is my Pod Pending?' against the built-in API server (live reads, events, driver pods) and the mirror."""

import pytest

from ops.pending import FAIL, PASS, WARN, PodNotFound, explain_pod
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.ops_fixtures import claim_raw, new_uid, pod_raw, slice_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

pytestmark = PREVIEW_WORKER_MARKS

DRIVER_LABELS = {"resource.gpudash.io/driver": "gpu.example.com"}


def statuses(steps):
    return {s["key"]: s["status"] for s in steps}


def driver_pod(node, phase="Running", ready=True):
    pod = pod_raw(f"driver-{node}", namespace="dra-system", node=node, phase=phase, labels=DRIVER_LABELS)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return pod


def test_unallocated_claim_is_explained_with_events(server, live_cluster):
    pod = pod_raw(
        "train",
        claim="big",
        phase="Pending",
        node="",
        scheduled={
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 cannot allocate all claims.",
        },
    )
    seed(server.store, claim=claim_raw("big"), pods=[pod])
    # Both of node-1's GPUs are taken by another claim, so the engine has a concrete reason.
    server.store.create(
        "deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
        },
    )
    server.store.create("resourceclaims", claim_raw("holder", namespace="team-b", devices=["gpu-0", "gpu-1"]))
    created = server.store.get("pods", "team-a", "train")
    server.store.create(
        "events",
        {
            "metadata": {"name": "train.1", "namespace": "team-a"},
            "involvedObject": {"kind": "Pod", "name": "train", "uid": created["metadata"]["uid"]},
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "cannot allocate all claims",
            "lastTimestamp": "2026-03-01T12:00:00Z",
            "count": 3,
        },
    )
    resync(live_cluster, kinds=("Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "Pod"))
    report = explain_pod(live_cluster, "team-a", "train")
    assert report["source"] == "live"
    # The scheduler's message is quoted once, verbatim, in the answer; the check names its reason.
    assert report["steps"][0]["status"] == FAIL
    assert report["steps"][0]["detail"] == "Unschedulable (the scheduler's message is quoted above)."
    assert report["scheduler_message"] == "0/1 nodes are available: 1 cannot allocate all claims."
    assert [e["reason"] for e in report["events"]] == ["FailedScheduling"]
    [claim] = report["claims"]
    assert statuses(claim["steps"])["exists"] == PASS
    assert statuses(claim["steps"])["allocated"] == FAIL
    engine = next(s for s in claim["steps"] if s["key"] == "engine")
    assert engine["status"] == FAIL
    headline = (
        "Request gpu needs 1 × gpu.example.com on one node: 1 node has 1 or more; "
        "1 has all its matching devices allocated (to team-b/holder)."
    )
    assert engine["detail"].startswith("Fits on none of 1 nodes.") and headline not in engine["detail"]
    assert "`" not in engine["detail"] and "Scheduler:" not in engine["detail"]
    # The answer leads: the headline, then the remedies the engine verified (one more node like node-1;
    # the holder is in use, so nothing is released).
    assert report["verdict"] == {"status": FAIL, "title": "Why it is Pending", "detail": headline}
    assert [r["kind"] for r in report["remedies"]] == ["add-node"]
    assert report["remedies"][0]["change"] == "One more node like node-1 would fit it."
    assert report["remedies"][0]["where"] == "It would fit on node-1-copy (devices gpu-0)."

    # A viewer scoped to other namespaces is not told which claim holds the devices.
    scoped = explain_pod(live_cluster, "team-a", "train", visible_namespaces={"team-a"})
    [claim] = scoped["claims"]
    detail = next(s for s in claim["steps"] if s["key"] == "engine")["detail"]
    assert "team-b/holder" not in detail
    assert "team-b/holder" not in scoped["verdict"]["detail"]
    assert "(to a claim in another namespace)" in scoped["verdict"]["detail"]


def test_bound_pod_not_reserved_and_driver_missing(server, live_cluster):
    pod_uid = new_uid()
    pod = pod_raw("infer", uid=pod_uid, claim="c1", phase="Pending", node="node-1")
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("someone-else", new_uid())]), pods=[pod])
    resync(live_cluster)
    report = explain_pod(live_cluster, "team-a", "infer")
    steps = statuses(report["claims"][0]["steps"])
    assert steps["allocated"] == PASS and steps["reserved"] == FAIL and steps["prepared"] == WARN
    [drivers] = report["drivers"]
    assert drivers["node"] == "node-1"
    d = statuses(drivers["steps"])
    assert d["node"] == PASS and d["slices:gpu.example.com"] == PASS and d["pool:gpu.example.com/node-1"] == PASS
    assert d["driverpod:gpu.example.com"] == FAIL


def test_running_driver_pod_and_incomplete_pool(server, live_cluster):
    pod_uid = new_uid()
    pod = pod_raw("infer", uid=pod_uid, claim="c1", phase="Running", node="node-1")
    seed(
        server.store,
        claim=claim_raw("c1", devices=["gpu-0"], reserved=[("infer", pod_uid)]),
        pods=[pod, driver_pod("node-1")],
    )
    # The pool claims two slices but only one is published.
    server.store.apply("resourceslices", slice_raw("node-1", ["gpu-0", "gpu-1"], count=2))
    resync(live_cluster)
    report = explain_pod(live_cluster, "team-a", "infer")
    steps = statuses(report["claims"][0]["steps"])
    assert steps == {"exists": PASS, "allocated": PASS, "reserved": PASS, "prepared": PASS}
    d = statuses(report["drivers"][0]["steps"])
    assert d["driverpod:gpu.example.com"] == PASS
    assert d["pool:gpu.example.com/node-1"] == FAIL
    # A running pod says so plainly; the failing check is named, not made the headline.
    assert report["verdict"] == {
        "status": "running",
        "title": "Running",
        "detail": "The pod is running on node-1. A check still fails (see the evidence): "
        "gpu.example.com: pool node-1 complete.",
    }


def test_template_claim_not_created_yet(server, live_cluster):
    pod = pod_raw("gen", phase="Pending", node="")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "missing-template"}]
    seed(server.store, pods=[pod])
    report = explain_pod(live_cluster, "team-a", "gen")
    [claim] = report["claims"]
    assert claim["steps"][0]["status"] == FAIL and "missing-template" in claim["steps"][0]["detail"]


def test_mirror_fallback_when_api_server_is_down(server, live_cluster):
    seed(server.store, claim=claim_raw("c1"), pods=[pod_raw("p", claim="c1", phase="Pending", node="")])
    resync(live_cluster)
    server.stop()
    report = explain_pod(live_cluster, "team-a", "p")
    assert report["source"] == "mirror" and report["events"] is None and "mirror" in report["note"]
    assert statuses(report["claims"][0]["steps"])["allocated"] == FAIL


def test_unknown_pod(server, live_cluster):
    with pytest.raises(PodNotFound, match="team-a/nope"):
        explain_pod(live_cluster, "team-a", "nope")


def test_binding_failure_is_reported(server, live_cluster):
    pod_uid = new_uid()
    claim = claim_raw(
        "c1",
        devices=["gpu-0"],
        reserved=[("p", pod_uid)],
        binding_conditions=(["example.com/attached"], ["example.com/failed"]),
        device_status=[
            {
                "driver": "gpu.example.com",
                "pool": "node-1",
                "device": "gpu-0",
                "conditions": [{"type": "example.com/failed", "status": "True", "message": "fabric down"}],
            }
        ],
    )
    seed(server.store, claim=claim, pods=[pod_raw("p", uid=pod_uid, claim="c1", phase="Pending", node="node-1")])
    report = explain_pod(live_cluster, "team-a", "p")
    prepared = next(s for s in report["claims"][0]["steps"] if s["key"] == "prepared")
    assert prepared["status"] == FAIL and "fabric down" in prepared["detail"]
