"""Readiness lines of issue 35 against the built-in API server: whether the cluster serves device status
and health (feature gates from the API server's /metrics, else from mirrored objects, else the version's
default, said as such; v1.37's graduations), and whether each driver's service account may write claim
status and no more (SubjectAccessReviews per account, answered from that account's own rules)."""

import pytest

from ops import readiness_dra
from ops.readiness import FAIL, PASS, SKIP, WARN, run_checks
from tests.ops_fixtures import DRIVER, claim_raw, cluster, pod_raw  # noqa: F401
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

from .test_readiness import READ_RULES, by_id, texts
from .test_readiness_five import RDMA, rdma_driver, rdma_nodes

pytestmark = pytest.mark.django_db(transaction=True)

SA = "system:serviceaccount:rdma-dra-driver:rdma-dra-driver-service-account"
PUBLISH = {"verbs": ["create", "update", "delete"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"]}
STATUS = {"verbs": ["update", "patch"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"]}
OWN_DRIVER = {
    "verbs": ["associated-node:update", "associated-node:patch"],
    "apiGroups": ["resource.k8s.io"],
    "resources": ["resourceclaims/driver"],
    "resourceNames": [RDMA],
}
READ_CLAIMS = {"verbs": ["get", "list", "watch"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"]}


def field_lines(check):
    return {i["data"]["gate"]: i for i in check["items"] if "gate" in i.get("data", {}) and "how" in i["data"]}


def test_gates_from_metrics(server, live_cluster):
    checks = by_id(run_checks(live_cluster))
    lines = field_lines(checks["versions"])
    status = {g: (i["status"], i["data"]["how"]) for g, i in lines.items()}
    assert status["DRAResourceClaimDeviceStatus"] == (PASS, "metrics")
    assert status["ResourceHealthStatus"] == (PASS, "metrics")
    # Off by default in v1.36 (beta on an off-by-default API): said, not warned about.
    assert status["DRADeviceTaintRules"] == (PASS, "metrics")
    assert lines["DRADeviceTaintRules"]["text"] == (
        "DeviceTaintRules: not served (DRADeviceTaintRules is off, from the API server's /metrics)."
    )
    assert checks["versions"]["data"]["status_fields"]["DRADeviceTaintRules"] is False

    # A gate that is on by default turned off: the device status views stay empty, so a warning.
    server.feature_gates["DRAResourceClaimDeviceStatus"] = ("BETA", False)
    server.feature_gates["ResourceHealthStatus"] = ("BETA", False)
    versions = by_id(run_checks(live_cluster))["versions"]
    warned = texts(versions, WARN)
    assert (
        "ResourceClaim status.devices (drivers' device conditions, data and network data): not served "
        "(DRAResourceClaimDeviceStatus is off, from the API server's /metrics)." in warned
    )
    assert any(t.startswith("device health in pod status") and "ResourceHealthStatus is off" in t for t in warned)
    assert not any("kubelet also has ResourceHealthStatus" in t for t in texts(versions))


@pytest.mark.sqlite_default  # also on the embedded SQLite default
def test_gates_inferred_from_objects_and_version_defaults(server, live_cluster):
    server.metrics_allowed = False
    seed(server.store)
    resync(live_cluster)
    lines = field_lines(by_id(run_checks(live_cluster))["versions"])
    assert lines["DRAResourceClaimDeviceStatus"]["status"] == SKIP
    assert lines["DRAResourceClaimDeviceStatus"]["text"] == (
        "ResourceClaim status.devices (drivers' device conditions, data and network data): on by default in "
        "v1.36.0-devcluster (DRAResourceClaimDeviceStatus, BETA), not confirmed: the API server's /metrics was "
        "not readable and no object shows it yet."
    )
    assert lines["DRADeviceTaintRules"]["status"] == PASS and "off by default" in lines["DRADeviceTaintRules"]["text"]

    # Objects carrying the gated fields prove the gates on (the API server drops them while off).
    ready = [{"type": "Ready", "status": "True", "reason": "Prepared", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    claim = claim_raw(
        "train",
        devices=["gpu-0"],
        reserved=[("train-pod", "uid-train-pod")],
        device_status=[{"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "conditions": ready}],
    )
    pod = pod_raw("train-pod", uid="uid-train-pod", claim="train")
    pod["status"]["containerStatuses"] = [
        {
            "name": "main",
            "ready": True,
            "restartCount": 0,
            "image": "busybox",
            "imageID": "",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "allocatedResourcesStatus": [
                {
                    "name": "claim:gpu/gpu",
                    "resources": [{"resourceID": "node-1/gpu-0", "health": "Healthy", "message": "XID 0"}],
                }
            ],
        }
    ]
    server.store.create("resourceclaims", claim)
    server.store.create("pods", pod)
    server.enable_devicetaintrules(("v1beta2",))
    resync(live_cluster)
    versions = by_id(run_checks(live_cluster))["versions"]
    lines = field_lines(versions)
    assert {
        g: (i["status"], i["data"]["how"])
        for g, i in lines.items()
        if g != "DRAResourceClaimGranularStatusAuthorization"
    } == {
        "DRAResourceClaimDeviceStatus": (PASS, "objects"),
        "ResourceHealthStatus": (PASS, "objects"),
        "ResourceHealthStatusMessage": (PASS, "objects"),
        "DRADeviceTaints": (SKIP, "default"),
        "DRADeviceTaintRules": (PASS, "objects"),
    }
    assert lines["DRAResourceClaimDeviceStatus"]["text"].endswith(
        "served (DRAResourceClaimDeviceStatus on: 1 claim(s) carry status.devices)."
    )
    assert "1 pod(s) carry allocatedResourcesStatus" in lines["ResourceHealthStatus"]["text"]
    assert versions["data"]["status_fields"]["DRADeviceTaints"] is None  # unknown, not guessed


def test_version_defaults_and_v1_37_graduations(live_cluster):
    assert readiness_dra.minor_version("v1.36.2-gke.100") == 36 and readiness_dra.minor_version("") is None
    v137 = readiness_dra.gate_states(live_cluster, {}, "inferred", "v1.37.0", set())
    assert {g: (s["enabled"], s["how"]) for g, s in v137.items() if s["how"] == "ga"} == {
        "DRAResourceClaimDeviceStatus": (True, "ga"),
        "ResourceHealthStatus": (True, "ga"),
        "DRADeviceTaints": (True, "ga"),
        "DRADeviceTaintRules": (True, "ga"),
    }
    v134 = readiness_dra.gate_states(live_cluster, {}, "inferred", "v1.34.3", set())
    assert v134["ResourceHealthStatus"] == {"enabled": None, "how": "default", "stage": "ALPHA", "default": False}
    assert v134["DRAResourceClaimGranularStatusAuthorization"]["enabled"] is False  # no such gate yet
    # The API server's metric wins over the version.
    v137_off = readiness_dra.gate_states(
        live_cluster, {"DRADeviceTaintRules": (False, "")}, "metrics", "v1.37.0", set()
    )
    assert v137_off["DRADeviceTaintRules"]["enabled"] is False


def rbac_for(server, live_cluster, *rules, gate_on=True):
    rdma_nodes(server.store, ["rdma-1"])
    rdma_driver(server.store, ["rdma-1"], ready_nodes={"rdma-1"})
    server.set_rules(READ_RULES)
    server.subjects.set_user_rules(SA, list(rules))
    server.feature_gates["DRAResourceClaimGranularStatusAuthorization"] = ("BETA", gate_on)
    resync(live_cluster)
    rbac = by_id(run_checks(live_cluster))["rbac"]
    return [i for i in rbac["items"] if i.get("data", {}).get("subject") == SA and "rights" in i["data"]]


def lines_of(items, status=None):
    return [i["text"] for i in items if status is None or i["status"] == status]


def test_least_privileged_driver_passes(server, live_cluster):
    items = rbac_for(server, live_cluster, PUBLISH, READ_CLAIMS, STATUS, OWN_DRIVER)
    assert [i["status"] for i in items] == [PASS]
    assert lines_of(items) == [
        f"{RDMA}: its service account {SA} may update claim status (status.devices) for its own driver."
    ]
    rights = items[0]["data"]["rights"]
    assert rights["associated-node:update"] and not rights["arbitrary-node:update"]
    assert not rights["update resourceclaims"] and not rights["wildcard verbs"]


def test_driver_without_status_rights_or_without_the_driver_subresource(server, live_cluster):
    items = rbac_for(server, live_cluster, PUBLISH, READ_CLAIMS)
    assert lines_of(items, WARN) == [
        f"{RDMA}: its service account {SA} may not update resourceclaims/status: the driver cannot report device "
        "status (conditions, network data). Grant update and patch on resourceclaims/status if it reports them."
    ]

    server.subjects.set_user_rules(SA, [PUBLISH, READ_CLAIMS, STATUS])
    rbac = by_id(run_checks(live_cluster))["rbac"]
    warned = [t for t in texts(rbac, WARN) if SA in t]
    assert warned == [
        f"{RDMA}: its service account {SA} may update resourceclaims/status but holds no "
        f'associated-node:update/patch on resourceclaims/driver named "{RDMA}": with '
        "DRAResourceClaimGranularStatusAuthorization (on by default from v1.36) the API server rejects its "
        "status.devices writes."
    ]


def test_status_alone_is_enough_where_the_granular_gate_is_off(server, live_cluster):
    items = rbac_for(server, live_cluster, PUBLISH, READ_CLAIMS, STATUS, gate_on=False)
    assert [i["status"] for i in items] == [PASS]


def test_arbitrary_node_is_wider_than_a_kubelet_plugin_needs(server, live_cluster):
    arbitrary = {**OWN_DRIVER, "verbs": ["arbitrary-node:update", "arbitrary-node:patch"]}
    items = rbac_for(server, live_cluster, PUBLISH, STATUS, arbitrary)
    assert [i["status"] for i in items] == [PASS, WARN]
    assert "(arbitrary-node:); a kubelet plugin needs only associated-node:" in lines_of(items, WARN)[0]


def test_cluster_wide_claim_writes_and_wildcards_are_flagged(server, live_cluster):
    writes = {"verbs": ["update", "patch", "delete"], "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"]}
    items = rbac_for(server, live_cluster, PUBLISH, STATUS, OWN_DRIVER, writes)
    assert lines_of(items, WARN) == [
        f"{RDMA}: {SA} may update resourceclaims, patch resourceclaims, delete resourceclaims in every "
        "namespace: more than a driver needs (it writes status only). Drop those verbs from its ClusterRole."
    ]

    # verbs "*" on claims: every write, the allocation included.
    server.subjects.set_user_rules(
        SA,
        [
            PUBLISH,
            {
                "verbs": ["*"],
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims", "resourceclaims/status"],
            },
        ],
    )
    rbac = by_id(run_checks(live_cluster))["rbac"]
    assert rbac["status"] == FAIL
    failed = [t for t in texts(rbac, FAIL) if SA in t]
    assert len(failed) == 1 and 'holds a wildcard ("*" verbs on resourceclaims' in failed[0]

    # resources "*" in resource.k8s.io (a common shortcut in driver charts).
    server.subjects.set_user_rules(
        SA, [{"verbs": ["get", "update", "patch", "create"], "apiGroups": ["resource.k8s.io"], "resources": ["*"]}]
    )
    rbac = by_id(run_checks(live_cluster))["rbac"]
    items = [i for i in rbac["items"] if i.get("data", {}).get("subject") == SA and "rights" in i["data"]]
    assert items[0]["data"]["rights"]["wildcard resources"] and not items[0]["data"]["rights"]["wildcard verbs"]
    # No associated-node: verb either (the "*" is on resources, not verbs): its status writes fail too.
    assert [i["status"] for i in items] == [WARN, FAIL]


def test_the_gate_proof_and_the_per_driver_line_read_the_same_rows(cluster):
    """One source: the mirrored rows (ClaimDeviceStatus, PodResourceHealth), not the raw objects. A
    container's own waiting message is no health report's message, and a claim whose driver withdrew its
    status entries proves nothing any more, on either line."""
    from ops.readiness import item
    from tests.health.health_fixtures import health_pod
    from tests.ops_fixtures import apply, new_uid, node_raw, slice_raw

    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0"]))
    uid = new_uid()
    ready = [{"type": "Ready", "status": "True"}]
    status = [{"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "conditions": ready}]
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)], device_status=status))
    pod = health_pod("p1", "c1", uid, [(f"{DRIVER}/node-1/gpu-0", "Healthy", None)])
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "Pulling", "message": "pulling image"}}
    apply(cluster, "Pod", pod)

    assert readiness_dra.evidence(cluster, set()) == {
        "DRAResourceClaimDeviceStatus": "1 claim(s) carry status.devices",
        "ResourceHealthStatus": "1 pod(s) carry allocatedResourcesStatus",
    }
    line = readiness_dra.device_status_item(cluster, item)
    assert line["data"]["drivers"] == {DRIVER: {"device_status": True, "health": True}}

    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)], rv="11"))
    assert "DRAResourceClaimDeviceStatus" not in readiness_dra.evidence(cluster, set())
    line = readiness_dra.device_status_item(cluster, item)
    assert line["data"]["drivers"] == {DRIVER: {"device_status": False, "health": True}}
    assert line["text"] == f"Drivers that report device status and health: {DRIVER}: device status no, health yes."
