"""Keeping an Inventory current from single-object changes (the live preview inventory).

A published Inventory is read by many preview threads at once, so it is never changed in place:
`with_changes` makes a shallow copy, applies upserts and removals to the copy, and drops only the
cached views the changed objects fed. Parsed slices and devices (with their per-selector CEL
results), and the node and pool views nothing changed under, are shared with the previous copy.

Mixed into Inventory (dra/inventory.py); kept apart because the rules of what depends on
what are its own subject.
"""

from collections import defaultdict

from .allocated import AllocatedState
from .model import DeviceClassInfo, Slice, device_taints
from .shapes import KIND_NAMES as _TAG
from .shapes import mirrored_problem, readable_names

# Inventory keyword -> how objects of that kind are keyed.
NAMESPACED = {"resource_claims", "resource_claim_templates", "pods", "pod_footprints"}
KINDS = (
    "device_classes",
    "resource_slices",
    "resource_claims",
    "resource_claim_templates",
    "pods",
    "pod_footprints",
    "nodes",
    "device_taint_rules",
    "namespaces",
)


def object_key(kind, raw):
    if kind == "pod_footprints":  # nodefilters.pod_footprint documents: flat, no metadata
        return ((raw or {}).get("namespace") or "", (raw or {}).get("name") or "")
    meta = (raw or {}).get("metadata") or {}
    name = meta.get("name") or ""
    return (meta.get("namespace") or "", name) if kind in NAMESPACED else name


def _copied(value):
    if isinstance(value, defaultdict):
        return defaultdict(value.default_factory, value)  # one C-level copy: atomic for other threads
    return type(value)(value)


