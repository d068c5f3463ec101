"""The Pending explainer on the demo scenario names the first failing node filter, from the pod's own
spec, synced through the real watchers from the built-in API server."""

from devcluster.scenario import load_scenario
from ops.pending import FAIL, explain_pod
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.ops_live import live_cluster, resync, server  # noqa: F401

pytestmark = PREVIEW_WORKER_MARKS


def test_pending_pod_on_the_demo_names_the_first_failing_filter(server, live_cluster):  # noqa: F811
    load_scenario(server.store, "demo")
    resync(
        live_cluster,
        kinds=("Node", "Namespace", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "Pod"),
    )
    report = explain_pod(live_cluster, "ml-training", "llama-pretrain-1")
    [claim] = report["claims"]
    engine = next(s for s in claim["steps"] if s["key"] == "engine")
    assert engine["status"] == FAIL
    detail = engine["detail"]
    # gpu-h100-04 is NotReady (unreachable taints), gpu-l4-03 cordoned: rejected before DRA, by name.
    assert (
        "First failing filter: NodeUnschedulable on 1 node(s) (gpu-l4-03: node(s) were unschedulable); "
        "TaintToleration on 1 node(s) (gpu-h100-04: node(s) had untolerated taint(s))." in detail
    )
    message = engine["data"]["summary"]["schedulerMessage"]
    assert message.startswith("0/10 nodes are available: ") and "1 node(s) had untolerated taint(s)" in message
    assert "1 node(s) were unschedulable" in message and "8 cannot allocate all claims" in message
    filters = {n["node"]: n["filters"] for n in engine["data"]["nodes"]}
    assert [f["plugin"] for f in filters["gpu-h100-04"]] == ["NodeUnschedulable", "TaintToleration"]
    assert filters["gpu-h100-04"][-1]["passed"] is False
