"""What would make a pending pod (or claim) fit: the smallest changes, each checked by the engine.

For each candidate change the inventory (or the claim, or the pod) is changed in a copy, the engine
runs again on the nodes the change can affect, and only the changes under which the pod fits are
offered, with where it would land (node and devices, from that run) and who is affected. Nothing is
applied to the cluster: gpudash links to its own dry-run flows where it can act (releasing a stuck
claim), and says what an admin would do elsewhere.

A change is JSON-ready data ({"op": ...}); `apply` makes the changed (inventory, claims, pod) from it,
so the same function serves the search, the tests and anyone who wants to see the changed preview.
Ranked by disruption: waiting, then releasing what nobody uses, then node repairs, then changing the
request, then evicting pods, then tolerating taints, then adding capacity. No Django here.
"""

import copy

from .deadline import Deadline
from .errors import AllocationError, InputError
from .fleet import preview
from .model import ClaimSpec
from .nodefilters import NOT_READY_KEY, UNREACHABLE_KEY, UNSCHEDULABLE_TAINT, NodeFacts, parse_tolerations

RANK = {
    "wait-deleting": 0,
    "release-stuck": 1,
    "uncordon": 2,
    "recover-node": 2,
    "reduce-count": 3,
    "drop-selectors": 3,
    "drop-constraints": 3,
    "other-class": 3,
    "first-available": 3,
    "preempt": 4,
    "tolerate-node-taint": 5,
    "tolerate-device-taint": 5,
    "add-node": 6,
}
KINDS = tuple(RANK)
MAX_PER_KIND = 3  # node-local remedies offered per kind (the best few)
MAX_TRIES = 8  # engine runs per kind at most: the most promising candidates first
MAX_CLASSES = 2  # alternative classes tried
COPY_SUFFIX = "-copy"

RISKS = {
    "tolerate-node-taint": "the pod would run on a node its owners reserved for other work (the taint says why)",
    "tolerate-device-taint": "the devices are tainted because the driver or an admin found them unhealthy or reserved: "
    "the pod may get a failing device",
    "preempt": "the evicted pods are stopped and rescheduled (their work since the last checkpoint is lost)",
}


# -- applying a change ----------------------------------------------------------------------------


def apply(inventory, claims, pod, change):
    """(inventory, claims, pod) with `change` made, in copies; the originals stay as they are."""
    op = change["op"]
    if op == "remove-claims":
        keys = [tuple(ref.split("/", 1)) for ref in change["claims"]]
        pods = [tuple(ref.split("/", 1)) for ref in change.get("pods", ())]
        return (
            inventory.with_changes(removals={"resource_claims": keys, "pods": pods}),
            claims,
            pod,
        )
    if op == "node":
        new = inventory.copy()
        new.node_facts[change["node"]] = _repaired(
            inventory.node_facts[change["node"]], change.get("uncordon"), change.get("recover")
        )
        new.settle()
        return new, claims, pod
    if op == "add-node":
        return _with_node_like(inventory, change["like"], change["name"]), claims, pod
    if op in ("count", "drop-selectors", "class", "tolerate-device", "first-available", "drop-constraints"):
        return inventory, [_changed_claim(c, change) if c.ref == change["claim"] else c for c in claims], pod
    if op == "tolerate-node":
        return inventory, claims, _tolerating(pod, change["tolerations"])
    raise ValueError(f"unknown change {op!r}")


def _repaired(facts, uncordon, recover):
    new = object.__new__(NodeFacts)
    for slot in NodeFacts.__slots__:
        setattr(new, slot, getattr(facts, slot))
    if uncordon:
        new.unschedulable = False
        new.taints = [t for t in new.taints if t.get("key") != UNSCHEDULABLE_TAINT["key"]]
    if recover:
        new.ready = True
        new.taints = [t for t in new.taints if t.get("key") not in (NOT_READY_KEY, UNREACHABLE_KEY)]
    return new


def _with_node_like(inventory, like, name):
    """The inventory plus an empty node `name` cloned from `like`: its labels, allocatable and taints
    (less NotReady and cordon, a new node is Ready), and its node-local slices under pools of its own."""
    new = inventory.copy()
    facts = _repaired(inventory.node_facts[like], True, True)
    labels = dict(inventory.nodes[like])
    if "kubernetes.io/hostname" in labels:
        labels["kubernetes.io/hostname"] = name
    facts.name, facts.labels = name, labels
    new.nodes[name] = labels
    new.node_facts[name] = facts
    new._node_changed(name)
    for s in inventory.slices:
        if s.node_name == like:
            new.upsert("resource_slices", _cloned_slice(s, like, name))
    new.settle()
    new.node_names = sorted(new.nodes)
    return new


