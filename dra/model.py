"""Parsed, read-only views of the raw Kubernetes JSON the allocator works on.

Objects are parsed once when an Inventory is built; anything costly (quantities, the CEL view of a
device) is computed lazily and cached on the object, because a fleet preview touches only the devices
that a request's class can match.
"""

import re
from collections import Counter
from functools import lru_cache

from .errors import InputError, shown
from .shapes import CLAIM_SPEC, check_shape

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
MAX_DEVICES_PER_CLAIM = 32  # AllocationResultsMaxSize
BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def repeated(values):
    """The values that occur more than once, sorted. One count per value: a pasted List may repeat
    one aliased claim thousands of times."""
    return sorted(value for value, times in Counter(values).items() if times > 1)


@lru_cache(maxsize=8192)
def quantity(text):
    """Parsed Kubernetes quantity (Fraction); values repeat a lot across a fleet, hence the cache."""
    from .quantity import parse_quantity

    return parse_quantity(str(text))


def _q(value):
    """An exact amount: int when integral (int arithmetic is much cheaper than Fraction's), else Fraction."""
    if isinstance(value, dict):  # {"value": "80Gi"} (capacity / counter form)
        value = value.get("value")
    if value is None:
        raise InputError("quantity missing")
    return _number(str(value))


@lru_cache(maxsize=8192)
def _number(text):
    q = quantity(text)
    return int(q) if q.denominator == 1 else q


_NO_TAINTS = ()


def device_taints(raw):
    """A device's own taints (spec.devices[].taints) as a tuple, the shared empty one when it has none."""
    taints = raw.get("taints")
    return tuple(taints) if taints else _NO_TAINTS


def parsed_counters(counters, memo=None):
    """{counter: quantity} of one consumesCounters or sharedCounters entry's `counters` map.

    The live inventory makes equal maps one object (claims/live_inventory.py: a MIG profile consumes
    the same 15 counters on every GPU of its model, 96,000 devices at 20,000 nodes with 3 distinct
    maps); `memo` (a dict kept by the slices of one build) then parses each such object once. Keyed
    by id() with the map itself kept in the entry, so an id is never reused while it is there. A map
    that does not parse raises every time, as without the memo."""
    if memo is None or type(counters) is not dict:
        return {n: _q(v) for n, v in counters.items()}
    hit = memo.get(id(counters))
    if hit is not None:
        return hit[1]
    parsed = {n: _q(v) for n, v in counters.items()}
    memo[id(counters)] = (counters, parsed)
    return parsed


@lru_cache(maxsize=4096)
def quantity_ok(text):
    """Whether `_q` accepts the text (cached: a fleet repeats a few amounts)."""
    try:
        _number(text)
        return True
    except Exception:
        return False


# ----------------------------------------------------------------------------------------------
# Node selection (core/v1 NodeSelector semantics, as used by slices and allocation results)


def node_selector_terms(selector):
    return (selector or {}).get("nodeSelectorTerms") or []


def _requirement_matches(req, values_of):
    key, op, values = req.get("key") or "", req.get("operator") or "", req.get("values") or []
    present, value = values_of(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        a, b = _go_int(value), _go_int(values[0])
        if a is None or b is None:
            return False
        return a > b if op == "Gt" else a < b
    return False


_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_INT64 = 1 << 63


def _go_int(text):
    """The label value as labels.Requirement reads Gt/Lt (strconv.ParseInt base 10, 64 bits), else None:
    no '_' separators, no spaces, nothing outside int64 (Python's int() takes all of those)."""
    if not isinstance(text, str) or not _GO_INT.match(text) or not text.isascii():
        return None
    n = int(text)
    return n if -_INT64 <= n < _INT64 else None


def term_matches(term, node_name, labels):
    """One NodeSelectorTerm: all requirements must hold; a term without requirements matches nothing."""
    exprs, field_exprs = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not field_exprs:
        return False

    def label_of(key):
        return (key in labels), labels.get(key)

    def field_of(key):
        return (True, node_name) if key == "metadata.name" else (False, None)

    return all(_requirement_matches(r, label_of) for r in exprs) and all(
        _requirement_matches(r, field_of) for r in field_exprs
    )


def node_selector_matches(selector, node_name, labels):
    return any(term_matches(t, node_name, labels) for t in node_selector_terms(selector))


_SET_REQUIREMENT = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text):
    """A label selector string (`app=x,tier!=db,env in (a,b),!legacy,gpu`) as node-selector style
    requirements [{key, operator, values}]; ValueError when it cannot be read."""
    parts, depth, current = [], 0, ""
    for ch in text or "":
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = _SET_REQUIREMENT.match(part)
        if m:
            values = [v.strip() for v in m.group(3).split(",") if v.strip()]
            out.append({"key": m.group(1), "operator": "In" if m.group(2) == "in" else "NotIn", "values": values})
        elif "!=" in part:
            key, _, value = part.partition("!=")
            out.append({"key": key.strip(), "operator": "NotIn", "values": [value.strip()]})
        elif "=" in part:
            key, _, value = part.replace("==", "=").partition("=")
            out.append({"key": key.strip(), "operator": "In", "values": [value.strip()]})
        elif part.startswith("!"):
            out.append({"key": part[1:].strip(), "operator": "DoesNotExist"})
        elif re.match(r"^[^\s()]+$", part):
            out.append({"key": part, "operator": "Exists"})
        else:
            raise ValueError(f"cannot read label selector part {shown(part)}")
    return out


