"""What-if capacity planning: hypothetical changes to a copy of an inventory, and what they do to
the pending pods and claims.

A scenario is a list of changes, each one line of text (the same in a URL, the CLI, the API and a
saved scenario):

    add NODE COUNT                      COUNT new nodes cloned from NODE (empty, Ready, schedulable)
    remove NODE                         the node and its slices go; its pods lose their place
    drain NODE                          cordon, and evict its pods (their claims are deallocated)
    cordon NODE / uncordon NODE
    taint DRIVER[/POOL[/DEVICE]] KEY[=VALUE][:EFFECT]   a draft DeviceTaintRule (NoSchedule default)
    release NAMESPACE/NAME              the claim's allocation (and reservations) dropped
    delete NAMESPACE/NAME               the claim deleted
    class NAME CEL                      the DeviceClass's selectors replaced by one CEL selector

`apply` returns the changed Inventory (the original is never touched: Inventory.with_changes) and
what changed where; `evaluate` runs the engine's preview of every pending pod or claim before and
after. Nothing here writes anywhere. Plain Python: no Django.
"""

import copy
import json
import re
import threading
import weakref
from dataclasses import dataclass, field

from . import partitions
from .cel import CelCompileError, compile_selector
from .documents import resolve_claims
from .errors import AllocationError, InputError
from .fleet import Fits, SharedFits, claim_inputs, headroom
from .gcpause import collector_paused
from .nodefilters import SchedulingPod

MAX_CLONES = 100  # nodes one `add` may clone
MAX_CHANGES = 50
MAX_SHAPES = 10
MAX_SHAPE_COUNT = 64

# Taints the node lifecycle controller sets from a node's state: a new node joins without them.
LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
TAINT_EFFECTS = ("NoSchedule", "NoExecute")

KINDS = ("add", "remove", "drain", "cordon", "uncordon", "taint", "release", "delete", "class")

# Verdicts of one pending pod or claim.
NOW_SCHEDULABLE = "now-schedulable"
STILL_BLOCKED = "still-blocked"
LOSES_PLACE = "loses-place"
STILL_SCHEDULABLE = "still-schedulable"
ERROR = "error"
UNDECIDED = "undecided"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_TAINT_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class ScenarioError(InputError):
    """A change (or shape) that cannot be applied. `field`: "changes" or "shapes"; `index`: 0-based."""

    def __init__(self, index, text, message, field="changes"):
        self.index, self.text, self.field = index, text, field
        self.reason = message
        what = "change" if field == "changes" else "shape"
        super().__init__(f"{what} {index + 1} ({text!r}): {message}")


@dataclass(frozen=True)
class Change:
    kind: str
    text: str
    index: int
    node: str = ""
    count: int = 0
    namespace: str = ""
    name: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    taint: tuple = ()  # (key, value, effect)
    expression: str = ""