def _changed_claim(claim, change):
    spec = copy.deepcopy(claim.spec)
    if change["op"] == "drop-constraints":
        spec["devices"].pop("constraints", None)
        return ClaimSpec(claim.namespace, claim.name, spec, claim.source)
    req = next(r for r in spec["devices"]["requests"] if r.get("name") == change["request"])
    op = change["op"]
    if op == "first-available":
        exactly = req.pop("exactly")
        alternative = dict(exactly, **change["alternative"])
        req["firstAvailable"] = [dict(exactly, name="asked"), dict(alternative, name="alternative")]
        return ClaimSpec(claim.namespace, claim.name, spec, claim.source)
    exactly = req["exactly"]
    if op == "count":
        exactly["count"] = change["count"]
        exactly["allocationMode"] = "ExactCount"
    elif op == "drop-selectors":
        exactly.pop("selectors", None)
    elif op == "class":
        exactly["deviceClassName"] = change["class"]
        exactly.pop("selectors", None)
    elif op == "tolerate-device":
        exactly["tolerations"] = list(exactly.get("tolerations") or []) + list(change["tolerations"])
    return ClaimSpec(claim.namespace, claim.name, spec, claim.source)


def _tolerating(pod, tolerations):
    new = copy.copy(pod)
    new.tolerations = list(pod.tolerations) + parse_tolerations(tolerations, "tolerations")
    new._checks = None
    return new


# -- one node's world ------------------------------------------------------------------------------


class LocalWorlds:
    """Small inventories holding exactly what one node's verdict reads: its Node (labels, taints,
    allocatable), the pods bound to it, every slice of every pool it sees (counter slices included),
    the claims allocated from those pools, the classes, DeviceTaintRules and namespaces. A change
    that touches only that node (a node repair, releasing claims whose devices are all on it, one
    more node like it) is checked there instead of on a copy of the whole fleet, which at 5,000 nodes
    costs tens of milliseconds per copy (test_remedies checks both give the same answer)."""

    def __init__(self, inventory):
        self.inv = inventory
        self._pods_by_node = None

    def _pods_of(self, node):
        if self._pods_by_node is None:  # one pass over the bound pods, for all worlds of one search
            by_node = {}
            for key, fp in self.inv.pod_footprints.items():
                by_node.setdefault(fp["node"], []).append((key, fp))
            self._pods_by_node = by_node
        return self._pods_by_node.get(node, ())

    def _claims_of(self, slices):
        """{(ns, name): raw} of the claims allocated from the devices of `slices` (AllocatedState.owners)."""
        owners = self.inv.state.owners
        out = {}
        for sl in slices:
            for d in sl.devices:
                for ref in owners.get(d.key, ()):
                    key = tuple(ref.split("/", 1))
                    if key not in out and key in self.inv.claims:
                        out[key] = self.inv.claims[key]
        return out

    def world(self, node, *, drop_claims=(), drop_pods=(), facts=None, clone_as=None):
        """The inventory of `node` with `drop_claims` / `drop_pods` ("ns/name") gone, its NodeFacts
        replaced by `facts`, or, with `clone_as`, an empty copy of it under that name (its node-local
        pools renamed, as _with_node_like names them)."""
        from .inventory import Inventory

        inv = self.inv
        view = inv.node(node)
        keys = {p.key for p in view.pools} | {p.key for p in view.invalid} | {p.key for p in view.incomplete}
        slices, seen = [], set()
        for key in sorted(keys):
            for sl in inv.by_pool.get(key, ()):
                if id(sl) not in seen:
                    seen.add(id(sl))
                    slices.append(sl)
        dropped = {tuple(r.split("/", 1)) for r in drop_claims}
        claims = {k: raw for k, raw in self._claims_of(slices).items() if k not in dropped}
        name = clone_as or node
        raw_slices = []
        for sl in slices:
            if clone_as and sl.node_name == node:
                raw_slices.append(_cloned_slice(sl, node, clone_as))
            else:
                raw_slices.append(sl.raw)
        if clone_as:  # the clone's own pools are new: no claim holds their devices
            claims = {k: raw for k, raw in claims.items() if not _holds_local(raw, inv, node)}
        gone = {tuple(r.split("/", 1)) for r in drop_pods}
        pods = [] if clone_as else [fp for key, fp in self._pods_of(node) if key not in gone]
        small = Inventory(
            device_classes=[c.raw for c in inv.classes.values()],
            resource_slices=raw_slices,
            resource_claims=list(claims.values()),
            device_taint_rules=inv.taint_rules,
            features=inv.features,
            pod_footprints=pods,
        )
        small.namespaces = inv.namespaces
        labels = dict(inv.nodes[node])
        if clone_as and "kubernetes.io/hostname" in labels:
            labels["kubernetes.io/hostname"] = clone_as
        small.nodes = {name: labels}
        node_facts = facts or inv.node_facts.get(node)
        if clone_as and node_facts is not None:
            node_facts = _repaired(node_facts, True, True)
            node_facts.name, node_facts.labels = clone_as, labels
        if node_facts is not None:
            small.node_facts = {name: node_facts}
        small.node_names = [name]
        return small


