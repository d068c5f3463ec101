"""The health timeline written by the sync (mirror/sync/hooks.py refresh_health), driven over HTTP by
the real kubernetes client's watchers against the built-in API server: pod health reports (added,
changed, malformed, removed), slice taints, DeviceTaintRules, and a relist after a compaction."""

import pytest

from health.models import DEGRADED, HEALTHY, UNHEALTHY, DeviceHealth, HealthChange
from mirror.models import SyncState
from tests.sync_fixtures import allocation, make_claim, make_class, make_node, make_pod, make_slice, state, wait_for

DRIVER = "gpu.example.com"
BOUND = 60  # seconds for the watchers to apply a change on a loaded machine: a bound, not a figure


def health_status(entries, phase="Running"):
    """A pod status whose container reports `entries` [(resourceID, health)] for claim:gpu/gpu."""
    return {
        "phase": phase,
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": "busybox",
                "imageID": "",
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                "allocatedResourcesStatus": [
                    {"name": "claim:gpu/gpu", "resources": [{"resourceID": rid, "health": h} for rid, h in entries]}
                ],
            }
        ],
    }


def set_pod_status(server, status):
    pod = server.store.get("pods", "team-a", "p1")
    pod["status"] = status
    server.store.update("pods", pod, subresource="status")


def health_state(cluster, device="gpu-0"):
    row = DeviceHealth.objects.filter(cluster=cluster, device=device).first()
    return row.state if row else HEALTHY


def changes(cluster, device="gpu-0"):
    return list(
        HealthChange.objects.filter(cluster=cluster, device=device)
        .order_by("at", "id")
        .values_list("from_state", "to_state")
    )


def seed(server):
    server.store.create("nodes", make_node("node-1"))
    server.store.create("resourceslices", make_slice("node-1", gpus=2))
    server.store.create("deviceclasses", make_class())
    server.store.create("resourceclaims", make_claim("team-a", "c1"))
    claim = server.store.get("resourceclaims", "team-a", "c1")
    server.store.create("pods", make_pod("team-a", "p1", claim="c1", node="node-1"))
    pod = server.store.get("pods", "team-a", "p1")
    claim["status"] = {
        "allocation": allocation("node-1"),
        "reservedFor": [{"resource": "pods", "name": "p1", "uid": pod["metadata"]["uid"]}],
    }
    server.store.update("resourceclaims", claim, subresource="status")
    set_pod_status(server, health_status([(f"{DRIVER}/node-1/gpu-0", "Healthy")]))


def connected(cluster, kind):
    return lambda: state(cluster, kind).status == SyncState.Status.CONNECTED


def test_pod_reports_and_taints_write_the_timeline(cluster, devcluster, fast_sync, run_watcher):
    devcluster.enable_devicetaintrules()
    seed(devcluster)
    watchers = {k: run_watcher(cluster, k) for k in ("ResourceSlice", "ResourceClaim", "Pod")}
    watchers["DeviceTaintRule"] = run_watcher(cluster, "DeviceTaintRule", version="v1beta2")  # 1.36 serves v1beta2
    for kind in watchers:
        wait_for(connected(cluster, kind), timeout=BOUND, message=f"{kind} connected")
    assert health_state(cluster) == HEALTHY and changes(cluster) == []

    # Changed: the kubelet reports the device Unhealthy.
    set_pod_status(devcluster, health_status([(f"{DRIVER}/node-1/gpu-0", "Unhealthy")]))
    wait_for(lambda: health_state(cluster) == UNHEALTHY, timeout=BOUND, message="unhealthy from the pod's report")
    [change] = HealthChange.objects.filter(cluster=cluster, device="gpu-0")
    assert (change.from_state, change.to_state, change.source) == (HEALTHY, UNHEALTHY, "pod-report")
    assert change.claims == ["team-a/c1"] and change.pods == ["team-a/p1"] and change.node_name == "node-1"

    # Malformed (a health value the API does not define): not a signal; the device is healthy again.
    set_pod_status(devcluster, health_status([(f"{DRIVER}/node-1/gpu-0", "Sick")]))
    wait_for(lambda: health_state(cluster) == HEALTHY, timeout=BOUND, message="the malformed report ignored")

    # A None-effect DeviceTaintRule on gpu-1 (the v1beta2 API of 1.36): degraded.
    devcluster.store.create(
        "devicetaintrules",
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "ecc-note"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "node-1", "device": "gpu-1"},
                "taint": {"key": "example.com/ecc", "value": "corrected", "effect": "None"},
            },
        },
    )
    wait_for(lambda: health_state(cluster, "gpu-1") == DEGRADED, timeout=BOUND, message="degraded from the rule")
    assert DeviceHealth.objects.get(device="gpu-1").reason == (
        "taint example.com/ecc=corrected:None from DeviceTaintRule ecc-note"
    )

    # A NoSchedule taint in the slice on gpu-0.
    slc = devcluster.store.get("resourceslices", None, f"node-1-{DRIVER}")
    slc["spec"]["devices"][0]["taints"] = [{"key": "example.com/xid", "value": "48", "effect": "NoSchedule"}]
    devcluster.store.update("resourceslices", slc)
    wait_for(lambda: health_state(cluster) == UNHEALTHY, timeout=BOUND, message="unhealthy from the slice taint")

    # While the rule and pod watchers are away, the rule goes and the report is removed; the history is
    # compacted, so both relist and reconcile.
    watchers["DeviceTaintRule"].stop()
    watchers["Pod"].stop()
    relists = state(cluster, "DeviceTaintRule").relist_count
    devcluster.store.delete("devicetaintrules", None, "ecc-note")
    set_pod_status(devcluster, {"phase": "Running"})
    devcluster.compact()
    run_watcher(cluster, "DeviceTaintRule", version="v1beta2")
    run_watcher(cluster, "Pod")
    wait_for(lambda: health_state(cluster, "gpu-1") == HEALTHY, timeout=BOUND, message="healthy after the relist")
    wait_for(lambda: state(cluster, "DeviceTaintRule").relist_count > relists, timeout=BOUND, message="a relist")
    assert changes(cluster, "gpu-1") == [(HEALTHY, DEGRADED), (DEGRADED, HEALTHY)]
    assert changes(cluster) == [(HEALTHY, UNHEALTHY), (UNHEALTHY, HEALTHY), (HEALTHY, UNHEALTHY)]
    last = HealthChange.objects.filter(cluster=cluster, device="gpu-0").order_by("-at", "-id").first()
    assert last.source == "slice-taint" and last.pods == ["team-a/p1"]


@pytest.mark.parametrize("version", ["v1"])
def test_v1_taint_rules_of_137(cluster, devcluster, fast_sync, run_watcher, version):
    """DeviceTaintRule is resource.k8s.io/v1 in 1.37: the same rule through that version."""
    devcluster.enable_devicetaintrules(versions=(version, "v1beta2"))
    seed(devcluster)
    run_watcher(cluster, "ResourceSlice")
    run_watcher(cluster, "DeviceTaintRule", version=version)
    wait_for(connected(cluster, "DeviceTaintRule"), timeout=BOUND, message="rules connected")
    devcluster.store.create(
        "devicetaintrules",
        {
            "apiVersion": f"resource.k8s.io/{version}",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "drain"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "node-1"},
                "taint": {"key": "example.com/drain", "effect": "NoExecute"},
            },
        },
    )
    wait_for(lambda: health_state(cluster, "gpu-0") == UNHEALTHY, timeout=BOUND, message="rule taint")
    assert health_state(cluster, "gpu-1") == UNHEALTHY