def parse_change(text, index=0):
    """One line of the scenario syntax (module docstring) as a Change; ScenarioError says what is wrong."""
    if not isinstance(text, str):
        raise ScenarioError(index, str(text), "a change is one line of text")
    line = " ".join(text.split()) if not text.lstrip().startswith("class ") else text.strip()
    if not line:
        raise ScenarioError(index, text, "empty change")
    kind, _, rest = line.partition(" ")
    rest = rest.strip()

    def fail(message):
        raise ScenarioError(index, line, message)

    if kind not in KINDS:
        fail(f"unknown change {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "add":
        parts = rest.split()
        if len(parts) != 2:
            fail("expected `add NODE COUNT`")
        node, count = parts
        _check_name(node, "node", fail)
        if not count.isdigit() or not 1 <= int(count) <= MAX_CLONES:
            fail(f"COUNT must be a whole number from 1 to {MAX_CLONES}, not {count!r}")
        return Change(kind, line, index, node=node, count=int(count))
    if kind in ("remove", "drain", "cordon", "uncordon"):
        if not rest or " " in rest:
            fail(f"expected `{kind} NODE`")
        _check_name(rest, "node", fail)
        return Change(kind, line, index, node=rest)
    if kind in ("release", "delete"):
        ns, slash, name = rest.partition("/")
        if not slash or not ns or not name or " " in rest:
            fail(f"expected `{kind} NAMESPACE/NAME`")
        _check_name(ns, "namespace", fail)
        _check_name(name, "claim name", fail)
        return Change(kind, line, index, namespace=ns, name=name)
    if kind == "class":
        name, _, expression = rest.partition(" ")
        expression = expression.strip()
        if not name or not expression:
            fail("expected `class NAME CEL-EXPRESSION`")
        _check_name(name, "class name", fail)
        try:
            compile_selector(expression)
        except CelCompileError as exc:
            where = f" at line {exc.line}, column {exc.column}" if exc.line is not None else ""
            fail(f"CEL compile error{where}: {exc.message}")
        return Change(kind, line, index, name=name, expression=expression)
    # taint
    parts = rest.split()
    if len(parts) != 2:
        fail("expected `taint DRIVER[/POOL[/DEVICE]] KEY[=VALUE][:EFFECT]`")
    where, taint = parts
    pieces = where.split("/")
    if len(pieces) > 3 or not all(pieces):
        fail("expected DRIVER, DRIVER/POOL or DRIVER/POOL/DEVICE")
    driver, pool, device = (pieces + ["", ""])[:3]
    _check_name(driver, "driver", fail)
    key_value, _, effect = taint.partition(":")
    effect = effect or "NoSchedule"
    if effect not in TAINT_EFFECTS:
        fail(f"taint effect must be {' or '.join(TAINT_EFFECTS)}, not {effect!r}")
    key, _, value = key_value.partition("=")
    if not _TAINT_KEY.match(key) or len(key) > 316:
        fail(f"taint key {key!r} is not a valid label key")
    return Change(kind, line, index, driver=driver, pool=pool, device=device, taint=(key, value, effect))


def _check_name(value, what, fail):
    if len(value) > 253 or not _NAME.match(value):
        fail(f"{what} {value!r} is not a valid object name")


def parse_changes(lines):
    """The Changes of a scenario's lines (blank lines skipped); at most MAX_CHANGES."""
    texts = [t for t in (lines or []) if isinstance(t, str) and t.strip()] if isinstance(lines, list) else None
    if texts is None:
        raise ScenarioError(0, str(lines), "changes must be a list of lines")
    if len(texts) > MAX_CHANGES:
        raise ScenarioError(MAX_CHANGES, texts[MAX_CHANGES], f"at most {MAX_CHANGES} changes")
    return [parse_change(t, i) for i, t in enumerate(texts)]


# -- request shapes for headroom -------------------------------------------------------------------

_SHAPE = re.compile(r"^(?P<count>\d+)\s*[x×]\s*(?P<cls>\S+)$")


def parse_shape(text, index=0):
    """`COUNT x CLASS` (e.g. `8 x gpu.nvidia.com`): one claim asking for COUNT devices of the class,
    all on one node. Returns (text, claim spec)."""
    m = _SHAPE.match(" ".join(str(text).split()))
    if m is None:
        raise ScenarioError(index, str(text), "expected `COUNT x CLASS`, e.g. `8 x gpu.nvidia.com`", "shapes")
    count, cls = int(m["count"]), m["cls"]
    if not 1 <= count <= MAX_SHAPE_COUNT:
        raise ScenarioError(index, text, f"COUNT must be from 1 to {MAX_SHAPE_COUNT}", "shapes")
    if not _NAME.match(cls):
        raise ScenarioError(index, text, f"class {cls!r} is not a valid object name", "shapes")
    spec = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": cls, "count": count}}]}}
    return f"{count} x {cls}", spec


def parse_shapes(lines):
    texts = [t for t in (lines or []) if isinstance(t, str) and t.strip()]
    if len(texts) > MAX_SHAPES:
        raise ScenarioError(MAX_SHAPES, texts[MAX_SHAPES], f"at most {MAX_SHAPES} shapes", "shapes")
    return [parse_shape(t, i) for i, t in enumerate(texts)]


# -- applying changes ------------------------------------------------------------------------------


@dataclass
class Applied:
    """A changed inventory and what the changes touched. `affected`: names of the nodes whose verdicts
    may differ (None: every node, e.g. a device on a pool several nodes see was freed); `classes`:
    DeviceClasses whose selectors changed; `claims`: (namespace, name) of claims that changed."""

    inventory: object
    affected: set | None = field(default_factory=set)
    classes: set = field(default_factory=set)
    claims: set = field(default_factory=set)
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)
    displaced: list = field(default_factory=list)  # {"namespace", "name", "node", "why"}
    notes: list = field(default_factory=list)

    def touch(self, nodes):
        if self.affected is not None:
            if nodes is None:
                self.affected = None
            else:
                self.affected.update(nodes)


