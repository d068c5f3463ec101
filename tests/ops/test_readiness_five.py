"""The primer's five readiness checks against the built-in API server: feature gates from /metrics (and
inferred where /metrics is refused), driver DaemonSets desired vs ready per node with the diagnosis of
pod labels that do not match the configured selector, the release path while a driver is down, and
every line linking to the objects it is about."""

import re

import pytest
from django.utils import timezone

from claims.models import ClaimStateChange
from devcluster import builders
from mirror import roles
from ops.readiness import FAIL, PASS, SKIP, WARN, check_recovery, run_checks
from tests.ops.test_readiness import by_id, texts
from tests.ops_fixtures import claim_raw, node_raw, pod_raw, slice_raw
from tests.ops_live import live_cluster, resync, server  # noqa: F401
from tests.ui_fixtures import make_user

pytestmark = pytest.mark.django_db(transaction=True)

RDMA = "rdma.example.com"
RDMA_LABELS = {"app.kubernetes.io/name": "rdma-dra-driver", "app.kubernetes.io/component": "kubelet-plugin"}


def rdma_driver(store, nodes, ready_nodes, pod_nodes=None):
    """A driver DaemonSet in the rdma-dra-driver namespace whose pods carry the chart's labels, not
    gpudash's resource.gpudash.io/driver: what the demo's RDMA driver looks like."""
    pods = []
    for node in pod_nodes if pod_nodes is not None else nodes:
        pod = pod_raw(
            f"rdma-dra-driver-kubelet-plugin-{node}", namespace="rdma-dra-driver", node=node, labels=RDMA_LABELS
        )
        pod["spec"]["serviceAccountName"] = "rdma-dra-driver-service-account"
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if node in ready_nodes else "False"}]
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "rdma-dra-driver-kubelet-plugin",
                "uid": "ds-1",
                "controller": True,
            }
        ]
        pods.append(store.create("pods", pod))
    node_objs = [store.get("nodes", None, n) for n in nodes]
    ds = builders.driver_daemonset(
        "rdma-dra-driver", "rdma-dra-driver", "ds-1", {builders.RDMA_NODE_LABEL: "true"}, pods, node_objs
    )
    store.create("daemonsets", ds)


def rdma_nodes(store, names, not_ready=()):
    for name in names:
        store.create("nodes", node_raw(name, ready=name not in not_ready, labels={builders.RDMA_NODE_LABEL: "true"}))
        store.create("resourceslices", slice_raw(name, ["nic-0"], driver=RDMA, name=f"{name}-rdma"))


def test_feature_gates_from_the_api_servers_metrics(server, live_cluster):
    server.feature_gates["DRADeviceTaintRules"] = ("BETA", True)
    server.feature_gates["DRAConsumableCapacity"] = ("BETA", False)
    versions = by_id(run_checks(live_cluster))["versions"]
    assert versions["data"]["feature_gates_source"] == "metrics"
    gates = versions["data"]["feature_gates"]
    assert gates["DRADeviceTaintRules"] is True and gates["DRAConsumableCapacity"] is False
    assert gates["DynamicResourceAllocation"] is True
    enabled = next(t for t in texts(versions, PASS) if t.startswith("DRA feature gates enabled"))
    assert "DRADeviceTaintRules" in enabled and "DRAConsumableCapacity" not in enabled
    assert any(t.startswith("Disabled:") and "DRAConsumableCapacity" in t for t in texts(versions))
    assert any(t == "Kubernetes v1.36.0-devcluster" for t in texts(versions, PASS))

    server.feature_gates["DynamicResourceAllocation"] = ("", False)
    versions = by_id(run_checks(live_cluster))["versions"]
    assert any("DynamicResourceAllocation is off" in t for t in texts(versions, FAIL))


def test_feature_gates_inferred_when_metrics_are_refused(server, live_cluster):
    server.metrics_allowed = False
    shared = slice_raw("node-1", ["gpu-0"])
    shared["spec"]["sharedCounters"] = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}]
    server.store.create("nodes", node_raw("node-1"))
    server.store.create("resourceslices", shared)
    resync(live_cluster, ("Node", "ResourceSlice"))
    versions = by_id(run_checks(live_cluster))["versions"]
    assert versions["data"]["feature_gates_source"] == "inferred"
    known = next(t for t in texts(versions, PASS) if t.startswith("DRA feature gates known to be on"))
    # resource.k8s.io/v1 served: the core gate; shared counters in a slice: partitionable devices.
    assert "DynamicResourceAllocation" in known and "DRAPartitionableDevices" in known
    assert "DRAConsumableCapacity" not in known
    assert any("/metrics was not readable" in t and "403" in t for t in texts(versions, SKIP))