class IncrementalMixin:
    # Containers that upsert/remove methods change; copy() copies them (one level) so the published
    # Inventory never sees the change. Inner lists/dicts are replaced, never mutated, by those methods.
    # Add here any container a new upsert/remove method changes.
    _COPIED = (
        "classes",
        "nodes",
        "namespaces",
        "claims",
        "templates",
        "pods",
        "slices",
        "by_pool",
        "local",
        "counter_slices",
        "devices_by_key",
        "_views",
        "_pool_views",
        "_pool_counters",
        "_counter_validity",
        "node_facts",
        "pod_footprints",
        "node_usage",  # node filters (inventory.py upsert_pod/remove_pod)
    )

    # -- copy-on-write -------------------------------------------------------------------------

    def copy(self):
        """A private copy to apply changes to; shares every parsed object and cached view."""
        self._ensure_live_indexes()
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        for name in self._COPIED + ("_slice_by_name", "_problem_of"):
            if name in self.__dict__:
                new.__dict__[name] = _copied(self.__dict__[name])
        new.state = _copy_state(self.state)
        new._pending = {
            "pools": set(),
            "nodes": set(),
            "label_nodes": set(),
            "slices": [],
            "keys": set(),
            "holders": set(),
            "retaint": False,
            "rules_changed": False,
            "views_all": False,
            "node_names": False,
        }
        return new

    def with_changes(self, upserts=None, removals=None):
        """A new Inventory: this one with `upserts` ({kind: [raw, ...]}) stored (replacing objects of the
        same key) and `removals` ({kind: [key, ...]}; key = name, or (namespace, name)) gone.
        Kinds are the constructor's keywords (resource_slices, resource_claims, nodes, ...)."""
        new = self.copy()
        for kind in KINDS:
            for key in (removals or {}).get(kind, ()):
                new.remove(kind, key)
            for raw in (upserts or {}).get(kind, ()):
                new.upsert(kind, raw)
        new.settle()
        return new

    def upsert(self, kind, raw):
        problem = mirrored_problem(kind, raw)
        if problem is not None:  # as the constructor: left out, with the problem named (in place of the old version)
            if readable_names(raw) is not None:
                key = object_key(kind, raw)
                self.remove(kind, key)
                self._problem(_TAG[kind], key, problem)
            else:  # no key to file it under: kept until the next build
                self._problem("Unreadable", problem, problem)
            return
        if self._problem_of and kind in _TAG:
            self._problem(_TAG[kind], object_key(kind, raw), None)  # an earlier malformed version's problem goes
        if kind in ("pods", "pod_footprints"):  # the node the pod was and is bound to: its view (resource fit) changes
            key = object_key(kind, raw)
            self._pending["nodes"].add(self._pod_node(key))
            self.upsert_pod(raw)
            self._pending["nodes"].add(self._pod_node(key))
            return
        getattr(self, "upsert_" + _SINGULAR[kind])(raw)

    def remove(self, kind, key):
        if kind in ("pods", "pod_footprints"):
            self._pending["nodes"].add(self._pod_node(key))
        if kind in NAMESPACED:
            getattr(self, "remove_" + _SINGULAR[kind])(*key)
        else:
            getattr(self, "remove_" + _SINGULAR[kind])(key)

    def _ensure_live_indexes(self):
        """Indexes the constructor does not keep: slices by name, problems by object."""
        if "_slice_by_name" not in self.__dict__:
            self._slice_by_name = {s.name: s for s in self.slices}
        if "_problem_of" not in self.__dict__:
            # Problems the constructor found, kept as they are (their objects are not known by key);
            # problems of objects changed later are tracked by key.
            self._problem_of = {("~", i): p for i, p in enumerate(self.problems)}

    def _problem(self, tag, key, message):
        stale = [
            k
            for k, text in self._problem_of.items()
            if k == (tag, key) or (k[0] == "~" and text.startswith(_problem_prefix(tag, key)))
        ]
        for k in stale:
            del self._problem_of[k]
        if message:
            self._problem_of[(tag, key)] = message

    # -- slices --------------------------------------------------------------------------------

    def upsert_slice(self, raw):
        name = object_key("resource_slices", raw)
        self.remove_slice(name)
        try:
            s = Slice(raw)
        except Exception as exc:  # malformed slice: report it, keep going (as the constructor does)
            self._problem("ResourceSlice", name, f"ResourceSlice {name}: {exc}")
            return
        self._slice_by_name[s.name] = s
        self._index_one_slice(s, add=True)

    def remove_slice(self, name):
        self._problem("ResourceSlice", name, None)
        s = self._slice_by_name.pop(name, None)
        if s is not None:
            self._index_one_slice(s, add=False)

    def _index_one_slice(self, s, add):
        key = s.pool_key
        self.by_pool[key] = _with(self.by_pool.get(key, ()), s, add)
        if not self.by_pool[key]:
            del self.by_pool[key]
        if s.counter_sets:
            self.counter_slices[key] = _with(self.counter_slices.get(key, ()), s, add)
            if not self.counter_slices[key]:
                del self.counter_slices[key]
        elif s.node_name:
            self.local[s.node_name] = _with(self.local.get(s.node_name, ()), s, add)
            if not self.local[s.node_name]:
                del self.local[s.node_name]
        else:
            self.nonlocal_slices = _with(self.nonlocal_slices, s, add)
        p = self._pending
        p["pools"].add(key)
        p["slices"].append(s)
        p["retaint"] = True

    # -- claims --------------------------------------------------------------------------------

    def upsert_claim(self, raw):
        key = object_key("resource_claims", raw)
        self.remove_claim(*key)
        self.claims[key] = raw
        self._pending["keys"].update(_result_keys(raw))
        self._pending["holders"].add(key)

    def remove_claim(self, namespace, name):
        key = (namespace, name)
        old = self.claims.pop(key, None)
        self._problem("ResourceClaim", key, None)
        if old is not None:
            self._pending["keys"].update(_result_keys(old))

    # -- the rest ------------------------------------------------------------------------------

    def upsert_class(self, raw):
        cls = DeviceClassInfo(raw)
        self.classes[cls.name] = cls
        self._pending["views_all"] = True  # cached candidates are keyed by class name
        self._pending["retaint"] = True  # rules may select devices by class

    def remove_class(self, name):
        if self.classes.pop(name, None) is not None:
            self._pending["views_all"] = self._pending["retaint"] = True

    def upsert_node(self, raw):
        name = object_key("nodes", raw)
        self.remove_node(name)
        self._index_node(raw)
        self._node_changed(name)

    def remove_node(self, name):
        if self.nodes.pop(name, None) is not None:
            getattr(self, "node_facts", {}).pop(name, None)
            self._node_changed(name)

    def _node_changed(self, name):
        self._pending["nodes"].add(name)
        self._pending["label_nodes"].add(name)
        self._pending["node_names"] = True

    def upsert_template(self, raw):
        self.templates[object_key("resource_claim_templates", raw)] = raw

    def remove_template(self, namespace, name):
        self.templates.pop((namespace, name), None)

    def upsert_namespace(self, raw):
        meta = raw.get("metadata") or {}
        self.namespaces[meta.get("name")] = meta.get("labels") or {}

    def remove_namespace(self, name):
        self.namespaces.pop(name, None)

    def upsert_taint_rule(self, raw):
        name = object_key("device_taint_rules", raw)
        rules = [r for r in self.taint_rules if object_key("device_taint_rules", r) != name] + [raw]
        self.taint_rules = sorted(
            rules, key=lambda r: object_key("device_taint_rules", r)
        )  # in name order, as the rows
        self._pending["retaint"] = self._pending["rules_changed"] = True

    def remove_taint_rule(self, name):
        self.taint_rules = [r for r in self.taint_rules if object_key("device_taint_rules", r) != name]
        self._pending["retaint"] = self._pending["rules_changed"] = True

    def _pod_node(self, key):
        if hasattr(self, "pod_node"):  # the node filters know where footprint-only pods are
            return self.pod_node(*key)
        raw = self.pods.get(key)
        return ((raw or {}).get("spec") or {}).get("nodeName") or ""

    # Defaults; an Inventory that keeps per-node pod footprints (node resource fit) overrides both.
    def upsert_pod(self, raw):
        self.pods[object_key("pods", raw)] = raw

    def remove_pod(self, namespace, name):
        self.pods.pop((namespace, name), None)

    # -- after a set of changes ----------------------------------------------------------------

    def settle(self):
        """Recompute what the changes feed (allocated state, device index, taints) and drop the cached
        views they made stale. Call once after the upserts/removals of one update."""
        p = self._pending
        if p["slices"]:
            self.slices = sorted(self._slice_by_name.values(), key=lambda s: s.name)
            # The constructor fills these in slice-name order, and some explanations list pools in
            # that order: keep it (each list is in name order, so its first slice decides).
            for name in ("by_pool", "local", "counter_slices"):
                index = getattr(self, name)
                setattr(self, name, defaultdict(list, sorted(index.items(), key=lambda item: item[1][0].name)))
            self._reindex_devices(p["pools"])
        if p["keys"] or p["holders"]:
            self._restate(p["keys"], p["holders"])
            # Counters of a pool subtract what allocated devices consume: its views change with them.
            p["pools"].update(k[:2] for k in p["keys"] if k[:2] in self.counter_slices)
        if p["retaint"] and self.features.device_taint_rules and (self.taint_rules or p["rules_changed"]):
            self._retaint()
        if p["node_names"]:
            self.node_names = sorted(self.nodes)
        self._drop_stale_views()
        self.problems = [text for _, text in sorted(self._problem_of.items(), key=_problem_order)]
        del self._pending

    def _reindex_devices(self, pools):
        for key in [k for k in self.devices_by_key if k[:2] in pools]:
            del self.devices_by_key[key]
        for pool in pools:
            for s in self.by_pool.get(pool, ()):  # name order, as the constructor's slice order
                for d in s.devices:
                    self.devices_by_key.setdefault(d.key, d)

    def _restate(self, keys, holders):
        """Recompute the allocated state of device `keys` from the claims that hold them now."""
        state = self.state
        refs = set(holders)
        for key in keys:
            for ref in state.owners.get(key, ()):
                ns, _, name = ref.partition("/")
                refs.add((ns, name))
            state.dedicated.discard(key)
            state.shared.discard(key)
            state.capacity.pop(key, None)
            state.owners.pop(key, None)
        state.share_ids = {s for s in state.share_ids if s[:3] not in keys}
        state.changed({key[:2] for key in keys})
        fresh = AllocatedState(shares=state.shares)
        for ref in sorted(refs):
            raw = self.claims.get(ref)
            if raw is None:
                continue
            try:
                fresh.add_claim(raw)
                self._problem("ResourceClaim", ref, None)
            except Exception as exc:
                self._problem("ResourceClaim", ref, f"ResourceClaim {ref[0]}/{ref[1]}: bad allocation: {exc}")
        for key in keys:
            if key in fresh.dedicated:
                state.dedicated.add(key)
            if key in fresh.shared:
                state.shared.add(key)
            if key in fresh.capacity:
                state.capacity[key] = fresh.capacity[key]
            if key in fresh.owners:
                state.owners[key] = fresh.owners[key]
        state.share_ids |= {s for s in fresh.share_ids if s[:3] in keys}

    def _retaint(self):
        """Rule taints over every device again (only where DeviceTaintRules exist). Devices are shared
        with the previous copy, so a preview running on it meanwhile may already see the new rule
        taints: accepted for a rare, admin-made change (the alternative is re-parsing every slice)."""
        rules = self.taint_rules
        self.state.changed_all()  # explanations cached per pool state count taints too
        for dev in self.devices_by_key.values():
            dev.taints = device_taints(dev.raw)
        _delete(self._problem_of, [k for k in self._problem_of if k[0] == "DeviceTaintRule"])  # re-reported below
        if rules:
            self._apply_taint_rules()

    def _drop_stale_views(self):
        p = self._pending
        pools, nodes = p["pools"], set(p["nodes"])
        _delete(self._pool_counters, [k for k in self._pool_counters if k[0] in pools])
        _delete(self._counter_validity, [k for k in self._counter_validity if k[0] in pools])
        if p["views_all"]:
            self._views, self._pool_views, self._counter_only = {}, {}, None
            return
        all_nodes = False
        # Nodes that saw (or now see) a changed pool: through the changed slices, and through the
        # pool's other slices (a removed newer generation makes an older one visible again).
        for s in p["slices"] + [s for pool in pools for s in self.by_pool.get(pool, ())]:
            where = _nodes_of(s)
            if where is None:
                all_nodes = True
                break
            nodes |= where
        label_nodes = p["label_nodes"]
        # The caches are private copies already (copy()): delete the stale keys in place.
        _delete(self._pool_views, [k for k in self._pool_views if k[0] in pools or k[2] in label_nodes])
        if self._counter_only is not None and any(k in self.counter_slices or k in self._counter_only for k in pools):
            before = self._counter_only
            self._counter_only = self._counter_only_updated(pools)
            if _broken(self._counter_only) != _broken(before):
                all_nodes = True  # every node lists the pools broken through their counters
        if all_nodes:
            self._views = {}
            return
        # A node sees a pool in its groups only through one of the pool's slices (gathered above), and
        # through the counter-only list (any change there dropped every view): nothing else to scan.
        _delete(self._views, [name for name in nodes if name in self._views])

    def _counter_only_updated(self, pools):
        """_counter_only_pools (inventory.py) with only `pools` recomputed, in counter_slices order."""
        out = {k: v for k, v in self._counter_only.items() if k not in pools}
        counter_slices = self.counter_slices if self.features.partitionable_devices else {}
        for key in pools:
            if key in counter_slices:
                view = self._pool_view(key, list(counter_slices[key]), None, {})
                if view is not None and (not view.complete or view.invalid):
                    out[key] = view
        return {k: out[k] for k in counter_slices if k in out}