def apply(inventory, changes, node_objects):
    """Apply `changes` (Changes, in order) to a copy of `inventory`. `node_objects`: {name: raw Node}
    for the nodes the changes name (the Inventory keeps only what its filters read of a node; a
    clone or a cordon needs the whole object). Unknown nodes, claims or classes raise ScenarioError."""
    nodes = dict(node_objects)
    out = Applied(inventory)
    for change in changes:
        upserts, removals = _change(out, change, nodes)
        out.inventory = out.inventory.with_changes(upserts, removals)
    return out


def _change(out, change, nodes):
    inv = out.inventory

    def fail(message):
        raise ScenarioError(change.index, change.text, message)

    if change.kind in ("add", "remove", "drain", "cordon", "uncordon"):
        if change.node not in inv.nodes:
            fail(f"unknown node {change.node!r}")
        if change.node not in nodes:
            fail(f"the Node object of {change.node!r} is not available")
    if change.kind == "add":
        return _clone(out, change, nodes)
    if change.kind == "remove":
        return _evict(out, change.node, nodes, remove=True)
    if change.kind == "drain":
        return _evict(out, change.node, nodes, remove=False)
    if change.kind in ("cordon", "uncordon"):
        raw = _cordoned(nodes[change.node], change.kind == "cordon")
        nodes[change.node] = raw
        out.touch({change.node})
        return {"nodes": [raw]}, {}
    if change.kind in ("release", "delete"):
        key = (change.namespace, change.name)
        raw = inv.claims.get(key)
        if raw is None:
            fail(f"unknown claim {change.namespace}/{change.name}")
        allocation = (raw.get("status") or {}).get("allocation")
        if change.kind == "release" and not allocation:
            fail(f"claim {change.namespace}/{change.name} is not allocated: nothing to release")
        out.claims.add(key)
        out.touch(_nodes_of_results(inv, allocation))
        for ref in (raw.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods":
                out.displaced.append(
                    {
                        "namespace": change.namespace,
                        "name": ref.get("name") or "",
                        "node": _pinned(allocation),
                        "why": change.kind,
                    }
                )
        if change.kind == "delete":
            return {}, {"resource_claims": [key]}
        return {"resource_claims": [_deallocated(raw)]}, {}
    if change.kind == "class":
        cls = inv.classes.get(change.name)
        if cls is None:
            fail(f"unknown DeviceClass {change.name!r}")
        raw = copy.deepcopy(cls.raw)
        raw.setdefault("spec", {})["selectors"] = [{"cel": {"expression": change.expression}}]
        out.classes.add(change.name)
        return {"device_classes": [raw]}, {}
    return _taint(out, change)


def _clone(out, change, nodes):
    inv, source = out.inventory, change.node
    slices = [s.raw for s in inv.slices if s.node_name == source]
    if not slices:
        out.notes.append(f"{source} publishes no node-local ResourceSlices: its clones add no devices")
    new_nodes, new_slices = [], []
    taken = set(inv.nodes)
    serial = 0
    for _ in range(change.count):
        serial += 1
        while f"{source}-whatif-{serial}" in taken:
            serial += 1
        name = f"{source}-whatif-{serial}"
        taken.add(name)
        raw = clone_node(nodes[source], name)
        nodes[name] = raw
        new_nodes.append(raw)
        new_slices.extend(clone_slice(s, source, name) for s in slices)
        out.added.append(name)
    out.touch(set(out.added))
    return {"nodes": new_nodes, "resource_slices": new_slices}, {}


def _renamed(value, source, name):
    return value.replace(source, name) if isinstance(value, str) and source in value else value


def clone_node(raw, name):
    """A new Node like `raw`, named `name`: its labels (hostname and any value naming the source
    renamed), taints and allocatable; it joins Ready and schedulable, without the taints the node
    lifecycle controller sets from a node's state (node.kubernetes.io/*)."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    source = meta.get("name") or ""
    labels = {k: (name if v == source else v) for k, v in (meta.get("labels") or {}).items()}
    new_spec = {k: v for k, v in spec.items() if k not in ("unschedulable", "providerID", "podCIDR", "podCIDRs")}
    taints = [
        t for t in spec.get("taints") or [] if not str((t or {}).get("key", "")).startswith(LIFECYCLE_TAINT_PREFIX)
    ]
    if taints:
        new_spec["taints"] = copy.deepcopy(taints)
    else:
        new_spec.pop("taints", None)
    new_status = {k: copy.deepcopy(status[k]) for k in ("allocatable", "capacity", "nodeInfo") if k in status}
    new_status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {"gpudash.io/what-if-clone-of": source}},
        "spec": new_spec,
        "status": new_status,
    }


def clone_slice(raw, source, name):
    """The slice a driver would publish on the new node: named after it, its pool renamed (a pool
    named after the node gets the new node's name; another gets the node's name appended, as pools
    must not repeat across nodes), device names and string attributes that name the source renamed,
    and each `uuid` attribute made unique."""
    new = json.loads(json.dumps(raw))  # a deep copy: several times faster than copy.deepcopy here
    meta, spec = new.setdefault("metadata", {}), new.setdefault("spec", {})
    old_name = meta.get("name") or "slice"
    new["metadata"] = {"name": old_name.replace(source, name) if source in old_name else f"{old_name}-{name}"}
    spec["nodeName"] = name
    pool = spec.setdefault("pool", {})
    pool_name = str(pool.get("name") or "")
    pool["name"] = pool_name.replace(source, name) if source in pool_name else f"{pool_name}-{name}"
    for dev in spec.get("devices") or []:
        if not isinstance(dev, dict):
            continue
        dev["name"] = _renamed(dev.get("name"), source, name)
        attrs = dev.get("attributes")
        if isinstance(attrs, dict):
            for key, value in attrs.items():
                if not isinstance(value, dict) or "string" not in value:
                    continue
                text = value["string"]
                if key == "uuid" or key.endswith("/uuid"):
                    attrs[key] = {"string": f"{text}-{name}"}
                elif isinstance(text, str) and source in text:
                    attrs[key] = {"string": text.replace(source, name)}
    return new


def _cordoned(raw, on):
    new = copy.deepcopy(raw)
    spec = new.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if (t or {}).get("key") != UNSCHEDULABLE_TAINT["key"]]
    if on:
        spec["unschedulable"] = True
        taints.append(dict(UNSCHEDULABLE_TAINT))  # what the node lifecycle controller adds to a cordoned node
    else:
        spec.pop("unschedulable", None)
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    return new


def _deallocated(raw):
    new = dict(raw)
    status = dict(new.get("status") or {})
    status.pop("allocation", None)
    status.pop("reservedFor", None)
    status.pop("devices", None)
    new["status"] = status
    return new


def _pinned(allocation):
    for term in ((allocation or {}).get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for expr in (term.get("matchFields") or []) + (term.get("matchExpressions") or []):
            if expr.get("key") in ("metadata.name", "kubernetes.io/hostname") and len(expr.get("values") or []) == 1:
                return expr["values"][0]
    return ""


def _pool_nodes(inv, pool_key):
    """The nodes that see `pool_key`: its one node for a node-local pool, else None (any node may)."""
    nodes = {s.node_name for s in inv.by_pool.get(pool_key, ())}
    if len(nodes) == 1 and "" not in nodes:
        return nodes
    return None


def _nodes_of_results(inv, allocation):
    """The nodes whose views an allocation's devices are part of (None: possibly every node)."""
    out = set()
    for r in ((allocation or {}).get("devices") or {}).get("results") or []:
        nodes = _pool_nodes(inv, (r.get("driver") or "", r.get("pool") or ""))
        if nodes is None:
            return None
        out |= nodes
    return out


def _claims_on(inv, node):
    """(key, raw) of the claims allocated to devices of `node`'s pools, or pinned to it."""
    pools = {s.pool_key for s in inv.slices if s.node_name == node}
    for key, raw in inv.claims.items():
        allocation = (raw.get("status") or {}).get("allocation")
        if not allocation:
            continue
        results = (allocation.get("devices") or {}).get("results") or []
        if _pinned(allocation) == node or any((r.get("driver"), r.get("pool")) in pools for r in results):
            yield key, raw


def _evict(out, node, nodes, remove):
    """`remove NODE` (remove=True) or `drain NODE`: the node's pods go (their places lost), claims
    allocated there are deallocated (a claim made for its pod from a template is deleted with it)."""
    inv = out.inventory
    upserts, removals = {"resource_claims": []}, {"resource_claims": [], "pod_footprints": []}
    pods_here = {key for key, fp in inv.pod_footprints.items() if fp.get("node") == node}
    pods_here |= {key for key, raw in inv.pods.items() if ((raw.get("spec") or {}).get("nodeName") or "") == node}
    dra_pods = set()
    for key, raw in list(_claims_on(inv, node)):
        out.claims.add(key)
        out.touch(_nodes_of_results(inv, (raw.get("status") or {}).get("allocation")))
        for ref in (raw.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods":
                dra_pods.add((key[0], ref.get("name") or ""))
        owner = any(
            r.get("kind") == "Pod" and r.get("controller")
            for r in (raw.get("metadata") or {}).get("ownerReferences") or []
        )
        if owner:
            removals["resource_claims"].append(key)
        else:
            upserts["resource_claims"].append(_deallocated(raw))
    why = "removed" if remove else "drained"
    for ns, name in sorted(pods_here | dra_pods):
        out.displaced.append({"namespace": ns, "name": name, "node": node, "why": why, "dra": (ns, name) in dra_pods})
    removals["pod_footprints"] = sorted(pods_here)
    out.touch({node})
    if remove:
        removals["nodes"] = [node]
        removals["resource_slices"] = [s.name for s in inv.slices if s.node_name == node]
        out.removed.append(node)
        nodes.pop(node, None)
    else:
        raw = _cordoned(nodes[node], True)
        nodes[node] = raw
        upserts["nodes"] = [raw]
    return upserts, removals


def _taint(out, change):
    inv = out.inventory
    key, value, effect = change.taint
    selector = {"driver": change.driver}
    if change.pool:
        selector["pool"] = change.pool
    if change.device:
        selector["device"] = change.device
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"whatif-taint-{change.index + 1}"},
        "spec": {"deviceSelector": selector, "taint": taint},
    }
    if not inv.features.device_taint_rules:
        out.notes.append(
            f"change {change.index + 1}: the cluster's DeviceTaintRule feature is off, so a rule taints nothing"
        )
    if change.pool:
        pool_nodes = _pool_nodes(inv, (change.driver, change.pool))
        if pool_nodes is not None and not inv.by_pool.get((change.driver, change.pool)):
            pool_nodes = set()
        out.touch(pool_nodes)
    else:
        out.touch(None)
    if effect == "NoExecute":
        out.notes.append(
            f"change {change.index + 1}: NoExecute also evicts the pods of claims holding these devices "
            "(unless a claim tolerates the taint); their devices stay allocated until the claims are released"
        )
    # The inventory applies rule taints to its devices in place, and a copy shares its devices with
    # the original: the slices the rule may select are stored again, so that the copy's devices
    # that get the taint are its own and the live inventory keeps its taints.
    fresh = [
        s.raw
        for s in inv.slices
        if inv.features.device_taint_rules and s.driver == change.driver and (not change.pool or s.pool == change.pool)
    ]
    return {"device_taint_rules": [rule], "resource_slices": fresh}, {}