def label_selector_matches(selector, labels):
    """Whether `labels` satisfy a label selector string (all requirements ANDed; empty matches all; one
    that cannot be read matches nothing, as the API server would refuse it)."""
    labels = labels or {}
    try:
        requirements = parse_label_selector(selector)
    except ValueError:
        return False
    return all(_requirement_matches(r, lambda key: (key in labels, labels.get(key))) for r in requirements)


# ----------------------------------------------------------------------------------------------
# Devices, slices, classes


class Device:
    """One device of a ResourceSlice; identity `key` = (driver, pool, name)."""

    __slots__ = (
        "driver",
        "pool",
        "name",
        "key",
        "slice",
        "raw",
        "attributes",
        "taints",
        "binds_to_node",
        "binding_conditions",
        "binding_failure_conditions",
        "multi",
        "node_name",
        "node_selector",
        "all_nodes",
        "sel_cache",
        "has_counters",
        "_capacity",
        "_consumes",
        "_cel",
        "_odd",
    )

    def __init__(self, slice_, raw):
        self.slice = slice_
        self.raw = raw
        self.driver, self.pool = slice_.driver, slice_.pool
        self.name = str(raw.get("name") or "")
        self.key = (self.driver, self.pool, self.name)
        self.attributes = raw.get("attributes") or {}
        # Tuples, one shared empty one for the many devices without: read-only here (a DeviceTaintRule's
        # taint replaces the tuple, taintrules.py); a list each would be 670,000 objects at 20,000 nodes.
        self.taints = device_taints(raw)
        self.binds_to_node = bool(raw.get("bindsToNode"))
        self.binding_conditions = tuple(raw.get("bindingConditions") or ())
        self.binding_failure_conditions = tuple(raw.get("bindingFailureConditions") or ())
        self.multi = bool(raw.get("allowMultipleAllocations"))
        self.node_name = raw.get("nodeName") or ""
        self.node_selector = raw.get("nodeSelector")
        self.all_nodes = bool(raw.get("allNodes"))
        self.sel_cache = {}
        self.has_counters = bool(raw.get("consumesCounters"))
        self._capacity = self._consumes = self._cel = self._odd = None

    def __repr__(self):
        return "/".join(self.key)

    @property
    def id(self):
        return "/".join(self.key)

    @property
    def capacity(self):
        """{name: (value, requestPolicy or None)} with exact quantities."""
        if self._capacity is None:
            self._capacity = {
                k: (_q(v), (v or {}).get("requestPolicy")) for k, v in (self.raw.get("capacity") or {}).items()
            }
        return self._capacity

    @property
    def consumes(self):
        """[(counterSet, {counter: quantity})] in slice order."""
        if self._consumes is None:
            memo = self.slice.counter_memo
            self._consumes = [
                (c.get("counterSet") or "", parsed_counters(c.get("counters") or {}, memo))
                for c in self.raw.get("consumesCounters") or []
            ]
        return self._consumes

    def counter_names(self):
        """[(counterSet, counter names)] as `consumes` has them, raising what it raises, without
        keeping the parsed amounts: a pool's validity check reads every device of every counter pool
        in the fleet (112,000 on the 5,000-node bench fleet), the amounts matter only for allocated
        devices and the search. Odd shapes or amounts take the full parse, which raises as before."""
        if self._consumes is not None or self.slice.counter_memo is not None:  # parsed once per shared map
            return [(name, counters.keys()) for name, counters in self.consumes]
        out = []
        for c in self.raw.get("consumesCounters") or []:
            counters = c.get("counters") if type(c) is dict else None
            if type(counters) is not dict:
                return [(name, amounts.keys()) for name, amounts in self.consumes]
            for v in counters.values():
                if type(v) is not dict or type(v.get("value")) is not str or not quantity_ok(v["value"]):
                    return [(name, amounts.keys()) for name, amounts in self.consumes]
            out.append((c.get("counterSet") or "", counters.keys()))
        return out

    def cel_device(self):
        if self._cel is None:
            from .cel import make_device

            self._cel = make_device(
                self.driver, self.attributes, self.raw.get("capacity") or {}, allow_multiple_allocations=self.multi
            )
        return self._cel

    def attribute(self, qualified_name):
        """(type, value) of a fully qualified attribute as constraints read it, or None when missing.

        `dom/id` is looked up as is; in the driver's own domain the bare `id` is used too.
        """
        attr = self.attributes.get(qualified_name)
        if attr is None:
            dom, _, ident = qualified_name.partition("/")
            if dom == self.driver:
                attr = self.attributes.get(ident)
        if not isinstance(attr, dict):
            return None
        for kind in ("int", "bool", "string", "version"):
            if kind in attr:
                return (kind, attr[kind])
        return ("unknown", None)

    def runs_on(self, node_name, labels):
        """Per-device node selection (perDeviceNodeSelection slices)."""
        if self.all_nodes:
            return True
        if self.node_name:
            return self.node_name == node_name
        if self.node_selector:
            return node_selector_matches(self.node_selector, node_name, labels)
        return False

    def display_model(self):
        for name in ("productName", "model", "profile", "type"):
            val = self.attribute(f"{self.driver}/{name}")
            if val and val[1] not in (None, ""):
                return str(val[1])
        return self.driver