_SINGULAR = {
    "device_classes": "class",
    "resource_slices": "slice",
    "resource_claims": "claim",
    "resource_claim_templates": "template",
    "pods": "pod",
    "nodes": "node",
    "device_taint_rules": "taint_rule",
    "namespaces": "namespace",
    "pod_footprints": "pod",  # what every pod takes from its node (inventory.py upsert_pod/remove_pod)
}
_TAG_ORDER = {"~": 0, "ResourceSlice": 1, "ResourceClaim": 2}


def _problem_prefix(tag, key):
    return f"{tag} {key[0]}/{key[1]}:" if isinstance(key, tuple) else f"{tag} {key}:"


def _problem_order(item):
    (tag, key), _ = item
    return (_TAG_ORDER.get(tag, 9), tag, key if isinstance(key, tuple) else (key,))


def _with(seq, s, add):
    """`seq` (slices in name order) with `s` added or removed, as a new tuple."""
    rest = [x for x in seq if x is not s and x.name != s.name]
    if add:
        rest.append(s)
        rest.sort(key=lambda x: x.name)
    return rest


def _nodes_of(s):
    """Names of the nodes slice `s` can be relevant to, or None for "any node"."""
    if s.counter_sets:
        return set()  # seen only through the pool's other slices (or the counter-only list)
    if s.node_name:
        return {s.node_name}
    if s.per_device and not s.all_nodes and not s.node_selector:
        names = set()
        for d in s.devices:
            if not d.node_name:
                return None
            names.add(d.node_name)
        return names
    return None


def _delete(mapping, keys):
    for key in keys:
        del mapping[key]


def _broken(counter_only):
    return {k: (v.complete, v.invalid, id(v)) for k, v in counter_only.items()}


def _result_keys(raw):
    allocation = ((raw or {}).get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return {(r.get("driver") or "", r.get("pool") or "", r.get("device") or "") for r in results if isinstance(r, dict)}


def _copy_state(state):
    new = AllocatedState.__new__(AllocatedState)
    new.__dict__.update(state.__dict__)
    new.dedicated = set(state.dedicated)
    new.shared = set(state.shared)
    new.share_ids = set(state.share_ids)
    new.capacity = _copied(state.capacity)
    new.owners = _copied(state.owners)
    new.pool_tokens = dict(state.pool_tokens)
    return new
