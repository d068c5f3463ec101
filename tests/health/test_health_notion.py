"""Device health as one notion (health/notion.py): the precedence of its signals, reports joined to
devices (CDI IDs through the claim's allocation), and the timeline the sync's apply path writes
(health/timeline.py) with who sat on the device."""

from datetime import UTC, datetime, timedelta

import pytest

from health import notion, timeline
from health.models import (
    DEGRADED,
    HEALTHY,
    POD_REPORT,
    SLICE_TAINT,
    TAINT_RULE,
    UNHEALTHY,
    UNKNOWN,
    DeviceHealth,
    HealthChange,
)
from mirror.messages import english
from mirror.sync.apply import delete_object
from tests.ops_fixtures import DRIVER, apply, claim_raw, cluster, new_uid, node_raw, pod_raw, slice_raw  # noqa: F401

from .health_fixtures import health_pod, taint, taint_rule


def sig(state, source=SLICE_TAINT):
    return {"state": state, "source": source, "text": {"msgid": state, "params": {}}}


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], HEALTHY),
        ([UNKNOWN], UNKNOWN),
        ([DEGRADED], DEGRADED),
        ([UNKNOWN, DEGRADED], DEGRADED),  # an admin's note says more than a lost health stream
        ([DEGRADED, UNHEALTHY, UNKNOWN], UNHEALTHY),
        ([UNHEALTHY], UNHEALTHY),
    ],
)
def test_precedence_worst_first(states, expected):
    state, reasons = notion.decide([sig(s) for s in states])
    assert state == expected
    assert [r["state"] for r in reasons] == sorted(states, key=[UNHEALTHY, DEGRADED, UNKNOWN, HEALTHY].index)


@pytest.mark.parametrize(
    ("effect", "expected"),
    [("NoSchedule", UNHEALTHY), ("NoExecute", UNHEALTHY), ("None", DEGRADED), (None, DEGRADED)],
)
def test_taint_effects(effect, expected):
    assert notion.taint_state({"key": "k", "effect": effect}) == expected


pytestmark = pytest.mark.sqlite_default  # also on the embedded SQLite default
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def world(cluster, taints=None):
    apply(cluster, "Node", node_raw("node-1"))
    extra = {"taints": taints} if taints else None
    apply(cluster, "ResourceSlice", slice_raw("node-1", ["gpu-0", "gpu-1"], extra=extra))


def test_slice_taint_makes_unhealthy_then_healthy_with_occupants(cluster):
    world(cluster)
    uid = new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)]))
    apply(cluster, "Pod", pod_raw("p1", uid=uid, claim="c1"))
    assert not DeviceHealth.objects.exists() and not HealthChange.objects.exists()

    slc = slice_raw("node-1", ["gpu-0", "gpu-1"], rv="2", extra={"taints": [taint()]})
    apply(cluster, "ResourceSlice", slc)
    rows = {h.device: h for h in DeviceHealth.objects.filter(cluster=cluster)}
    assert {d: h.state for d, h in rows.items()} == {"gpu-0": UNHEALTHY, "gpu-1": UNHEALTHY}
    assert rows["gpu-0"].source == SLICE_TAINT
    assert rows["gpu-0"].reason == "taint example.com/xid=79:NoSchedule in its ResourceSlice"
    [change] = HealthChange.objects.filter(cluster=cluster, device="gpu-0")
    assert (change.from_state, change.to_state, change.node_name) == (HEALTHY, UNHEALTHY, "node-1")
    assert change.claims == ["team-a/c1"] and change.pods == ["team-a/p1"]
    assert HealthChange.objects.get(device="gpu-1").claims == []

    # The driver lifts the taint: back to healthy, one more change each, no stored state.
    apply(
        cluster,
        "ResourceSlice",
        {**slice_raw("node-1", ["gpu-0", "gpu-1"], rv="3"), "metadata": slc["metadata"] | {"resourceVersion": "3"}},
    )
    assert not DeviceHealth.objects.filter(cluster=cluster).exists()
    assert list(HealthChange.objects.filter(device="gpu-0").values_list("from_state", "to_state")) == [
        (UNHEALTHY, HEALTHY),
        (HEALTHY, UNHEALTHY),
    ]