# -- evaluating the pending pods and claims ---------------------------------------------------------


@dataclass
class Workload:
    """A pending pod (its raw Pod) or a pending claim no pending pod uses (its raw ResourceClaim)."""

    kind: str  # "pod" | "claim"
    namespace: str
    name: str
    raw: dict


class _Resolved:
    __slots__ = ("claims", "bound", "pod", "key", "classes", "claim_keys", "error")


def _resolve(inv, work):
    r = _Resolved()
    r.error = None
    try:
        if work.kind == "pod":
            claims, bound = resolve_claims(inv, [work.raw])
            pod = SchedulingPod.from_pod(work.raw)
        else:
            spec_only = {k: v for k, v in work.raw.items() if k != "status"}
            claims, bound = resolve_claims(inv, [spec_only])
            pod = SchedulingPod.would_be()
    except InputError as exc:
        r.error = str(exc)
        r.key = ("error", r.error)
        r.claims, r.bound, r.pod, r.classes, r.claim_keys = [], [], None, set(), set()
        return r
    r.claims, r.bound, r.pod = claims, bound, pod
    r.classes = set()
    for c in claims:
        r.classes.update(v.class_name for req in c.requests for v in req.variants)
    r.claim_keys = {(c.namespace, c.name) for c in claims} | {tuple(ref.split("/", 1)) for ref, _ in bound}
    r.key = _shape_key(inv, claims, bound, pod, work)
    return r