def _holds_local(raw, inv, node):
    for r in (((raw.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ():
        dev = inv.devices_by_key.get((r.get("driver") or "", r.get("pool") or "", r.get("device") or ""))
        if dev is not None and dev.slice.node_name == node:
            return True
    return False


def _cloned_slice(sl, like, name):
    raw = copy.deepcopy(sl.raw)
    raw["metadata"] = {"name": f"{sl.name}{COPY_SUFFIX}" if sl.name else f"{name}-slice"}
    raw["spec"]["nodeName"] = name
    pool = raw["spec"]["pool"]
    pool["name"] = pool["name"].replace(like, name) if like in pool["name"] else pool["name"] + COPY_SUFFIX
    return raw


# -- checking a change ----------------------------------------------------------------------------


def landing(inventory, claims, pod, change, *, bound=(), nodes=None, deadline=None, world=None):
    """[{"node", "devices": ["driver/pool/device", ...]}] where the pod fits once `change` is made
    (only `nodes`, when given: the nodes the change can affect). `world`: the changed inventory of
    the one node the change touches (LocalWorlds), used instead of applying it to the whole fleet."""
    if world is not None:
        inv, cl, p = world, claims, pod
    else:
        inv, cl, p = apply(inventory, claims, pod, change)
    names = [n for n in (nodes if nodes is not None else inv.node_names) if n in inv.nodes]
    if not names:
        return []
    out = preview(inv, cl, bound=bound, pod=p, nodes=names, explain_failures=False, deadline=deadline)
    return [
        {
            "node": e["node"],
            "devices": [f"{r['driver']}/{r['pool']}/{r['device']}" for r in e["results"]],
        }
        for e in out["nodes"]
        if e["fits"]
    ]


# -- searching --------------------------------------------------------------------------------------


def remedies(inventory, claims, pod, result, answer, *, bound=(), stuck=(), deadline=None):
    """The changes that make `claims` (for `pod`) fit, each verified by the engine, ranked by disruption.

    `result`: fleet.preview's answer for them (no node fits); `answer`: verdict.verdict's split of it.
    `stuck`: refs of claims the stuck detector holds stuck. `deadline` (seconds or a Deadline): the
    search stops there and offers what it has verified."""
    deadline = Deadline.of(deadline)
    if answer.get("fits") or answer.get("error") or not answer.get("requests"):
        return []
    search = _Search(inventory, claims, pod, result, answer, bound, set(stuck), deadline)
    search.run()
    return sorted(search.found, key=lambda r: (RANK[r["kind"]], r.get("order", 0)))


class _Search:
    def __init__(self, inventory, claims, pod, result, answer, bound, stuck, deadline):
        self.inv, self.claims, self.pod, self.result = inventory, claims, pod, result
        self.answer, self.bound, self.stuck, self.deadline = answer, bound, stuck, deadline
        self.found = []
        self.tried = set()
        self.worlds = LocalWorlds(inventory)
        items = answer["requests"]
        self.blocked = {}  # kind -> [node entries], over every blocking request
        for item in items:
            for kind, nodes in item["blocked"].items():
                self.blocked.setdefault(kind, []).extend(nodes)
        self.candidates = sorted(
            {n["node"] for item in items for nodes in item["blocked"].values() for n in nodes}
            | {n for item in items for n in item["serving"]}
        )

    def run(self):
        for step in (
            self.release,
            self.repair_nodes,
            self.relax_request,
            self.preempt,
            self.tolerate,
            self.add_capacity,
        ):
            if self.deadline.expired():
                return
            try:
                step()
            except (AllocationError, InputError):
                continue  # a changed request the API server would reject: not a remedy

    def offer(self, kind, change, nodes, world=None, **detail):
        """Check `change` (on `nodes`, or in the one-node `world`, a callable making it) and keep it if it works."""
        key = repr(sorted(change.items()))
        if key in self.tried or self.deadline.expired():
            return None
        self.tried.add(key)
        fits = landing(
            self.inv,
            self.claims,
            self.pod,
            change,
            bound=self.bound,
            nodes=nodes,
            deadline=self.deadline,
            world=world() if world is not None else None,
        )
        if not fits or self.deadline.expired():
            return None
        remedy = {"kind": kind, "change": change, "fits": fits, "order": len(self.found), **detail}
        if kind in RISKS:
            remedy["risk"] = RISKS[kind]
        self.found.append(remedy)
        return remedy

    def _count(self, kind):
        return sum(1 for r in self.found if r["kind"] == kind)

    # -- devices held by claims nobody should hold ----------------------------------------------

    def release(self):
        nodes = self.blocked.get("allocated", ())
        for kind, field in (("wait-deleting", "deleting"), ("release-stuck", "stuck")):
            # Only nodes where the freed devices could be enough, those with the most free first.
            hopeful = [n for n in nodes if n[field] and n["free"] + self._held(n[field], n["node"]) >= n["need"]]
            hopeful.sort(key=lambda n: (-(n["free"] + self._held(n[field], n["node"])), n["node"]))
            for node in hopeful[:MAX_TRIES]:
                if self._count(kind) >= MAX_PER_KIND:
                    break
                refs = list(node[field])
                self.offer(
                    kind,
                    {"op": "remove-claims", "claims": refs},
                    *self._where_released(refs, node["node"]),
                    claims=refs,
                    affects=self._consumers(refs),
                )

    def _where_released(self, refs, node, pods=()):
        """(nodes, world) to check releasing `refs` (and evicting `pods`): the node's own world when
        every device they hold is on it, else the nodes that see the devices on the whole fleet."""
        nodes = self._nodes_seeing(refs, node)
        if nodes == [node]:
            return None, lambda: self.worlds.world(node, drop_claims=refs, drop_pods=pods)
        return nodes, None

    def _held(self, refs, node):
        """How many devices of `node` the claims `refs` hold (a bound on what releasing them frees there)."""
        n = 0
        for ref in refs:
            raw = self.inv.claims.get(tuple(ref.split("/", 1))) or {}
            for r in (((raw.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                dev = self.inv.devices_by_key.get((r.get("driver") or "", r.get("pool") or "", r.get("device") or ""))
                if dev is not None and (dev.slice.node_name in ("", node)):
                    n += 1
        return n

    def _nodes_seeing(self, refs, node):
        """The nodes whose verdict a change to the devices of claims `refs` can change: their own
        nodes for node-local devices; every candidate node when a device is not node-local."""
        out = {node}
        for ref in refs:
            raw = self.inv.claims.get(tuple(ref.split("/", 1))) or {}
            for r in (((raw.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                dev = self.inv.devices_by_key.get((r.get("driver") or "", r.get("pool") or "", r.get("device") or ""))
                if dev is None:
                    continue
                if dev.slice.node_name:
                    out.add(dev.slice.node_name)
                else:
                    return list(self.candidates)
        return sorted(out)

    def _consumers(self, refs):
        out = []
        for ref in refs:
            raw = self.inv.claims.get(tuple(ref.split("/", 1))) or {}
            ns = ref.split("/", 1)[0]
            for c in (raw.get("status") or {}).get("reservedFor") or []:
                out.append(f"{ns}/{c.get('name')}")
        return out

    # -- nodes ------------------------------------------------------------------------------------

    def repair_nodes(self):
        for kind, field in (("cordoned", "uncordon"), ("not-ready", "recover")):
            remedy_kind = "uncordon" if field == "uncordon" else "recover-node"
            # A repaired node only helps where its devices would serve the request now.
            hopeful = sorted(
                (n for n in self.blocked.get(kind, ()) if n["free"] >= n["need"]), key=lambda n: (-n["free"], n["node"])
            )
            for node in hopeful[:MAX_TRIES]:
                if self._count(remedy_kind) >= MAX_PER_KIND:
                    break
                name = node["node"]
                facts = self.inv.node_facts[name]
                # A NotReady node that is also cordoned needs both: one remedy says so.
                change = {
                    "op": "node",
                    "node": name,
                    "uncordon": field == "uncordon" or facts.unschedulable,
                    "recover": field == "recover" or _not_ready(facts),
                }
                facts = _repaired(facts, change["uncordon"], change["recover"])
                self.offer(
                    remedy_kind,
                    change,
                    None,
                    world=lambda name=name, facts=facts: self.worlds.world(name, facts=facts),
                    node=name,
                    affects=[],
                )

    # -- the request --------------------------------------------------------------------------------

    def relax_request(self):
        claims_by_ref = {c.ref: c for c in self.claims}
        for claim in self.claims:
            # The constraint that blocks: how many nodes fit without the claim's constraints.
            items = [i for i in self.answer["requests"] if i["claim"] == claim.ref and "constraint" in i["blocked"]]
            if claim.constraints and items and isinstance(claim.spec, dict):
                r = self.offer(
                    "drop-constraints",
                    {"op": "drop-constraints", "claim": claim.ref},
                    sorted({n for i in items for n in self._device_nodes(i)}),
                    constraints=[c.raw for c in claim.constraints],
                    affects=[],
                )
                if r:
                    r["nodesFitting"] = len(r["fits"])
        for item in self.answer["requests"]:
            claim = claims_by_ref.get(item["claim"])
            if claim is None or not isinstance(claim.spec, dict):
                continue
            req = next((r for r in claim.requests if r.name == item["request"]), None)
            if req is None or req.prioritized:
                continue
            v = req.variants[0]
            base = {"claim": claim.ref, "request": req.name}
            if v.mode == "ExactCount" and v.count > 1:
                self._reduce_count(item, base, v)
            if v.selectors:
                r = self.offer(
                    "drop-selectors",
                    {"op": "drop-selectors", **base},
                    self._device_nodes(item),
                    selectors=[((s or {}).get("cel") or {}).get("expression") for s in v.selectors],
                    affects=[],
                )
                if r:
                    r["nodesFitting"] = len(r["fits"])
            self._other_classes(item, base, v)

    def _reduce_count(self, item, base, v):
        """The largest count that fits now: from the most free devices any candidate node has, down."""
        most_free = max((n.get("free", 0) for nodes in item["blocked"].values() for n in nodes), default=0)
        count = min(v.count - 1, max(most_free, 1))
        nodes = self._device_nodes(item)
        for c in range(count, 0, -1):
            if self.deadline.expired():
                return
            r = self.offer(
                "reduce-count", {"op": "count", **base, "count": c}, nodes, count=c, asked=v.count, affects=[]
            )
            if r:
                # The asked count fits nowhere, so the firstAvailable spelling fits exactly where the
                # smaller count does: only those nodes need the engine again (for its devices).
                alternative = {"count": c, "allocationMode": "ExactCount"}
                self.offer(
                    "first-available",
                    {"op": "first-available", **base, "alternative": alternative},
                    [f["node"] for f in r["fits"]],
                    alternative=alternative,
                    affects=[],
                )
                return
            if count - c >= 3:
                return  # a few tries: past that, fewer devices are seldom the answer

    def _other_classes(self, item, base, v):
        """Another DeviceClass of the same drivers whose devices are free somewhere (e.g. another model)."""
        cls = self.inv.classes.get(v.class_name)
        drivers = set(cls.drivers) if cls is not None and cls.drivers else set()
        if not drivers:
            return
        tried = 0
        for name in sorted(self.inv.classes):
            other = self.inv.classes[name]
            if name == v.class_name or not other.drivers or not set(other.drivers) <= drivers:
                continue
            if tried >= MAX_CLASSES or self.deadline.expired():
                return
            tried += 1
            self.offer("other-class", {"op": "class", **base, "class": name}, None, deviceClass=name, affects=[])

    def _device_nodes(self, item):
        """The nodes a change to the request can change: those with devices of its class that no
        permanent node filter excludes (class and filters do not change with a count or a selector)."""
        out = set(self.candidates)
        out.update(item["never"].get("selector", ()))
        return sorted(out)

    # -- pods ---------------------------------------------------------------------------------------

    def preempt(self):
        """Evict lower-priority pods whose claims hold the devices (the scheduler never does this for
        DRA: DynamicResources' rejections are unresolvable): their claims generated for them go with them."""
        if self.pod is None or self.pod.priority is None or self.pod.hypothetical:
            return
        tries = 0
        for node in sorted(self.blocked.get("allocated", ()), key=lambda n: (-n["free"], n["node"])):
            if self._count("preempt") >= MAX_PER_KIND or tries >= MAX_TRIES:
                return
            victims, claims = [], []
            for ref in node.get("owners") or ():
                for pod_key, generated in self._claim_consumers(ref):
                    fp = self.inv.pod_footprints.get(pod_key)
                    if fp is None or fp.get("priority") is None or fp["priority"] >= self.pod.priority:
                        continue
                    name = "/".join(pod_key)
                    if name not in victims:
                        victims.append(name)
                    if generated:
                        claims.append(ref)
            if victims and claims and node["free"] + self._held(claims, node["node"]) >= node["need"]:
                tries += 1
                self.offer(
                    "preempt",
                    {"op": "remove-claims", "claims": claims, "pods": victims},
                    *self._where_released(claims, node["node"], victims),
                    victims=victims,
                    claims=claims,
                    affects=victims,
                )

    def _claim_consumers(self, ref):
        """[((ns, pod), the claim was generated for that pod)] of claim `ref`, from its reservedFor and owner references."""
        ns, _, name = ref.partition("/")
        raw = self.inv.claims.get((ns, name)) or {}
        meta = raw.get("metadata") or {}
        owners = {o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"}
        return [
            ((ns, c["name"]), c.get("uid") in owners)
            for c in (raw.get("status") or {}).get("reservedFor") or []
            if c.get("resource", "pods") == "pods" and c.get("name")
        ]

    # -- taints -------------------------------------------------------------------------------------

    def tolerate(self):
        hopeful = [n for n in self.blocked.get("node-taint", ()) if n["free"] >= n["need"]]
        for node in hopeful[:MAX_TRIES]:
            if self._count("tolerate-node-taint") >= MAX_PER_KIND:
                break
            taints = [t for t in node.get("detail") or () if t.get("key")]
            if not taints or self.pod is None:
                continue
            tolerations = [
                {"key": t["key"], "operator": "Equal", "value": t.get("value") or "", "effect": t.get("effect")}
                for t in taints
            ]
            self.offer(
                "tolerate-node-taint",
                {"op": "tolerate-node", "tolerations": tolerations},
                [n["node"] for n in hopeful],
                node=node["node"],
                taints=taints,
                affects=[],
            )
        for item in self.answer["requests"]:
            for node in item["blocked"].get("device-taint", ())[:MAX_TRIES]:
                if self._count("tolerate-device-taint") >= MAX_PER_KIND:
                    break
                tolerations = [
                    {"key": t.get("key"), "operator": "Equal", "value": t.get("value") or "", "effect": t.get("effect")}
                    for t in node.get("taints") or ()
                ]
                if tolerations:
                    self.offer(
                        "tolerate-device-taint",
                        {
                            "op": "tolerate-device",
                            "claim": item["claim"],
                            "request": item["request"],
                            "tolerations": tolerations,
                        },
                        self._device_nodes(item),
                        taints=node.get("taints"),
                        affects=[],
                    )

    # -- capacity -----------------------------------------------------------------------------------

    def add_capacity(self):
        """One more node like the best candidate (enough matching devices, a node filter it passes)."""
        if any(RANK[r["kind"]] <= RANK["recover-node"] for r in self.found):
            return  # waiting, a release or a node repair works: buying a node is not the smallest change
        serving = [n for item in self.answer["requests"] for n in item["serving"]]
        if not serving:
            return
        blocked_by_filter = {
            n["node"] for kind in ("node-taint", "node-resources", "node-ports") for n in self.blocked.get(kind, ())
        }
        for like in [n for n in serving if n not in blocked_by_filter] + [n for n in serving if n in blocked_by_filter]:
            name = like + COPY_SUFFIX
            if name in self.inv.nodes:
                continue
            if self.offer(
                "add-node",
                {"op": "add-node", "like": like, "name": name},
                None,
                world=lambda like=like, name=name: self.worlds.world(like, clone_as=name),
                like=like,
                affects=[],
            ):
                return
            if self.deadline.expired():
                return


def _not_ready(facts):
    return facts.ready is False or any(t.get("key") in (NOT_READY_KEY, UNREACHABLE_KEY) for t in facts.taints)
