"""The health findings (health/findings.py), run by the stuck-claim detector: each appears for its
situation with its evidence and next step, and clears when the situation ends."""

from datetime import UTC, datetime, timedelta

import pytest

from claims import stuck
from claims.models import Finding
from health import findings
from tests.ops_fixtures import DRIVER, apply, claim_raw, cluster, new_uid, node_raw, pod_raw, slice_raw, ts  # noqa: F401

from .health_fixtures import health_pod, taint, taint_rule

pytestmark = pytest.mark.sqlite_default  # also on the embedded SQLite default
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(autouse=True)
def thresholds(settings):
    settings.GPUDASH_STUCK = dict.fromkeys(stuck.DEFAULTS, 60) | {"BINDING_TIMEOUT": 600}
    settings.GPUDASH_HEALTH = {"NOT_READY_GRACE": 300}


def active(cluster, rule):
    return list(Finding.objects.filter(cluster=cluster, rule=rule).active())


def world(cluster, extra=None):
    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0", "gpu-1"], extra=extra))


def holder(cluster, claim="c1", pod="p1", devices=("gpu-0",), tolerations=None, **kwargs):
    uid = new_uid()
    raw = claim_raw(claim, devices=list(devices), reserved=[(pod, uid)], **kwargs)
    if tolerations is not None:
        raw["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = tolerations
    apply(cluster, "ResourceClaim", raw)
    return uid, raw


def test_rules_are_registered_with_titles_and_report_only():
    from claims.models import REPORT_ONLY_RULES

    assert {findings.UNHEALTHY_DEVICE, findings.TAINT_EVICTION} <= set(REPORT_ONLY_RULES)
    assert findings.DEVICE_NOT_READY not in REPORT_ONLY_RULES
    assert str(stuck.RULE_TITLES[findings.BINDING_TIMEOUT]) == "Binding conditions past timeout"
    assert all(rule in stuck.RULES for rule in findings.RULES)


def test_unhealthy_device_names_running_pods_and_clears(cluster):
    world(cluster)
    uid, _ = holder(cluster)
    pod = health_pod("p1", "c1", uid, [("gpu.example.com/node-1/gpu-0", "Unhealthy", "XID 79")])
    apply(cluster, "Pod", pod)
    stuck.detect(cluster, now=at(0))
    [f] = active(cluster, findings.UNHEALTHY_DEVICE)
    assert f.severity == Finding.Severity.CRITICAL and f.subject == f"{DRIVER}/node-1/gpu-0" and f.remedy == ""
    assert f.summary == (
        f"Device {DRIVER}/node-1/gpu-0 is unhealthy (pod team-a/p1 (container main) reports it Unhealthy: XID 79) "
        "while pods team-a/p1 still run on it: move the work to healthy devices (delete the pods so that their "
        "controllers re-create them with new claims), and check the driver on node node-1."
    )
    assert f.evidence["pods"] == ["team-a/p1"] and f.evidence["health"] == "unhealthy"
    # Report-only: the claim is not stuck.
    assert not Finding.objects.filter(cluster=cluster).stuck().exists()

    healthy = health_pod("p1", "c1", uid, [("gpu.example.com/node-1/gpu-0", "Healthy", None)], rv="6")
    apply(cluster, "Pod", healthy)
    stuck.detect(cluster, now=at(10))
    assert active(cluster, findings.UNHEALTHY_DEVICE) == []


def test_unhealthy_by_noschedule_taint_without_pods_is_no_finding(cluster):
    world(cluster, extra={"taints": [taint()]})
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"]))  # allocated, no pod
    stuck.detect(cluster, now=at(0))
    assert active(cluster, findings.UNHEALTHY_DEVICE) == []


def test_prepared_but_not_ready_after_grace(cluster):
    world(cluster)
    status = [
        {
            "driver": DRIVER,
            "pool": "node-1",
            "device": "gpu-0",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "LinkDown",
                    "message": "no carrier on eth1",
                    "lastTransitionTime": ts(at(0)),
                }
            ],
        }
    ]
    uid, raw = holder(cluster, device_status=status)
    raw["status"]["allocation"]["allocationTimestamp"] = ts(at(0))
    raw["metadata"]["resourceVersion"] = "11"
    apply(cluster, "ResourceClaim", raw)
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1"))
    stuck.detect(cluster, now=at(299))
    assert active(cluster, findings.DEVICE_NOT_READY) == []
    stuck.detect(cluster, now=at(300))
    [f] = active(cluster, findings.DEVICE_NOT_READY)
    assert f.summary == (
        f"Prepared but not ready: the driver reports device {DRIVER}/node-1/gpu-0 Ready=False (LinkDown: no carrier "
        "on eth1) although it was allocated at 2026-03-01 12:00:00Z. Check the driver's kubelet plugin on node "
        "node-1, and its logs for this claim."
    )
    assert f.evidence["ready"]["reason"] == "LinkDown" and f.evidence["pods"] == ["team-a/p1"]
    assert Finding.objects.filter(cluster=cluster).stuck().exists()

    status[0]["conditions"][0].update(status="True", reason="Up", message="")
    raw["status"]["devices"] = status
    raw["metadata"]["resourceVersion"] = "12"
    apply(cluster, "ResourceClaim", raw)
    stuck.detect(cluster, now=at(310))
    assert active(cluster, findings.DEVICE_NOT_READY) == []