# The JSON shape of a device's fields, as the API server's typed decoding enforces it: an object the
# server would never have accepted (a garbage answer, a hand-edited dump) fails its whole slice with
# the field named, the way a client decoding it would, instead of an error deep inside a preview.
_DEVICE_MAPS = ("attributes", "capacity")
_DEVICE_LISTS = ("taints", "bindingConditions", "bindingFailureConditions", "consumesCounters")


def check_devices_shape(devices, plain=None):
    """InputError naming the first field of a slice's `spec.devices` whose JSON type is wrong (the
    sync uses it too: such a slice is reported as malformed instead of failing its batch).

    `plain`: ids of device dicts whose attribute and capacity maps are known to hold only one-entry
    objects (Inventory's plain_devices): their maps are not walked again."""
    if not isinstance(devices, list):
        raise InputError(f"spec.devices must be a list, not {type(devices).__name__}")
    for index, raw in enumerate(devices):
        if not isinstance(raw, dict):
            raise InputError(f"spec.devices[{index}] must be an object, not {type(raw).__name__}")
        _check_device_shape(raw.get("name") or f"#{index}", raw, plain is not None and id(raw) in plain)


def _check_device_shape(device_name, raw, maps_known_good=False):
    where = f"device {device_name}"
    for field in () if maps_known_good else _DEVICE_MAPS:
        value = raw.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(f"{where}: {field} must be a map, not {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(item, dict):
                raise InputError(f"{where}: {field}[{shown(key)}] must be an object, not {type(item).__name__}")
    for field in _DEVICE_LISTS:
        value = raw.get(field)
        if value is not None and not isinstance(value, list):
            raise InputError(f"{where}: {field} must be a list, not {type(value).__name__}")


class Slice:
    __slots__ = (
        "name",
        "raw",
        "driver",
        "pool",
        "generation",
        "count",
        "node_name",
        "node_selector",
        "all_nodes",
        "per_device",
        "devices",
        "counter_sets",
        "has_binding",
        "counter_memo",
    )

    def __init__(self, raw, plain=None, counter_memo=None):
        """`plain`: as Inventory's plain_devices (check_devices_shape). `counter_memo`: a dict shared by
        the slices of one build (parsed_counters)."""
        meta, spec = raw.get("metadata") or {}, raw.get("spec")
        self.counter_memo = counter_memo
        self.name = str(meta.get("name") or "")
        if not isinstance(spec, dict):
            raise InputError(f"ResourceSlice {self.name or '(unnamed)'}: no spec")
        self.raw = raw
        pool = spec.get("pool") or {}
        self.driver = str(spec.get("driver") or "")
        self.pool = str(pool.get("name") or "")
        if not self.driver or not self.pool:
            raise InputError(f"ResourceSlice {self.name}: spec.driver and spec.pool.name are required")
        try:
            self.generation = int(pool.get("generation") or 0)
            self.count = int(pool.get("resourceSliceCount") or 0)
        except (TypeError, ValueError) as exc:
            raise InputError(f"ResourceSlice {self.name}: bad pool generation/resourceSliceCount: {exc}") from None
        self.node_name = spec.get("nodeName") or ""
        self.node_selector = spec.get("nodeSelector")
        self.all_nodes = bool(spec.get("allNodes"))
        self.per_device = bool(spec.get("perDeviceNodeSelection"))
        devices = spec.get("devices") or []
        check_devices_shape(devices, plain)
        self.devices = [Device(self, d) for d in devices]
        sets = []
        for cs in spec.get("sharedCounters") or []:
            sets.append((cs.get("name") or "", parsed_counters(cs.get("counters") or {}, counter_memo)))
        self.counter_sets = sets  # list of (name, {counter: total}); duplicates are detected per pool
        self.has_binding = any(d.binding_conditions for d in self.devices)

    @property
    def pool_key(self):
        return (self.driver, self.pool)

    def relevant_for(self, node_name, labels, features):
        """Whether this slice is considered for a node (brief 2.2 step 2)."""
        if self.counter_sets:
            return True
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        if self.node_selector:
            return node_selector_matches(self.node_selector, node_name, labels)
        if self.per_device and features.partitionable_devices:
            return any(d.runs_on(node_name, labels) for d in self.devices)
        return False


_DRIVER_IN_SELECTOR = re.compile(r"""device\.driver\s*==\s*['"]([^'"]+)['"]""")


class DeviceClassInfo:
    __slots__ = ("name", "raw", "selectors", "config", "drivers")

    def __init__(self, raw):
        self.raw = raw
        self.name = str((raw.get("metadata") or {}).get("name") or "")
        spec = raw.get("spec") or {}
        self.selectors = list(spec.get("selectors") or [])
        self.config = list(spec.get("config") or [])
        # Only to word explanations ("no complete pool of driver X"), never to decide.
        self.drivers = sorted(
            {
                m
                for s in self.selectors
                for m in _DRIVER_IN_SELECTOR.findall(((s or {}).get("cel") or {}).get("expression") or "")
            }
        )


# ----------------------------------------------------------------------------------------------
# Claims


class Variant:
    """What one `exactly` request or one `firstAvailable` subrequest asks for."""

    __slots__ = (
        "request",
        "sub",
        "label",
        "class_name",
        "selectors",
        "mode",
        "count",
        "admin",
        "tolerations",
        "capacity_requests",
        "raw",
        "index",
        "error_name",
    )

    def __init__(self, request_name, sub_name, raw, where, index=0):
        self.request, self.sub, self.raw, self.index = request_name, sub_name, raw, index
        self.label = f"{request_name}/{sub_name}" if sub_name else request_name
        # Upstream's errors name a subrequest by its own name only ("request s1", not "request r0/s1"):
        # the allocator formats them with the subrequest accessor's name().
        self.error_name = sub_name or request_name
        if not isinstance(raw, dict):
            raise InputError(f"{where}: must be an object")
        self.class_name = raw.get("deviceClassName") or ""
        self.selectors = list(raw.get("selectors") or [])
        self.mode = raw.get("allocationMode") or "ExactCount"
        count = raw.get("count")
        if self.mode == "ExactCount":
            try:
                self.count = 1 if count in (None, 0) else int(count)
            except (TypeError, ValueError):
                raise InputError(f"{where}: count must be an integer, got {shown(count)}") from None
            if self.count < 0:
                raise InputError(f"{where}: count must be positive, got {self.count}")
        else:
            self.count = 0
        self.admin = bool(raw.get("adminAccess"))
        self.tolerations = list(raw.get("tolerations") or [])
        caps = ((raw.get("capacity") or {}).get("requests")) or {}
        try:
            self.capacity_requests = {k: _q(v) for k, v in caps.items()}
        except Exception as exc:  # QuantityError or malformed
            raise InputError(f"{where}: capacity.requests: {exc}") from None

    def tolerates(self, taint):
        for tol in self.tolerations:
            if tol.get("effect") and tol.get("effect") != taint.get("effect"):
                continue
            key = tol.get("key") or ""
            if key and key != taint.get("key"):
                continue
            op = tol.get("operator") or "Equal"
            if op == "Exists" or (op == "Equal" and (tol.get("value") or "") == (taint.get("value") or "")):
                return True
        return False

    def blocking_taint(self, device):
        """The first taint of the device that blocks this request, or None (effect None never blocks)."""
        for taint in device.taints:
            if taint.get("effect") in BLOCKING_TAINT_EFFECTS and not self.tolerates(taint):
                return taint
        return None


class Request:
    __slots__ = ("name", "variants", "prioritized")

    def __init__(self, raw, where):
        if not isinstance(raw, dict):
            raise InputError(f"{where}: must be an object")
        self.name = raw.get("name") or ""
        if not self.name:
            raise InputError(f"{where}: name is required")
        where = f"{where} ({self.name})"
        exactly, first = raw.get("exactly"), raw.get("firstAvailable")
        if "deviceClassName" in raw and not exactly and not first:
            raise InputError(
                f"{where}: v1beta1 request shape (deviceClassName at top level); use resource.k8s.io/v1 `exactly:`"
            )
        if bool(exactly) == bool(first):
            raise InputError(f"{where}: exactly one of `exactly` and `firstAvailable` must be set")
        self.prioritized = bool(first)
        if exactly:
            self.variants = [Variant(self.name, "", exactly, where)]
        else:
            if not isinstance(first, list):
                raise InputError(f"{where}: firstAvailable must be a list")
            self.variants = []
            for i, sub in enumerate(first):
                sub_name = (sub or {}).get("name") if isinstance(sub, dict) else None
                if not sub_name:
                    raise InputError(f"{where}: firstAvailable[{i}]: name is required")
                self.variants.append(Variant(self.name, sub_name, sub, f"{where}: firstAvailable[{i}] ({sub_name})", i))


class Constraint:
    __slots__ = ("requests", "match", "distinct", "raw")

    def __init__(self, raw):
        self.raw = raw
        self.requests = list(raw.get("requests") or [])
        self.match = raw.get("matchAttribute") or ""
        self.distinct = raw.get("distinctAttribute") or ""

    def covers(self, variant):
        return not self.requests or variant.request in self.requests or variant.label in self.requests

    @property
    def text(self):
        return f"matchAttribute `{self.match}`" if self.match else f"distinctAttribute `{self.distinct}`"


class ClaimSpec:
    """A claim to place: from a ResourceClaim, a template's spec, or a pod's template reference."""

    __slots__ = ("namespace", "name", "requests", "constraints", "config", "source", "spec")

    def __init__(self, namespace, name, spec, source="ResourceClaim"):
        self.namespace, self.name, self.source = namespace or "default", name or "", source
        where = f"{source} {self.ref}"
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise InputError(f"{where}: spec must be an object")
        self.spec = spec  # as given: remedies.py derives changed claims from it
        check_shape(spec, CLAIM_SPEC, where, "spec")  # mirrored claims too: the engine must not crash on them
        devices = spec.get("devices") or {}
        if not isinstance(devices, dict):
            raise InputError(f"{where}: spec.devices must be an object")
        reqs = devices.get("requests") or []
        if not isinstance(reqs, list):
            raise InputError(f"{where}: spec.devices.requests must be a list")
        self.requests = [Request(r, f"{where}: request #{i}") for i, r in enumerate(reqs)]
        dupes = repeated(r.name for r in self.requests)
        if dupes:
            raise InputError(f"{where}: duplicate request name(s) {', '.join(dupes)}")
        self.constraints = [Constraint(c) for c in devices.get("constraints") or [] if isinstance(c, dict)]
        self.config = [c for c in devices.get("config") or [] if isinstance(c, dict)]

    @property
    def ref(self):
        return f"{self.namespace}/{self.name}"

    @property
    def uses_admin_access(self):
        return any(v.admin for r in self.requests for v in r.variants)