def _shape_key(inv, claims, bound, pod, work):
    """What the engine's verdicts for this workload depend on: equal keys, equal verdicts on every
    node. The claims' specs (their namespaces only where admin access reads the namespace's label),
    the bound claims' node selectors, the pod's filter inputs and its containers' resources (the
    extended-resource claim is rebuilt from them per node)."""
    spec = work.raw.get("spec") or {} if work.kind == "pod" else {}
    containers = [
        (c or {}).get("resources") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
    ]
    described = pod.describe()
    described.pop("pod", None)
    return json.dumps(
        [
            [[c.namespace if c.uses_admin_access else "", claim_inputs(c)] for c in claims],
            [[ref, sel] for ref, sel in bound],  # an allocated claim must be usable where the pod goes
            described,
            pod.node_name,
            pod.not_simulated,
            pod.hypothetical,
            containers,
        ],
        sort_keys=True,
        default=str,
    )


def _fits(shared, resolved, nodes):
    """fleet.Fits of the workload on `nodes` (None: all): the engine's preview of it, its work
    shared with the other workloads (fleet.SharedFits). A workload whose claims did not resolve
    fits nowhere, with that error."""
    if resolved.error:
        return Fits(frozenset(), resolved.error, False, frozenset())
    if nodes is not None and not nodes:
        return Fits(frozenset(), None, False, frozenset())
    return shared.fits(resolved.claims, bound=resolved.bound, pod=resolved.pod, nodes=nodes)