def test_none_effect_is_degraded_and_a_vanished_device_leaves_no_healthy_change(cluster):
    slc = slice_raw("node-1", ["gpu-0"], extra={"taints": [taint(key="example.com/ecc", value="", effect="None")]})
    apply(cluster, "ResourceSlice", slc)
    [row] = DeviceHealth.objects.all()
    assert (row.state, row.reason) == (DEGRADED, "taint example.com/ecc:None in its ResourceSlice")
    delete_object(cluster, "ResourceSlice", slc)
    assert not DeviceHealth.objects.exists()
    assert HealthChange.objects.count() == 1  # gone is not "healthy again"


def test_taint_rule_and_pod_reports(cluster):
    world(cluster)
    uid = new_uid()
    apply(cluster, "ResourceClaim", claim_raw("c1", devices=["gpu-0", "gpu-1"], reserved=[("p1", uid)]))
    # CDI IDs, the device named at the end; gpu-1 Unknown, gpu-0 Unhealthy with the driver's message.
    pod = health_pod(
        "p1",
        "c1",
        uid,
        [
            ("gpu.example.com/gpu=gpu-0", "Unhealthy", "XID 79: fell off the bus"),
            ("gpu.example.com/gpu=gpu-1", "Unknown", None),
        ],
    )
    apply(cluster, "Pod", pod)
    rows = {h.device: h for h in DeviceHealth.objects.filter(cluster=cluster)}
    assert rows["gpu-0"].state == UNHEALTHY and rows["gpu-0"].source == POD_REPORT
    assert rows["gpu-0"].reason == "pod team-a/p1 (container main) reports it Unhealthy: XID 79: fell off the bus"
    assert rows["gpu-1"].state == UNKNOWN

    # An admin's None-effect rule on gpu-1: degraded outranks Unknown; both reasons kept, worst first.
    apply(
        cluster,
        "DeviceTaintRule",
        taint_rule("note", taint(key="example.com/maint", value="", effect="None"), device="gpu-1"),
    )
    row = DeviceHealth.objects.get(device="gpu-1")
    assert row.state == DEGRADED and row.source == TAINT_RULE
    assert [r["english"] for r in row.reasons] == [
        "taint example.com/maint:None from DeviceTaintRule note",
        "pod team-a/p1 (container main) reports it Unknown",
    ]
    change = HealthChange.objects.filter(device="gpu-1").first()
    assert (change.from_state, change.to_state, change.pods) == (UNKNOWN, DEGRADED, ["team-a/p1"])

    # The pod finished: its reports are history; the rule alone is left on gpu-1.
    apply(
        cluster,
        "Pod",
        {
            **pod,
            "metadata": {**pod["metadata"], "resourceVersion": "9"},
            "status": {**pod["status"], "phase": "Succeeded"},
        },
    )
    assert not DeviceHealth.objects.filter(device="gpu-0").exists()
    assert DeviceHealth.objects.get(device="gpu-1").state == DEGRADED


def test_prune_keeps_the_history_period(cluster, settings):
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "HISTORY_DAYS": 2}
    world(cluster, taints=[taint()])
    old = HealthChange.objects.filter(cluster=cluster)
    assert old.count() == 2
    old.filter(device="gpu-0").update(at=T0 - timedelta(days=3))
    old.filter(device="gpu-1").update(at=T0 - timedelta(days=1))
    assert timeline.prune(now=T0) == 1
    assert list(HealthChange.objects.values_list("device", flat=True)) == ["gpu-1"]


def test_reason_messages_render_in_english():
    s = notion.taint_signal({"key": "k", "value": "v", "effect": "NoExecute"}, TAINT_RULE, "r1")
    assert english(s["text"]) == "taint k=v:NoExecute from DeviceTaintRule r1"
