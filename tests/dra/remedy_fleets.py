"""Small random fleets for verdict and remedy tests: GPU nodes in every state (Ready, cordoned,
NotReady, tainted, CPU-only), devices held by claims that are in use, stuck or being deleted (their
pods with priorities, generated claims owned by them), tainted devices, and one pending pod.

A case is plain data (what the strategy draws, or what a table test writes); `build` turns it into
the engine's inputs."""

from hypothesis import strategies as st

from dra import Inventory
from dra.model import ClaimSpec
from dra.nodefilters import NOT_READY_KEY, SchedulingPod

DRIVER = "gpu.example.com"
MODEL = f"device.attributes['{DRIVER}'].model"
CLASSES = {
    "gpu": f"device.driver == '{DRIVER}'",
    "gpu-a": f"device.driver == '{DRIVER}' && {MODEL} == 'a'",
    "gpu-b": f"device.driver == '{DRIVER}' && {MODEL} == 'b'",
}
NODE_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
DEVICE_TAINT = {"key": "gpu.example.com/xid", "value": "79", "effect": "NoSchedule"}
STATES = ("ready", "cordoned", "not-ready", "tainted", "cpu-only")
HOLDER_KINDS = ("running", "stuck", "deleting")


def node_case(
    name,
    state="ready",
    gpus=4,
    model="a",
    holders=(),
    tainted=(),
    kinds=None,
    priorities=None,
    generated=None,
    models=None,
):
    """`holders`: per device, 0 (free) or the number of the claim holding it; `kinds`/`priorities`/
    `generated`: per claim number, running/stuck/deleting, its pod's priority, whether the claim was
    generated for that pod (goes with it)."""
    return {
        "name": name,
        "state": state,
        "gpus": 0 if state == "cpu-only" else gpus,
        "model": model,
        "models": list(models) if models else None,  # per device, where they differ (matchAttribute cases)
        "holders": list(holders) or [0] * gpus,
        "tainted": list(tainted),
        "kinds": dict(kinds or {}),
        "priorities": dict(priorities or {}),
        "generated": dict(generated or {}),
    }


# Per remedy kind, draws that make the situation it answers common (any kind may still come up).
NODE_STATES = {
    "uncordon": ("cordoned", "cordoned", "ready"),
    "recover-node": ("not-ready", "not-ready", "ready"),
    "tolerate-node-taint": ("tainted", "tainted", "ready"),
}
FEW_HOLDERS = (
    "drop-constraints",
    "uncordon",
    "recover-node",
    "tolerate-node-taint",
    "tolerate-device-taint",
    "drop-selectors",
)
ONE_HOLDER = ("release-stuck", "wait-deleting", "preempt")
HOLDER_KIND_BIAS = {
    "release-stuck": ("stuck", "stuck", "running"),
    "wait-deleting": ("deleting", "deleting", "running"),
}


@st.composite
def node_cases(draw, name, bias=None):
    state = draw(
        st.sampled_from(
            NODE_STATES.get(bias, ("ready", "ready", "ready", "cordoned", "not-ready", "tainted", "cpu-only"))
        )
    )
    gpus = draw(st.integers(1, 4))
    holder_values = (0, 0, 0, 1) if bias in FEW_HOLDERS else (0, 1, 1) if bias in ONE_HOLDER else (0, 1, 1, 2)
    holders = draw(st.lists(st.sampled_from(holder_values), min_size=gpus, max_size=gpus))
    tainted = draw(st.lists(st.integers(0, gpus - 1), min_size=int(bias == "tolerate-device-taint"), max_size=1))
    kinds = {c: draw(st.sampled_from(HOLDER_KIND_BIAS.get(bias, HOLDER_KINDS))) for c in (1, 2)}
    priorities = {c: draw(st.sampled_from((0,) if bias == "preempt" else (0, 100))) for c in (1, 2)}
    generated = {c: draw(st.just(True) if bias == "preempt" else st.booleans()) for c in (1, 2)}
    if bias == "drop-constraints":  # one device of each model: no two free devices share one
        models = ["a", "b"][:gpus] + ["a"] * max(0, gpus - 2)
        holders = [0, 0] + [1] * max(0, gpus - 2)
    else:
        models = draw(st.lists(st.sampled_from("ab"), min_size=gpus, max_size=gpus)) if draw(st.booleans()) else None
    return node_case(
        name, state, gpus, draw(st.sampled_from("ab")), holders, tainted, kinds, priorities, generated, models
    )