def _own(shared, resolved, nodes, known):
    """`known`, the answer of a workload with equal inputs, for this one: an error's text names the
    workload's own claims, so where there is one it is worked out again (a rare case)."""
    if known.error is None or resolved.error:
        return known
    return _fits(shared, resolved, nodes)


# Verdicts of the unchanged inventory, per inventory object and shape: a second scenario on the same
# live inventory (an admin trying one change after another) runs only what its changes touched. The
# live inventory is replaced, never changed, when the sync moves on: its entry then goes with it.
_BEFORE = weakref.WeakKeyDictionary()
_BEFORE_LOCK = threading.Lock()
_BEFORE_KEEP = 2000  # shapes remembered per inventory


def _before_cache(inv):
    with _BEFORE_LOCK:
        cache = _BEFORE.get(inv)
        if cache is None:
            cache = _BEFORE[inv] = {}
        return cache


def _after(shared, resolved, known, applied):
    """fleet.Fits after the changes, from `known` (before) on the nodes the changes did not touch and
    a run on those they did."""
    after = applied.inventory
    touched = sorted(n for n in applied.affected if n in after.nodes)
    ran = _fits(shared, resolved, touched)
    kept = frozenset(n for n in known.nodes if n not in applied.affected and n in after.nodes)
    erring = frozenset(n for n in known.erring if n not in applied.affected and n in after.nodes)
    untouched = len(after.node_names) - len(touched)
    if after.node_names and not kept and not ran.nodes and len(erring) == untouched and len(ran.erring) == len(touched):
        # Every node fails with an error (a removed node may have been the one that did not): the
        # answer is the first node's error, its text worked out on the whole fleet.
        return _fits(shared, resolved, None)
    return Fits(kept | ran.nodes, None, ran.undecided, erring | ran.erring)


