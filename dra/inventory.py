"""The cluster state a preview runs against, indexed once and reused across previews.

A published Inventory is never changed in place: `with_changes` (incremental.py) returns an updated
copy that shares everything the changes did not touch. Per-node views
(which pools a node sees, in the scheduler's order) and per-(device, selector) CEL results are
computed lazily and cached on it, so the first preview pays for CEL and later ones are cheap.
"""

from collections import defaultdict

from .allocated import AllocatedState
from .errors import InputError
from .features import Features
from .incremental import IncrementalMixin
from .model import ADMIN_ACCESS_LABEL, DeviceClassInfo, Slice
from .nodefilters import EMPTY_USAGE, FOOTPRINT_KIND, NodeFacts, NodeUsage, counts_on_node, pod_footprint
from .shapes import mirrored_problem

IMPLICIT_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"

KIND_ALIASES = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "Pod": "pods",
    "Node": "nodes",
    "DeviceTaintRule": "devicetaintrules",
    "Namespace": "namespaces",
}


class PoolCounters:
    """Shared counters of one pool generation, minus what allocated devices consume (brief 2.10)."""

    __slots__ = ("label", "available", "overcommitted")

    def __init__(self, label, sets, devices, state):
        self.label = label
        self.available = {}
        for name, counters in sets:
            self.available.setdefault(name, dict(counters))
        for dev in devices:
            if dev.has_counters and state.is_allocated(dev.key):  # each allocated device counts once
                for set_name, counters in dev.consumes:
                    avail = self.available.get(set_name)
                    if avail is None:
                        continue  # unknown set: the pool is invalid anyway
                    for cname, amount in counters.items():
                        if cname in avail:
                            avail[cname] -= amount
        self.overcommitted = any(v < 0 for c in self.available.values() for v in c.values())


class PoolView:
    """One pool as seen from one node: complete/invalid, its devices in scheduler order."""

    __slots__ = (
        "driver",
        "name",
        "key",
        "generation",
        "devices",
        "off_node",
        "complete",
        "invalid",
        "has_binding",
        "counters",
        "slice_count",
        "expected",
        "match_cache",
        "funnel_cache",
    )

    def __init__(
        self,
        key,
        generation,
        devices,
        complete,
        invalid,
        has_binding,
        counters,
        slice_count,
        expected,
        off_node=frozenset(),
    ):
        self.key, self.driver, self.name = key, key[0], key[1]
        self.generation = generation
        self.devices = devices
        # Devices of perDeviceNodeSelection slices that do not run on this node: upstream still
        # evaluates their selectors (a CEL error there is an error) and only then rejects them.
        self.off_node = off_node
        self.complete, self.invalid = complete, invalid
        self.has_binding = has_binding
        self.counters = counters
        self.slice_count, self.expected = slice_count, expected
        self.match_cache = {}
        self.funnel_cache = {}  # explain.py: per request shape and state token, the pool's share of a funnel

    @property
    def label(self):
        return f"{self.driver}/{self.name}"

    @property
    def usable(self):
        return self.complete and not self.invalid


class NodeView:
    """The pools one node sees (brief 2.2), and caches of candidates per selector chain."""

    __slots__ = ("name", "labels", "pools", "usable", "invalid", "incomplete", "candidates", "kept")

    def __init__(self, name, labels, pools, extra_invalid, extra_incomplete):
        self.name, self.labels = name, labels
        self.pools = pools
        self.usable = [p for p in pools if p.usable]
        self.invalid = [p for p in pools if p.complete and p.invalid] + extra_invalid
        self.incomplete = [p for p in pools if not p.complete] + extra_incomplete
        self.candidates = {}
        self.kept = {}  # direct answers of single-request plans (search.KeptAnswer), bounded


