"""Builders for the device health tests: pods with allocatedResourcesStatus, taints, DeviceTaintRules."""

from tests.ops_fixtures import DRIVER, pod_raw


def with_health(pod, resources, pod_claim="gpu", request="gpu", container="main"):
    """`pod` (a raw Pod) whose container reports `resources` [(resourceID, health, message or None)] for
    "claim:<pod_claim>/<request>"."""
    entries = [
        {"resourceID": rid, "health": health, **({"message": msg} if msg else {})} for rid, health, msg in resources
    ]
    pod["status"]["containerStatuses"] = [
        {
            "name": container,
            "ready": True,
            "restartCount": 0,
            "image": "busybox",
            "imageID": "",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "allocatedResourcesStatus": [{"name": f"claim:{pod_claim}/{request}", "resources": entries}],
        }
    ]
    return pod


def health_pod(name, claim, uid, resources, rv="5", **kwargs):
    return with_health(pod_raw(name, uid=uid, claim=claim, rv=rv, **kwargs), resources)


def taint(key="example.com/xid", value="79", effect="NoSchedule", added="2026-03-01T11:00:00Z"):
    return {"key": key, "value": value, "effect": effect, "timeAdded": added}


def taint_rule(name, taint_, driver=DRIVER, pool=None, device=None, rv="1", uid=None):
    selector = {"driver": driver}
    if pool:
        selector["pool"] = pool
    if device:
        selector["device"] = device
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": rv},
        "spec": {"deviceSelector": selector, "taint": taint_},
    }


def load_health_fleet(cluster_name="alpha"):
    """The UI tests' fleet (tests/ui_fixtures.py) with health trouble: train-1-pod reports node-a gpu-0
    Unhealthy and gpu-1 Unknown (CDI resource IDs), a None-effect DeviceTaintRule marks node-a gpu-2
    degraded; node-c gpu-1 is tainted NoSchedule in its slice already."""
    from mirror.sync.apply import apply_object
    from tests import ui_fixtures

    cluster = ui_fixtures.load_fleet(cluster_name)
    pod = ui_fixtures.pod("team-a", "train-1-pod", "train-1", node_name="node-a")
    with_health(
        pod,
        [
            ("nvidia.com/gpu=gpu-0", "Unhealthy", "XID 79: GPU has fallen off the bus"),
            ("nvidia.com/gpu=gpu-1", "Unknown", None),
        ],
        request="gpus",
    )
    apply_object(cluster, "Pod", pod)
    apply_object(
        cluster,
        "DeviceTaintRule",
        taint_rule(
            "ecc-watch",
            taint(key="gpu.nvidia.com/ecc", value="corrected", effect="None"),
            driver=ui_fixtures.DRIVER,
            pool="node-a",
            device="gpu-2",
        ),
    )
    return cluster