def test_noexecute_taint_rule_evicts_untolerating_pods(cluster):
    world(cluster)
    uid1, _ = holder(cluster, "c1", "p1", devices=["gpu-0"])
    uid2, _ = holder(
        cluster,
        "c2",
        "p2",
        devices=["gpu-1"],
        tolerations=[{"key": "example.com/xid", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
    )
    uid3, _ = holder(
        cluster, "c3", "p3", devices=["gpu-1"], tolerations=[{"operator": "Exists"}], admin_access=True
    )  # tolerates for ever
    for name, claim, uid in (("p1", "c1", uid1), ("p2", "c2", uid2), ("p3", "c3", uid3)):
        apply(cluster, "Pod", pod_raw(name, uid=uid, claim=claim))
    apply(cluster, "DeviceTaintRule", taint_rule("drain", taint(effect="NoExecute"), pool="node-1"))
    stuck.detect(cluster, now=at(0))
    found = {f.claim_name: f for f in active(cluster, findings.TAINT_EVICTION)}
    assert set(found) == {"c1", "c2"}
    assert found["c1"].summary == (
        f"taint example.com/xid=79:NoExecute from DeviceTaintRule drain on device {DRIVER}/node-1/gpu-0 evicts pods "
        "team-a/p1: request gpu does not tolerate it. Move the work to other devices, or remove the taint if it was "
        "set by mistake."
    )
    assert found["c2"].summary.startswith(
        f"taint example.com/xid=79:NoExecute from DeviceTaintRule drain on device {DRIVER}/node-1/gpu-1 will evict "
        "pods team-a/p2 once request gpu's toleration of 300 s runs out."
    )
    assert found["c1"].evidence["rule"] == "drain" and found["c1"].evidence["source"] == "taint-rule"
    assert found["c2"].evidence["toleration_seconds"] == 300
    # The unhealthy-device rule leaves NoExecute taints to this one.
    assert active(cluster, findings.UNHEALTHY_DEVICE) == []


def test_noexecute_slice_taint_evicts(cluster):
    world(cluster, extra={"taints": [taint(effect="NoExecute")]})
    uid, _ = holder(cluster)
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1"))
    stuck.detect(cluster, now=at(0))
    [f] = active(cluster, findings.TAINT_EVICTION)
    assert f.summary.startswith("taint example.com/xid=79:NoExecute in its ResourceSlice on device")
    assert f.evidence["source"] == "slice-taint"


def test_binding_conditions_past_the_scheduler_timeout(cluster):
    world(cluster)
    status = [
        {
            "driver": DRIVER,
            "pool": "node-1",
            "device": "gpu-0",
            "conditions": [
                {
                    "type": "dra.example.com/attached",
                    "status": "False",
                    "reason": "FabricBusy",
                    "message": "attach queued",
                    "lastTransitionTime": ts(at(0)),
                }
            ],
        }
    ]
    raw = claim_raw(
        "waiting",
        devices=["gpu-0"],
        reserved=[("p1", new_uid())],
        binding_conditions=(["dra.example.com/attached"], ["dra.example.com/failed"]),
        device_status=status,
    )
    raw["status"]["allocation"]["allocationTimestamp"] = ts(at(0))
    apply(cluster, "ResourceClaim", raw)
    stuck.detect(cluster, now=at(599))
    assert active(cluster, findings.BINDING_TIMEOUT) == []
    stuck.detect(cluster, now=at(600))
    [f] = active(cluster, findings.BINDING_TIMEOUT)
    assert f.summary == (
        f"Binding conditions dra.example.com/attached of device {DRIVER}/node-1/gpu-0 are still not True past the "
        "scheduler's binding timeout (600 s after the allocation at 2026-03-01 12:00:00Z; the driver says: "
        "dra.example.com/attached: False (FabricBusy: attach queued)). The scheduler should have given the "
        "allocation up and scheduled p1 again: check the controller that sets these conditions, then the scheduler "
        "(is it running, and is its DynamicResources bindingTimeout longer?)."
    )
    assert f.evidence["pending"] == ["dra.example.com/attached"] and f.evidence["binding_timeout_seconds"] == 600
    # Only one finding for it: the not_prepared rule no longer says the same.
    assert active(cluster, stuck.NOT_PREPARED) == []

    status[0]["conditions"][0].update(status="True", reason="Attached", message="")
    raw["metadata"]["resourceVersion"] = "11"
    apply(cluster, "ResourceClaim", raw)
    stuck.detect(cluster, now=at(610))
    assert active(cluster, findings.BINDING_TIMEOUT) == []


def test_a_scoped_reader_sees_no_pod_report_of_another_namespace(cluster, client):
    """team-b's admin-access claim shares team-a's device, and team-b's pod reports it Unhealthy: team-a's
    finding quotes that report; a reader of team-a alone sees that a pod in another namespace reports it,
    not which pod nor its message, on the stuck page and in the API (an admin sees it all)."""
    from django.urls import reverse

    from tests.api_fixtures import client_for
    from tests.ui_fixtures import make_user

    world(cluster)
    uid, _ = holder(cluster)
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1"))
    spy_uid = new_uid()
    apply(
        cluster,
        "ResourceClaim",
        claim_raw("watch", namespace="team-b", devices=["gpu-0"], reserved=[("spy", spy_uid)], admin_access=True),
    )
    spy = health_pod(
        "spy", "watch", spy_uid, [("gpu.example.com/node-1/gpu-0", "Unhealthy", "secret-xid")], namespace="team-b"
    )
    apply(cluster, "Pod", spy)
    stuck.detect(cluster, now=at(0))
    [f] = Finding.objects.filter(cluster=cluster, rule=findings.UNHEALTHY_DEVICE, namespace="team-a").active()
    assert "team-b/spy" in f.summary and "secret-xid" in f.evidence["reasons"][0]  # kept whole for an admin

    hidden = "a pod in another namespace reports it Unhealthy"
    scoped = make_user("carol", namespaces=["team-a"])
    api = client_for(scoped).get(f"/api/v1/findings/{f.id}").json()
    client.force_login(scoped)
    page = client.get(reverse("ops:stuck")).content.decode()
    for shown in (api["summary"], str(api["evidence"]), page):
        assert "spy" not in shown and "secret-xid" not in shown
    assert hidden in api["summary"] and api["evidence"]["reasons"] == [hidden] and hidden in page
    assert api["evidence"]["pods"] == ["team-a/p1"] and "team-a/p1" in page

    admin = client_for(make_user("root", role="admin")).get(f"/api/v1/findings/{f.id}").json()
    assert "team-b/spy" in admin["summary"] and "secret-xid" in admin["evidence"]["reasons"][0]