@collector_paused()  # thousands of short-lived objects per workload, no cycles (gcpause.py)
def evaluate(before, applied, workloads, deadline=None, examples=5):
    """The verdict of every workload (Workload) before and after `applied` (Applied, from `before`).

    Each pending pod or claim is placed alone, as the scheduler would place it next. Workloads with
    equal inputs (_shape_key) share one answer; the others share what the engine found per node
    (fleet.SharedFits: filter verdicts per set of pod filter inputs, DynamicResources verdicts per
    set of claims), each answer still the one a preview of that workload alone gives. After the
    changes only the nodes they touched are run again, unless the workload's own claims or classes
    changed, or the changes reach every node (a freed device on a pool many nodes see, a taint rule
    over a whole driver): then all nodes.
    """
    after = applied.inventory
    added = set(applied.added)
    before_runs, after_runs = _before_cache(before), {}
    shared_before, shared_after = SharedFits(before, deadline), SharedFits(after, deadline)
    # A workload's claims resolve from the inventory's claims, templates (never changed) and classes.
    same_claims = not applied.claims and not applied.classes
    out = []
    for work in workloads:
        if deadline is not None and deadline.expired():
            out.append(
                _entry(work, UNDECIDED, None, None, added, examples, note="the deadline passed before it was checked")
            )
            continue
        b = _resolve(before, work)
        a = b if same_claims else _resolve(after, work)
        known = before_runs.get(b.key)
        if known is None:
            known = _fits(shared_before, b, None)
            # An answer cut short by the deadline is not kept.
            if not known.undecided and len(before_runs) < _BEFORE_KEEP:
                before_runs[b.key] = known
        else:
            known = _own(shared_before, b, None, known)
        fb, eb, ub = known.nodes, known.error, known.undecided
        whole = bool(
            applied.affected is None
            or a.key != b.key
            or (a.classes & applied.classes)
            or (a.claim_keys & applied.claims)
            or eb is not None
        )
        run_key = (a.key, whole)
        if run_key not in after_runs:
            after_runs[run_key] = _after(shared_after, a, known, applied) if not whole else _fits(shared_after, a, None)
            fits_after = after_runs[run_key]
        else:
            fits_after = _own(shared_after, a, None, after_runs[run_key])
        fa, ea, ua = fits_after.nodes, fits_after.error, fits_after.undecided
        if ub or ua:
            verdict = UNDECIDED
        elif a.error and not fa:
            verdict = ERROR
        elif fa:
            verdict = STILL_SCHEDULABLE if fb else NOW_SCHEDULABLE
        else:
            verdict = LOSES_PLACE if fb else STILL_BLOCKED
        out.append(_entry(work, verdict, (fb, eb), (fa, ea or a.error), added, examples))
    return out