class Inventory(IncrementalMixin):
    """Raw objects of one cluster, indexed for allocation previews (kept current by incremental.py)."""

    def __init__(
        self,
        *,
        device_classes=(),
        resource_slices=(),
        resource_claims=(),
        resource_claim_templates=(),
        pods=(),
        nodes=(),
        device_taint_rules=(),
        namespaces=(),
        features=None,
        pod_footprints=None,
        plain_devices=None,
    ):
        """`plain_devices`: ids of the raw device dicts (of `resource_slices`, alive during this call)
        whose every attribute and capacity value the caller found plain with projection.plain_value:
        those devices are known not to be odd (projection.device_is_odd) without checking again.
        Passing it also says that the rows went through live_inventory.share_device_values, which makes
        equal counter maps one object: the build then parses each of them once."""
        self.features = features or Features()
        self.problems = []  # objects that could not be used, with why (never dropped silently)
        (
            device_classes,
            resource_slices,
            resource_claims,
            resource_claim_templates,
            pods,
            nodes,
            device_taint_rules,
            namespaces,
        ) = (
            self._well_formed(kind, objects)
            for kind, objects in (
                ("device_classes", device_classes),
                ("resource_slices", resource_slices),
                ("resource_claims", resource_claims),
                ("resource_claim_templates", resource_claim_templates),
                ("pods", pods),
                ("nodes", nodes),
                ("device_taint_rules", device_taint_rules),
                ("namespaces", namespaces),
            )
        )
        self.classes = {}
        for raw in device_classes:
            cls = DeviceClassInfo(raw)
            self.classes[cls.name] = cls
        self.slices = []
        # Parsed counter maps of this build's slices (model.parsed_counters), when the caller made equal
        # maps one object (the live inventory, which also passes plain_devices): elsewhere each map is
        # its own, and the memo would only keep a parse of every one.
        counter_memo = {} if plain_devices is not None else None
        for raw in resource_slices:
            try:
                self.slices.append(Slice(raw, plain_devices, counter_memo))
            except Exception as exc:  # malformed slice: report it, keep going
                self.problems.append(f"ResourceSlice {((raw or {}).get('metadata') or {}).get('name')}: {exc}")
        self.nodes = {}
        self.node_facts = {}  # name -> NodeFacts (taints, cordon, allocatable) for the node filters
        for raw in nodes:
            self._index_node(raw)
        self.node_names = sorted(self.nodes)
        self.namespaces = {
            (r.get("metadata") or {}).get("name"): (r.get("metadata") or {}).get("labels") or {} for r in namespaces
        }
        self.claims = {}
        self.templates = {}
        self.state = AllocatedState(shares=self.features.consumable_capacity)
        for raw in resource_claims:
            meta = raw.get("metadata") or {}
            self.claims[(meta.get("namespace") or "", meta.get("name") or "")] = raw
            try:
                self.state.add_claim(raw)
            except Exception as exc:
                self.problems.append(f"ResourceClaim {meta.get('namespace')}/{meta.get('name')}: bad allocation: {exc}")
        for raw in resource_claim_templates:
            meta = raw.get("metadata") or {}
            self.templates[(meta.get("namespace") or "", meta.get("name") or "")] = raw
        self.pods = {
            ((r.get("metadata") or {}).get("namespace") or "", (r.get("metadata") or {}).get("name") or ""): r
            for r in pods
        }
        self._index_footprints(pods, pod_footprints)
        self.taint_rules = list(device_taint_rules)
        self._index_slices()
        self._views = {}
        self._pool_views = {}
        self._pool_counters = {}
        self._counter_validity = {}
        self._counter_only = None
        self.devices_by_key = {}
        for s in self.slices:
            for d in s.devices:
                self.devices_by_key.setdefault(d.key, d)
                if plain_devices and id(d.raw) in plain_devices:
                    d._odd = False  # what projection._compute_odd finds for such a device
        if self.features.device_taint_rules and self.taint_rules:
            self._apply_taint_rules()

    def _well_formed(self, kind, objects):
        """The objects of `kind` whose shape the indexing can read (shapes.mirrored_problem); each other
        one becomes a problem and is left out."""
        good = []
        for raw in objects:
            problem = mirrored_problem(kind, raw)
            if problem is None:
                good.append(raw)
            else:
                self.problems.append(problem)
        return good

    def _index_node(self, raw):
        """One Node's part of the inventory (also the live inventory's upsert_node: keep both in one place)."""
        meta = raw.get("metadata") or {}
        if meta.get("name"):
            self.nodes[meta["name"]] = meta.get("labels") or {}
            self.node_facts[meta["name"]] = NodeFacts(raw)

    # -- what bound pods take from their nodes (NodeResourcesFit, NodePorts) -----------------------

    def _index_footprints(self, pods, footprints):
        """`footprints` (dicts of nodefilters.pod_footprint, e.g. the mirror's rows for every pod) when
        given, else the raw `pods`. Per node: the non-terminal pods bound to it, summed."""
        self.pod_footprints = {}
        self.node_usage = {}
        self.pods_known = footprints is not None or bool(pods)
        for item in footprints if footprints is not None else pods:
            self.upsert_pod(item)

    def upsert_pod(self, pod):
        """Store or replace one pod: a raw Pod or its footprint (nodefilters.pod_footprint). Replaces,
        never mutates, the NodeUsage objects (a published Inventory is shared with preview threads)."""
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if pod.get("kind") == FOOTPRINT_KIND:
            fp = pod
        else:
            self.pods[key] = pod
            try:
                fp = pod_footprint(pod)
            except InputError as exc:
                self.problems.append(f"Pod {key[0]}/{key[1]}: {exc}; its requests are not counted on its node")
                fp = dict(
                    pod_footprint({"metadata": meta, "status": pod.get("status") or {}}),
                    node=((pod.get("spec") or {}).get("nodeName") or ""),
                )
        self._drop_footprint(key)
        if counts_on_node(fp):
            self.pod_footprints[key] = fp
            usage = self.node_usage.get(fp["node"])
            self.node_usage[fp["node"]] = usage.plus(fp) if usage else NodeUsage().plus(fp)

    def remove_pod(self, namespace, name):
        self.pods.pop((namespace, name), None)
        self._drop_footprint((namespace, name))

    def _drop_footprint(self, key):
        old = self.pod_footprints.pop(key, None)
        if old is not None and old["node"] in self.node_usage:
            self.node_usage[old["node"]] = self.node_usage[old["node"]].minus(old)

    def pod_node(self, namespace, name):
        """The node a known pod is bound to ("" if none): its node's usage changes with it."""
        fp = self.pod_footprints.get((namespace, name))
        return fp["node"] if fp else ((self.pods.get((namespace, name)) or {}).get("spec") or {}).get("nodeName") or ""

    def usage_of(self, node):
        return self.node_usage.get(node) or EMPTY_USAGE

    def dra_extended_resources(self):
        """{extended resource name: device class}: explicit `extendedResourceName`s and the implicit
        deviceclass.resource.kubernetes.io/<class> names (DRAExtendedResource, beta, on)."""
        out = {}
        for name in sorted(self.classes):
            ext = (self.classes[name].raw.get("spec") or {}).get("extendedResourceName")
            if ext:
                out.setdefault(ext, name)
            out.setdefault(IMPLICIT_CLASS_PREFIX + name, name)
        return out

    # -- construction helpers ------------------------------------------------------------------

    @classmethod
    def from_objects(cls, objects, features=None):
        """From {plural: [raw, ...]} (as devcluster.fleet produces) or a flat list of raw objects."""
        if isinstance(objects, dict):
            grouped = {k.lower(): list(v or []) for k, v in objects.items()}
        else:
            grouped = defaultdict(list)
            for raw in objects:
                grouped[KIND_ALIASES.get((raw or {}).get("kind"), "")].append(raw)
        return cls(
            device_classes=grouped.get("deviceclasses", ()),
            resource_slices=grouped.get("resourceslices", ()),
            resource_claims=grouped.get("resourceclaims", ()),
            resource_claim_templates=grouped.get("resourceclaimtemplates", ()),
            pods=grouped.get("pods", ()),
            nodes=grouped.get("nodes", ()),
            device_taint_rules=grouped.get("devicetaintrules", ()),
            namespaces=grouped.get("namespaces", ()),
            features=features,
        )

    def _index_slices(self):
        self.by_pool = defaultdict(list)
        self.local = defaultdict(list)
        self.nonlocal_slices = []
        self.counter_slices = defaultdict(list)
        for s in self.slices:
            self.by_pool[s.pool_key].append(s)
            if s.counter_sets:
                self.counter_slices[s.pool_key].append(s)
            elif s.node_name:
                self.local[s.node_name].append(s)
            else:
                self.nonlocal_slices.append(s)

    def _apply_taint_rules(self):
        from .taintrules import apply_rules

        problems = apply_rules(self.taint_rules, self.classes, self.devices_by_key.values())
        for name, text in problems.items():
            if "_problem_of" in self.__dict__:  # an incremental update: keyed, replaced per rule
                self._problem("DeviceTaintRule", name, text)
            else:
                self.problems.append(text)

    # -- queries -------------------------------------------------------------------------------

    def admin_access_allowed(self, namespace):
        """None when namespaces are unknown (no Namespace objects), else whether the label allows it."""
        if not self.namespaces:
            return None
        return (self.namespaces.get(namespace) or {}).get(ADMIN_ACCESS_LABEL) == "true"

    def device_class(self, name):
        return self.classes.get(name)

    def node(self, name):
        """The pools node `name` sees, computed once (brief 2.2)."""
        view = self._views.get(name)
        if view is None:
            view = self._views[name] = self._build_node_view(name)
        return view

    def _build_node_view(self, node):
        labels = self.nodes.get(node, {})
        feats = self.features
        groups = defaultdict(list)
        for s in self.local.get(node, ()):
            groups[s.pool_key].append(s)
        for s in self.nonlocal_slices:
            if s.per_device and not feats.partitionable_devices:
                continue  # the field is unknown to a scheduler without the feature: no node selection
            if s.relevant_for(node, labels, feats):
                groups[s.pool_key].append(s)
        pools = []
        # Counter slices are always relevant, unless the scheduler does not know them (feature off).
        counter_slices = self.counter_slices if feats.partitionable_devices else {}
        for key, relevant in groups.items():
            relevant = relevant + counter_slices.get(key, [])
            view = self._pool_view(key, relevant, node, labels)
            if view is not None:
                pools.append(view)
        # Pools ordered by (driver, pool); pools with binding conditions after the others (the
        # incubating allocator does this whether or not the binding-conditions gate is on).
        pools.sort(key=lambda p: (p.has_binding, p.key))
        # Only the broken ones matter (All-mode errors, "invalid pools" failures): usually none.
        extra_invalid = [
            v for k, v in self._counter_only_pools().items() if k not in groups and v.complete and v.invalid
        ]
        extra_incomplete = [v for k, v in self._counter_only_pools().items() if k not in groups and not v.complete]
        return NodeView(node, labels, pools, extra_invalid, extra_incomplete)

    def _counter_only_pools(self, deadline=None):
        """Broken pools seen by a node only through their counter slices (the same for every such node).

        The first node view pays for checking every counter pool of the fleet (seconds on a big
        one): with a `deadline` (deadline.Deadline) it raises deadline.TimedOut when that passes and
        the next call goes on from where this one stopped (progress kept per counter-slice index).
        """
        if self._counter_only is None:
            progress = self.__dict__.get("_counter_only_progress")
            if progress is None or progress[0] is not self.counter_slices:
                progress = self._counter_only_progress = (self.counter_slices, {})
            done = progress[1]
            for key, slices in (self.counter_slices if self.features.partitionable_devices else {}).items():
                if key in done:
                    continue
                if deadline is not None and deadline.expired():
                    from .deadline import TimedOut

                    raise TimedOut(whole_request=True)
                view = self._pool_view(key, list(slices), None, {})
                done[key] = view if view is not None and (not view.complete or view.invalid) else None
            self._counter_only = {k: v for k, v in done.items() if v is not None}
            self._counter_only_progress = None
        return self._counter_only

    def _pool_view(self, key, relevant, node, labels):
        gen = max(s.generation for s in relevant)
        kept = [s for s in relevant if s.generation == gen]
        expected = kept[0].count
        if len(kept) == expected:
            complete = True
        else:
            everywhere = self.by_pool[key]
            if any(s.generation > gen for s in everywhere):
                return None  # obsolete: a newer generation exists elsewhere
            complete = sum(1 for s in everywhere if s.generation == gen) == expected
        kept.sort(key=lambda s: s.name)
        per_device = any(s.per_device for s in kept)
        cache_key = (key, tuple(id(s) for s in kept), node if per_device else None)
        view = self._pool_views.get(cache_key)
        if view is not None:
            return view
        device_slices = [s for s in kept if not s.counter_sets]
        devices = []
        off_node = set()
        invalid = None
        if complete:
            seen = set()
            for s in device_slices:
                for d in s.devices:
                    if d.name in seen and invalid is None:
                        invalid = f"duplicate device name {d.name}"
                    seen.add(d.name)
            invalid = invalid or self._counter_problem(key, gen)
        for s in device_slices:
            for d in s.devices:
                if s.per_device and not d.runs_on(node, labels):
                    off_node.add(d.key)
                devices.append(d)
        counters = self._counters(key, gen) if complete and not invalid else None
        # Upstream sorts only complete, valid pools by binding conditions (broken ones carry no devices).
        has_binding = complete and not invalid and any(d.binding_conditions for d in devices)
        view = PoolView(
            key, gen, tuple(devices), complete, invalid, has_binding, counters, len(kept), expected, frozenset(off_node)
        )
        self._pool_views[cache_key] = view
        return view

    def _counter_problem(self, key, gen):
        """Counter-set problems that make a complete pool invalid (brief 2.2 step 5)."""
        cache_key = (key, gen)
        if cache_key not in self._counter_validity:
            problem = None
            sets = {}  # counter set name -> its counter names
            for s in self.by_pool[key]:
                if s.generation != gen:
                    continue
                for name, counters in s.counter_sets:
                    if name in sets:
                        problem = problem or f"duplicate counter set {name}"
                    sets[name] = counters.keys()
            if problem is None:
                for s in self.by_pool[key]:
                    if s.generation != gen:
                        continue
                    for d in s.devices:
                        if not d.has_counters:
                            continue
                        try:
                            consumes = d.counter_names()  # names only: no amounts parsed for every device
                        except Exception as exc:
                            problem = f"device {d.name}: {exc}"
                            break
                        for set_name, counters in consumes:
                            known = sets.get(set_name)
                            if known is None:
                                problem = f"device {d.name} consumes unknown counter set {set_name}"
                                break
                            if counters <= known:  # key views compare as sets: the usual case, no set built
                                continue
                            missing = sorted(set(counters) - set(known))
                            if missing:
                                problem = f"device {d.name} consumes unknown counter {missing[0]} of set {set_name}"
                                break
                        if problem:
                            break
                    if problem:
                        break
            self._counter_validity[cache_key] = problem
        return self._counter_validity[cache_key]

    def _counters(self, key, gen):
        cache_key = (key, gen)
        pc = self._pool_counters.get(cache_key)
        if pc is None:
            slices = [s for s in self.by_pool[key] if s.generation == gen]
            sets = [cs for s in slices for cs in s.counter_sets]
            devices = [d for s in slices for d in s.devices]
            pc = self._pool_counters[cache_key] = PoolCounters(f"{key[0]}/{key[1]}", sets, devices, self.state)
        return pc
