"""Builders for the device health tests: pods with allocatedResourcesStatus, taints, DeviceTaintRules."""

from .ops_fixtures import DRIVER, pod_raw


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