def _entry(work, verdict, before, after, added, examples, note=None):
    def side(pair):
        if pair is None:
            return None
        fits, error = pair
        ordered = sorted(fits, key=lambda n: (n not in added, n))
        return {"fits": len(fits), "nodes": ordered[:examples], "error": error}

    entry = {
        "kind": work.kind,
        "namespace": work.namespace,
        "name": work.name,
        "verdict": verdict,
        "before": side(before),
        "after": side(after),
    }
    if after is not None:
        entry["onNewNodes"] = sorted(n for n in after[0] if n in added)[:examples]
    if note:
        entry["note"] = note
    return entry


def headroom_of(before, applied, shapes, deadline=None):
    """Headroom (copies that fit, greedy) of each shape ((text, claim spec), parse_shape) before and
    after the changes."""
    from .model import ClaimSpec

    out = []
    for text, spec in shapes:
        claims = [ClaimSpec("default", "what-if-shape", spec, "ResourceClaim")]
        row = {"shape": text}
        for label, inv in (("before", before), ("after", applied.inventory)):
            try:
                room = headroom(inv, claims, deadline=deadline)
                row[label] = {
                    "copies": room["copies"],
                    "byNodePool": room["byNodePool"],
                    "byDeviceModel": room["byDeviceModel"],
                    "deadlineReached": room["deadlineReached"],
                }
            except AllocationError as exc:
                row[label] = {"error": str(exc)}
        out.append(row)
    return out


def _pools_on(inventory, nodes):
    """(driver, pool) keys of the pools with a slice local to one of `nodes`."""
    return {key for key, slices in inventory.by_pool.items() if any(s.node_name in nodes for s in slices)}


def capacity_of(before, applied):
    """Whole-GPU and partition capacity (dra.partitions) of the pools on the nodes the changes touch,
    before and after: {"nodes", "before", "after"}, each side {"gpus", "gpusFree", "stranded",
    "profiles": {profile: creatable}}; None where a change reaches every node (counting every pool
    again would cost what a sync's full rebuild does). Untouched pools are the same on both sides, so
    the difference between the sides is the changes' effect on the fleet's capacity."""
    if applied.affected is None:
        return None
    nodes = set(applied.affected)

    def side(inv):
        totals = {"gpus": 0, "gpusFree": 0, "stranded": 0, "profiles": {}}
        for groups in partitions.capacity(inv, sorted(_pools_on(inv, nodes))).values():
            for group in groups.values():
                totals["gpus"] += group.gpus
                totals["gpusFree"] += group.gpus_free
                totals["stranded"] += group.stranded
                for profile, count in group.profiles.items():
                    totals["profiles"][profile] = totals["profiles"].get(profile, 0) + count.free
        return totals

    return {"nodes": sorted(nodes), "before": side(before), "after": side(applied.inventory)}


COUNTED = (NOW_SCHEDULABLE, STILL_BLOCKED, LOSES_PLACE, STILL_SCHEDULABLE, ERROR, UNDECIDED)


def summary(entries, applied):
    counts = dict.fromkeys(COUNTED, 0)
    for e in entries:
        counts[e["verdict"]] += 1
    return {
        "workloads": len(entries),
        "verdicts": counts,
        "addedNodes": list(applied.added),
        "removedNodes": list(applied.removed),
        "displaced": len(applied.displaced),
        "affectedNodes": None if applied.affected is None else len(applied.affected),
        "notes": list(applied.notes),
    }
