"""The node filters of kube-scheduler v1.36 that the demo's churn needs, so the demo keeps the rules the
dashboard's preview applies: cordons (NodeUnschedulable), taints with effect NoSchedule or NoExecute
(TaintToleration; a NotReady node carries the unreachable or not-ready pair), the node's allocatable
pods, cpu and memory (NodeResourcesFit) and, last, whether a free device is left (DynamicResources).

Written apart from the product's engine (dra/) on purpose: the devcluster stands in for
the real cluster, and a shared bug would agree with itself.
"""

from collections import Counter

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_CLAIMS = "cannot allocate all claims"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
# NodeResourcesFit's rejections are the only ones preemption could resolve.
RESOLVABLE = {REASON_TOO_MANY_PODS, "Insufficient cpu", "Insufficient memory"}
TERMINAL_PHASES = ("Succeeded", "Failed")
CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}  # a cordon yields to its toleration

_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "m": 10**-3,
}


def quantity(text):
    text = str(text)
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def tolerates(toleration, taint):
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(node, pod):
    tolerations = pod["spec"].get("tolerations") or []
    for taint in node["spec"].get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def pod_requests(pod):
    total = Counter()
    for container in pod["spec"].get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name in ("cpu", "memory"):
                total[name] += quantity(value)
    return total


def node_rejection(node, pod, bound):
    """Why `node` cannot take `pod` before devices are looked at (None: it can); `bound` are the
    non-terminal pods already on the node."""
    tolerations = pod["spec"].get("tolerations") or []
    if node["spec"].get("unschedulable") and not any(tolerates(t, CORDON_TAINT) for t in tolerations):
        return REASON_UNSCHEDULABLE
    if untolerated_taint(node, pod):
        return REASON_TAINT
    allocatable = node["status"].get("allocatable") or {}
    if len(bound) + 1 > quantity(allocatable.get("pods", "110")):
        return REASON_TOO_MANY_PODS
    used = sum((pod_requests(p) for p in bound), Counter())
    for name, want in pod_requests(pod).items():
        if name in allocatable and used[name] + want > quantity(allocatable[name]):
            return f"Insufficient {name}"
    return None


def pods_by_node(pods):
    out = {}
    for p in pods:
        if p["spec"].get("nodeName") and p["status"].get("phase") not in TERMINAL_PHASES:
            out.setdefault(p["spec"]["nodeName"], []).append(p)
    return out


def _fit_error(total, counts):
    # FitError's text sorts "<count> <reason>" as Go's sort.Strings does, by bytes.
    parts = sorted((f"{n} {reason}" for reason, n in counts.items()), key=lambda s: s.encode())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def unschedulable_message(reasons):
    """The scheduler's whole message for a pod no node takes: `reasons` maps every node of the
    cluster to its rejection. DefaultPreemption then tries the resolvable nodes; a pod of the default
    priority finds no lower-priority victims there."""
    total = len(reasons)
    counts = Counter(reasons.values())
    resolvable = sum(n for reason, n in counts.items() if reason in RESOLVABLE)
    preemption = Counter({NO_VICTIMS: resolvable, NOT_HELPFUL: total - resolvable})
    return f"{_fit_error(total, counts)} preemption: {_fit_error(total, +preemption)}"


def feasible(nodes, pods, pod, free_devices):
    """({node name: device keys} of the nodes that take `pod`, message): the message is the
    scheduler's when none does, else None. `free_devices`: {node name: [device keys]} the pod's
    one-device claim could take there."""
    bound = pods_by_node(pods)
    fits, reasons = {}, {}
    for node in nodes:
        name = node["metadata"]["name"]
        reason = node_rejection(node, pod, bound.get(name, []))
        if reason is None and free_devices.get(name):
            fits[name] = free_devices[name]
        reasons[name] = reason or REASON_CLAIMS
    return fits, (None if fits else unschedulable_message(reasons))