@st.composite
def cases(draw, bias=None):
    """A fleet and a pending pod; `bias`: a remedy kind whose situation to draw more often."""
    n = draw(st.integers(1, 4))
    return {
        "nodes": [draw(node_cases(f"n{i}", bias)) for i in range(n)],
        "count": draw(st.integers(2, 3) if bias == "drop-constraints" else st.integers(1, 4)),
        "class": draw(st.sampled_from(("gpu",) if bias in ONE_HOLDER + ("drop-constraints",) else sorted(CLASSES))),
        "selector": draw(
            st.sampled_from(
                (f"{MODEL} == 'b'",)
                if bias == "drop-selectors"
                else (None,)
                if bias in ONE_HOLDER
                else (None, f"{MODEL} == 'b'")
            )
        ),
        "priority": draw(st.sampled_from((1000,) if bias == "preempt" else (0, 50, 1000))),
        "constraint": draw(st.just(True) if bias == "drop-constraints" else st.booleans()),
    }


def pending(count=1, cls="gpu", selector=None, priority=0, nodes=(), constraint=False):
    return {
        "nodes": list(nodes),
        "count": count,
        "class": cls,
        "selector": selector,
        "priority": priority,
        "constraint": constraint,
    }


def _node(case):
    taints = []
    conditions = [{"type": "Ready", "status": "True"}]
    if case["state"] == "not-ready":
        taints.append({"key": NOT_READY_KEY, "effect": "NoSchedule"})
        conditions = [{"type": "Ready", "status": "False"}]
    if case["state"] == "tainted":
        taints.append(dict(NODE_TAINT))
    spec = {"taints": taints}
    if case["state"] == "cordoned":
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": case["name"], "labels": {"kubernetes.io/hostname": case["name"]}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "conditions": conditions},
    }


def _slice(case):
    devices = []
    for j in range(case["gpus"]):
        model = case["models"][j] if case.get("models") else case["model"]
        d = {"name": f"gpu-{j}", "attributes": {"model": {"string": model}}}
        if j in case["tainted"]:
            d["taints"] = [dict(DEVICE_TAINT)]
        devices.append(d)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{case['name']}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": case["name"],
            "pool": {"name": case["name"], "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _holders(case):
    """(claims, pods, stuck refs) of the claims holding devices on one node."""
    claims, pods, stuck = [], [], set()
    name = case["name"]
    for number in sorted({h for h in case["holders"] if h}):
        held = [j for j, h in enumerate(case["holders"]) if h == number and j < case["gpus"]]
        if not held:
            continue
        kind = case["kinds"].get(number, "running")
        claim_name, pod_name = f"{name}-claim-{number}", f"{name}-pod-{number}"
        pod_uid = f"uid-{pod_name}"
        meta = {"name": claim_name, "namespace": "work", "uid": f"uid-{claim_name}"}
        if case["generated"].get(number):
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}]
        if kind == "deleting":
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if kind == "stuck":
            stuck.add(f"work/{claim_name}")
        claims.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": meta,
                "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "gpus", "driver": DRIVER, "pool": name, "device": f"gpu-{j}"} for j in held
                            ]
                        },
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
                },
            }
        )
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": "work", "uid": pod_uid},
                "spec": {
                    "nodeName": name,
                    "priority": case["priorities"].get(number, 0),
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    "resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}],
                },
                "status": {"phase": "Running"},
            }
        )
    return claims, pods, stuck


def objects(case):
    nodes, slices, claims, pods, stuck = [], [], [], [], set()
    for n in case["nodes"]:
        nodes.append(_node(n))
        if n["gpus"]:
            slices.append(_slice(n))
        c, p, s = _holders(n)
        claims += c
        pods += p
        stuck |= s
    classes = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }
        for name, expr in CLASSES.items()
    ]
    return {
        "nodes": nodes,
        "resourceslices": slices,
        "resourceclaims": claims,
        "pods": pods,
        "deviceclasses": classes,
    }, stuck


def build(case):
    """(inventory, [claim], pod, stuck refs) for a case."""
    objs, stuck = objects(case)
    inv = Inventory.from_objects(objs)
    exactly = {"deviceClassName": case["class"], "count": case["count"]}
    if case.get("selector"):
        exactly["selectors"] = [{"cel": {"expression": case["selector"]}}]
    devices = {"requests": [{"name": "gpus", "exactly": exactly}]}
    if case.get("constraint"):  # all devices of one model
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": f"{DRIVER}/model"}]
    claim = ClaimSpec("ml", "want", {"devices": devices})
    raw_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "uid-trainer"},
        "spec": {
            "priority": case["priority"],
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "want"}],
        },
    }
    return inv, [claim], SchedulingPod.from_pod(raw_pod), stuck
