"""Compact builders for allocator test data (raw Kubernetes JSON, as the engine gets it)."""

from dra import Features, Inventory
from dra.model import ClaimSpec

NODES = {
    "node-1": {"region": "region-1", "planet": "earth"},
    "node-2": {"region": "region-2", "planet": "earth"},
}
CLASS_SELECTORS = {
    "class-a": ['device.driver == "driver-a"'],
    "class-b": ['device.driver == "driver-b"'],
}

taintNone = {"key": "taint-key", "value": "taint-value", "effect": "None"}
taintNoSchedule = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
taintNoExecute = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
tolNoSchedule = {"key": "taint-key", "operator": "Exists", "effect": "NoSchedule"}
tolNoExecute = {"key": "taint-key", "operator": "Equal", "value": "taint-value-2", "effect": "NoExecute"}


def mem(q, driver="driver-a"):
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{q}")) >= 0'


def V(text):
    return {"version": text}


def _attr(value):
    if isinstance(value, dict):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def _cap(value):
    return value if isinstance(value, dict) else {"value": str(value)}


def dev(
    name,
    attrs=None,
    capacity=None,
    consumes=None,
    taints=None,
    binding=None,
    binding_fail=None,
    binds_to_node=False,
    multi=False,
    **node,
):
    d = {"name": name}
    if attrs:
        d["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    if capacity:
        d["capacity"] = {k: _cap(v) for k, v in capacity.items()}
    if consumes:
        d["consumesCounters"] = [
            {"counterSet": s, "counters": {c: {"value": str(v)} for c, v in cs.items()}} for s, cs in consumes.items()
        ]
    if taints:
        d["taints"] = taints
    if binding:
        d["bindingConditions"] = binding
        d["bindingFailureConditions"] = binding_fail or []
    if binds_to_node:
        d["bindsToNode"] = True
    if multi:
        d["allowMultipleAllocations"] = True
    if node.get("node_name"):
        d["nodeName"] = node["node_name"]
    if node.get("node_selector"):
        d["nodeSelector"] = node["node_selector"]
    if node.get("all_nodes"):
        d["allNodes"] = True
    return d


def selector(**labels_in):
    """A NodeSelector with one term: label In [values]."""
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": "In", "values": list(v)} for k, v in labels_in.items()]}
        ]
    }


def slice_(
    name,
    driver="driver-a",
    pool="pool-1",
    devices=(),
    node="node-1",
    gen=1,
    count=1,
    node_selector=None,
    all_nodes=False,
    per_device=False,
    counters=None,
):
    spec = {"driver": driver, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count}}
    if per_device:
        spec["perDeviceNodeSelection"] = True
    elif node_selector:
        spec["nodeSelector"] = node_selector
    elif all_nodes:
        spec["allNodes"] = True
    elif node:
        spec["nodeName"] = node
    if counters:
        spec["sharedCounters"] = [
            {"name": n, "counters": {c: {"value": str(v)} for c, v in cs.items()}} for n, cs in counters.items()
        ]
    else:
        spec["devices"] = [d if isinstance(d, dict) else {"name": d} for d in devices]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def devices(prefix, n, start=0):
    return [f"{prefix}-{i}" for i in range(start, start + n)]


def exactly(cls="class-a", count=None, mode=None, selectors=(), admin=None, tolerations=None, capacity=None):
    e = {"deviceClassName": cls}
    if mode:
        e["allocationMode"] = mode
    if count is not None:
        e["count"] = count
    if selectors:
        e["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin:
        e["adminAccess"] = True
    if tolerations:
        e["tolerations"] = tolerations
    if capacity:
        e["capacity"] = {"requests": {k: str(v) for k, v in capacity.items()}}
    return e


def req(name, cls="class-a", **kw):
    return {"name": name, "exactly": exactly(cls, **kw)}


def sub(name, cls="class-a", **kw):
    return dict(exactly(cls, **kw), name=name)


def first(name, *subs):
    return {"name": name, "firstAvailable": list(subs)}


def claim_spec(requests, constraints=None, config=None):
    devices_ = {"requests": requests}
    if constraints:
        devices_["constraints"] = constraints
    if config:
        devices_["config"] = config
    return {"devices": devices_}


def claim(name, requests, constraints=None, config=None, ns="default"):
    return ClaimSpec(ns, name, claim_spec(requests, constraints, config))


def allocated_claim(name, results, ns="other"):
    """A ResourceClaim with status.allocation; results: "driver/pool/device" or dicts."""
    res = []
    for r in results:
        if isinstance(r, str):
            d, p, n = r.split("/")
            r = {"driver": d, "pool": p, "device": n}
        res.append(dict({"request": "req"}, **r))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "class-a"}}]}},
        "status": {"allocation": {"devices": {"results": res}}},
    }


def device_class(name, selectors, config=None):
    spec = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def node_obj(name, labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def inventory(slices, classes=None, allocated=(), shared=(), features=None, nodes=None, claims=(), **extra):
    """`allocated`: dedicated device ids; `shared`: {device id: {capacity: amount}} persisted shares."""
    cls = dict(CLASS_SELECTORS)
    cls.update(classes or {})
    raw_classes = [
        device_class(n, c["selectors"], c.get("config")) if isinstance(c, dict) else device_class(n, c)
        for n, c in cls.items()
    ]
    raw_claims = list(claims)
    if allocated:
        raw_claims.append(allocated_claim("taken", list(allocated)))
    for i, (dev_id, caps) in enumerate(dict(shared).items()):
        d, p, n = dev_id.split("/")
        r = {"driver": d, "pool": p, "device": n, "shareID": f"00000000-0000-0000-0000-00000000000{i}"}
        if caps:
            r["consumedCapacity"] = {k: str(v) for k, v in caps.items()}
        raw_claims.append(allocated_claim(f"share-{i}", [r]))
    return Inventory(
        device_classes=raw_classes,
        resource_slices=slices,
        resource_claims=raw_claims,
        nodes=[node_obj(n, lbl) for n, lbl in (nodes or NODES).items()],
        features=features or Features(),
        **extra,
    )


def picked(outcome):
    """[(claim name, request, "driver/pool/device"), ...] in allocator order."""
    return [(p.claim.name, p.variant.label, p.device.id) for picks in outcome.picks for p in picks]