def test_driver_daemonset_with_other_labels_is_found_and_explained(server, live_cluster):
    store = server.store
    rdma_nodes(store, ["h100-01", "h100-02", "h100-03", "h100-04"], not_ready=("h100-04",))
    rdma_driver(
        store,
        ["h100-01", "h100-02", "h100-03", "h100-04"],
        ready_nodes={"h100-01", "h100-02", "h100-03"},
        pod_nodes=["h100-01", "h100-02", "h100-04"],
    )
    resync(live_cluster, ("Node", "ResourceSlice", "Pod"))
    drivers = by_id(run_checks(live_cluster))["drivers"]
    data = drivers["data"][RDMA]
    assert data["guessed"] and data["nodes_with_driver_pods"] == ["h100-01", "h100-02", "h100-04"]
    mismatch = next(i for i in drivers["items"] if i.get("data", {}).get("finding") == "driver_pod_label_mismatch")
    assert mismatch["status"] == WARN
    assert "resource.gpudash.io/driver=rdma.example.com" in mismatch["text"]
    assert "rdma-dra-driver/rdma-dra-driver-kubelet-plugin" in mismatch["text"]
    assert '"app.kubernetes.io/component=kubelet-plugin,app.kubernetes.io/name=rdma-dra-driver"' in mismatch["text"]
    # Desired vs ready from the DaemonSet; the node without a pod and the NotReady node named apart.
    assert any("2 of 4 desired pods ready" in t for t in texts(drivers, WARN))
    assert any("no driver pod on h100-03" in t for t in texts(drivers, FAIL))
    assert any("on h100-04 is not Ready: the node itself is NotReady" in t for t in texts(drivers, WARN))
    # The pods that do run are not reported missing (the demo's contradiction).
    assert not any("h100-02" in t for t in texts(drivers) if "no driver pod" in t or "where no driver pod" in t)

    # With the selector the diagnosis proposes, the pods are found by configuration: no guess, no warning.
    from django.conf import settings

    ops = settings.GPUDASH_OPS
    try:
        settings.GPUDASH_OPS = {
            **ops,
            "DRIVER_POD_SELECTORS": {**ops["DRIVER_POD_SELECTORS"], RDMA: "app.kubernetes.io/name=rdma-dra-driver"},
        }
        drivers = by_id(run_checks(live_cluster))["drivers"]
    finally:
        settings.GPUDASH_OPS = ops
    assert drivers["data"][RDMA]["guessed"] is False
    assert not any(i.get("data", {}).get("finding") == "driver_pod_label_mismatch" for i in drivers["items"])
    assert any("2 of 4 desired pods ready" in t for t in texts(drivers, WARN))


def test_release_path_names_claims_a_down_driver_holds(server, live_cluster):
    store = server.store
    rdma_nodes(store, ["h100-01", "h100-02"])
    rdma_driver(store, ["h100-01", "h100-02"], ready_nodes={"h100-01"})
    claim = claim_raw("nic-claim", devices=["nic-0"], node="h100-02")
    claim["status"]["allocation"]["devices"]["results"][0]["driver"] = RDMA
    store.create("resourceclaims", claim)
    resync(live_cluster, ("Node", "ResourceSlice", "Pod", "ResourceClaim"))
    report = run_checks(live_cluster)
    recovery = by_id(report)["recovery"]
    down = next(i for i in recovery["items"] if i.get("data", {}).get("driver") == RDMA)
    assert down["status"] == WARN and "h100-02 (1)" in down["text"] and "h100-01" not in down["text"]
    assert [link["url"] for link in down["links"]] == ["/claims/?node=h100-02"]


def test_release_durations_keep_their_precision(live_cluster):
    now = timezone.now()
    for uid, seconds in (("a", 0.0003), ("b", 0.0009), ("c", 0.0021)):
        start = now - timezone.timedelta(minutes=10)
        for at, old, new in (
            (start, "reserved", "allocated"),
            (start + timezone.timedelta(seconds=seconds), "allocated", "pending"),
        ):
            ClaimStateChange.objects.create(
                cluster=live_cluster, namespace="n", name=uid, uid=uid, at=at, old_state=old, new_state=new
            )
    text = next(t for t in texts(check_recovery(live_cluster, now=now)) if "release(s) in the last day" in t)
    assert "median 0.9 ms" in text and "slowest 2.1 ms" in text and "0.0 s" not in text


def test_every_line_about_objects_links_them(server, live_cluster, client):
    store = server.store
    rdma_nodes(store, ["h100-01", "h100-02"])
    rdma_driver(store, ["h100-01", "h100-02"], ready_nodes={"h100-01", "h100-02"}, pod_nodes=["h100-01"])
    resync(live_cluster, ("Node", "ResourceSlice", "Pod"))
    client.force_login(make_user("rita", role=roles.VIEWER))
    page = client.get("/readiness/").content.decode()
    drivers = page[page.index('id="check-drivers"') :].split("</section>", 1)[0]
    missing = next(li for li in drivers.split("<li") if "no driver pod on h100-02" in li)
    assert 'href="/nodes/dev/h100-02/"' in missing
    mismatch = next(li for li in drivers.split("<li") if "configured pod selectors" in li)
    assert re.search(r'href="/pods/dev/rdma-dra-driver/rdma-dra-driver-kubelet-plugin-h100-01/"', mismatch)
    assert 'href="/slices/?driver=rdma.example.com"' in drivers
    versions = page[page.index('id="check-versions"') :].split("</section>", 1)[0]
    assert 'href="/slices/"' in versions and 'href="/claims/"' in versions


def test_least_privilege_asks_whether_each_driver_may_publish_slices(server, live_cluster):
    store = server.store
    rdma_nodes(store, ["h100-01"])
    rdma_driver(store, ["h100-01"], ready_nodes={"h100-01"})
    resync(live_cluster, ("Node", "ResourceSlice", "Pod"))
    account = "system:serviceaccount:rdma-dra-driver:rdma-dra-driver-service-account"
    server.subjects.enable()  # reviews naming a subject answer from that subject's rules: none yet
    rbac = by_id(run_checks(live_cluster))["rbac"]
    denied = next(i for i in rbac["items"] if i.get("data", {}).get("subject") == account)
    assert denied["status"] == FAIL and "may not create ResourceSlices" in denied["text"]
    assert denied["links"][0]["url"] == "/pods/?namespace=rdma-dra-driver"
    server.subjects.set_user_rules(
        account, [{"verbs": ["create"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"]}]
    )
    rbac = by_id(run_checks(live_cluster))["rbac"]
    allowed = next(i for i in rbac["items"] if i.get("data", {}).get("subject") == account)
    assert allowed["status"] == PASS and "may publish ResourceSlices" in allowed["text"]
