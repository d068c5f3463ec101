"""The kube-scheduler's node Filter plugins (v1.36, default profile) that run before DynamicResources.

Plain Python, no Django. Read from pkg/scheduler/framework/plugins/{nodeunschedulable,nodename,
tainttoleration,nodeaffinity,nodeports,noderesources} and the component-helpers they call: per node the
plugins run in the scheduler's order and stop at the first rejection, with the upstream reason texts.

    pod = SchedulingPod.from_pod(raw_pod)          # or SchedulingPod.would_be(tolerations, node_selector)
    node = NodeFacts(raw_node)
    results = run_filters(pod, node, usage)        # [FilterResult(plugin, passed, reasons)]

Not simulated (named in every result where the pod uses them, never passed silently): inter-pod
affinity, topology spread, volume plugins.
"""

import math
import re

from .errors import InputError, shown
from .model import quantity, term_matches

NODE_UNSCHEDULABLE, NODE_NAME, TAINT_TOLERATION = "NodeUnschedulable", "NodeName", "TaintToleration"
NODE_AFFINITY, NODE_PORTS, NODE_RESOURCES_FIT = "NodeAffinity", "NodePorts", "NodeResourcesFit"
DYNAMIC_RESOURCES = "DynamicResources"
FILTER_ORDER = (NODE_UNSCHEDULABLE, NODE_NAME, TAINT_TOLERATION, NODE_AFFINITY, NODE_PORTS, NODE_RESOURCES_FIT)

# The exact Filter reasons of v1.36.
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_PREFILTER_CUT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"  # outside NodeAffinity's PreFilterResult
REASON_TERMS_CONFLICT = "pod affinity terms conflict"

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "value": ""}
NOT_READY_KEY, UNREACHABLE_KEY = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule only scores
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TERMINAL_PHASES = ("Succeeded", "Failed")  # the scheduler's pod informer drops these
NATIVE = ("cpu", "memory", "ephemeral-storage")

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


_FILTER_ENTRIES = {}
_MAX_FILTER_ENTRIES = 4096


def filter_entry(plugin, passed, reason=None, reasons=()):
    """The JSON entry of one filter's verdict on a node: one dict per distinct verdict, shared by the
    node entries of every preview. A fleet preview has one entry per node and filter, and nearly all
    of them repeat a few verdicts; made afresh they were 100,000s of tracked objects that the cyclic
    collector scanned once after each preview, a noticeable part of a warm preview (BENCHMARKS.md).
    Read-only, like every part of a preview's result."""
    key = (plugin, passed, reason, reasons)
    entry = _FILTER_ENTRIES.get(key)
    if entry is None:
        if len(_FILTER_ENTRIES) >= _MAX_FILTER_ENTRIES:  # reasons naming many different things: start over
            _FILTER_ENTRIES.clear()
        entry = _FILTER_ENTRIES.setdefault(
            key, {"plugin": plugin, "passed": passed, "reason": reason, "reasons": list(reasons)}
        )
    return entry


class FilterResult:
    """One plugin's verdict on one node. `passed` None = not simulated (the reason says why).

    `resolvable`: a rejection the scheduler reports as Unschedulable rather than
    UnschedulableAndUnresolvable, i.e. one that evicting lower-priority pods might cure (NodePorts, and
    NodeResourcesFit unless a request exceeds the node's whole allocatable): the nodes DefaultPreemption
    tries (preemption.py)."""

    __slots__ = ("plugin", "passed", "reasons", "reason", "resolvable", "_entry")

    def __init__(self, plugin, passed, reasons=(), resolvable=False):
        self.plugin, self.passed, self.reasons = plugin, passed, tuple(reasons)
        self.resolvable = resolvable
        self.reason = ", ".join(self.reasons) if self.reasons else None
        self._entry = None

    def to_dict(self):
        entry = self._entry  # the shared results (_PASSED, _FAILED) are asked once per node of every preview
        if entry is None:
            entry = self._entry = filter_entry(self.plugin, self.passed, self.reason, self.reasons)
        return entry

    def __repr__(self):
        return f"FilterResult({self.plugin}, {self.passed}, {list(self.reasons)})"


# ----------------------------------------------------------------------------------------------
# Tolerations (staging/src/k8s.io/api/core/v1/toleration.go; validation: ValidateTolerations)


class Toleration:
    __slots__ = ("key", "operator", "value", "effect", "seconds")

    def __init__(self, key="", operator="Equal", value="", effect="", seconds=None):
        self.key, self.operator, self.value, self.effect, self.seconds = key, operator, value, effect, seconds

    def tolerates(self, taint):
        if self.effect and self.effect != (taint.get("effect") or ""):
            return False
        if self.key and self.key != (taint.get("key") or ""):
            return False
        if self.operator == "Exists":
            return True
        return self.value == (taint.get("value") or "")  # Equal (Lt/Gt need an alpha gate, off by default)

    def to_dict(self):
        out = {"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect}
        if self.seconds is not None:
            out["tolerationSeconds"] = self.seconds
        return out


def parse_tolerations(raw, where="spec.tolerations"):
    """Tolerations as the API server would accept them; anything it would reject is an InputError."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"{where}: must be a list of tolerations")
    out = []
    for i, tol in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(tol, dict):
            raise InputError(f"{at}: must be an object with key, operator, value, effect")
        unknown = sorted(set(tol) - {"key", "operator", "value", "effect", "tolerationSeconds"})
        if unknown:
            raise InputError(f"{at}: unknown field(s) {', '.join(unknown)}")
        key, op, value, effect = (
            tol.get(k, "") if tol.get(k) is not None else "" for k in ("key", "operator", "value", "effect")
        )
        for name, val in (("key", key), ("operator", op), ("value", value), ("effect", effect)):
            if not isinstance(val, str):
                raise InputError(f"{at}.{name}: must be a string, not {type(val).__name__}")
        op = op or "Equal"
        if op not in ("Exists", "Equal"):
            raise InputError(f"{at}.operator: must be Exists or Equal, not {shown(op)}")
        if key:
            _check_label_key(key, f"{at}.key")
        elif op != "Exists":
            raise InputError(
                f"{at}.operator: must be Exists when `key` is empty (an empty key with Exists tolerates every taint)"
            )
        if op == "Exists" and value:
            raise InputError(f"{at}.value: must be empty when `operator` is Exists")
        if op == "Equal" and value and not _label_value_ok(value):
            raise InputError(f"{at}.value: {shown(value)} is not a valid label value")
        if effect and effect not in TAINT_EFFECTS:
            raise InputError(f"{at}.effect: must be one of {', '.join(TAINT_EFFECTS)}, not {shown(effect)}")
        seconds = tol.get("tolerationSeconds")
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, int):
                raise InputError(f"{at}.tolerationSeconds: must be an integer number of seconds")
            if effect != "NoExecute":
                raise InputError(f"{at}.tolerationSeconds: only allowed with effect NoExecute")
        out.append(Toleration(key, op, value, effect, seconds))
    return out


def with_default_tolerations(tolerations):
    """What the DefaultTolerationSeconds admission plugin adds on create: 300 s for the not-ready and
    unreachable NoExecute taints, each unless a toleration with that key (or no key) and effect
    NoExecute (or none) exists. They cover NoExecute only: the NoSchedule twins still filter."""
    out = list(tolerations)
    for key in (NOT_READY_KEY, UNREACHABLE_KEY):
        if not any((t.key in ("", key)) and t.effect in ("", "NoExecute") for t in tolerations):
            out.append(Toleration(key, "Exists", "", "NoExecute", 300))
    return out


def first_untolerated(taints, tolerations, effects=FILTERED_EFFECTS):
    # Plain loops: this runs per node of a 5,000-node preview, generator objects cost there.
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        for t in tolerations:
            if t.tolerates(taint):
                break
        else:
            return taint
    return None


def parse_toleration_flag(text):
    """`KEY[=VALUE][:EFFECT]`, `KEY:EFFECT`, or `*` (tolerate everything), as kubectl writes taints."""
    text = (text or "").strip()
    if not text:
        raise InputError("toleration: empty; write KEY[=VALUE][:EFFECT]")
    if text in ("*", "Exists"):
        return {"operator": "Exists"}
    body, _, effect = text.partition(":")
    key, eq, value = body.partition("=")
    tol = {"key": key.strip(), "operator": "Equal" if eq else "Exists"}
    if eq:
        tol["value"] = value.strip()
    if effect:
        tol["effect"] = effect.strip()
    return tol


# ----------------------------------------------------------------------------------------------
# Label keys/values and node selectors


def _label_value_ok(value):
    return value == "" or (len(value) <= 63 and bool(_LABEL_NAME.match(value)))


def _label_key_ok(key):
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _check_label_key(key, where):
    if not _label_key_ok(key):
        raise InputError(
            f"{where}: {shown(key)} is not a valid label key (name or prefix/name, alphanumerics, '-', '_', '.')"
        )


def parse_node_selector(raw, where="spec.nodeSelector"):
    """A pod's nodeSelector: {label: value}; also `k=v,k2=v2` text (the page and command forms)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        out = {}
        for part in raw.split(","):
            part = part.strip()
            if not part:
                continue
            key, eq, value = part.partition("=")
            if not eq:
                raise InputError(f"{where}: {shown(part)} must be KEY=VALUE")
            out[key.strip()] = value.strip()
        raw = out
    if not isinstance(raw, dict):
        raise InputError(f"{where}: must be a map of label to value")
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InputError(f"{where}: {shown(key)}: keys and values must be strings")
        _check_label_key(key, f"{where}.{key}")
        if not _label_value_ok(value):
            raise InputError(f"{where}.{key}: {shown(value)} is not a valid label value")
    return dict(raw)


_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def parse_required_affinity(affinity, where="spec.affinity"):
    """requiredDuringSchedulingIgnoredDuringExecution checked as the API server validates it; None if absent."""
    if affinity is None:
        return None
    if not isinstance(affinity, dict):
        raise InputError(f"{where}: must be an object")
    node_aff = affinity.get("nodeAffinity")
    if node_aff is None:
        return None
    if not isinstance(node_aff, dict):
        raise InputError(f"{where}.nodeAffinity: must be an object")
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    at = f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if not isinstance(required, dict):
        raise InputError(f"{at}: must be an object with nodeSelectorTerms")
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        raise InputError(f"{at}.nodeSelectorTerms: must have at least one term")
    for i, term in enumerate(terms):
        t_at = f"{at}.nodeSelectorTerms[{i}]"
        if not isinstance(term, dict):
            raise InputError(f"{t_at}: must be an object with matchExpressions and/or matchFields")
        for part in ("matchExpressions", "matchFields"):
            reqs = term.get(part)
            if reqs is None:
                continue
            if not isinstance(reqs, list):
                raise InputError(f"{t_at}.{part}: must be a list")
            for j, req in enumerate(reqs):
                _check_requirement(req, f"{t_at}.{part}[{j}]", fields=part == "matchFields")
    return required


def _check_requirement(req, at, fields):
    if not isinstance(req, dict):
        raise InputError(f"{at}: must be an object with key, operator, values")
    key, op, values = req.get("key"), req.get("operator"), req.get("values")
    if not isinstance(key, str) or not key:
        raise InputError(f"{at}.key: required")
    if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
        raise InputError(f"{at}.values: must be a list of strings")
    values = values or []
    if fields:
        if key != "metadata.name":
            raise InputError(f"{at}.key: matchFields supports only metadata.name, not {shown(key)}")
        if op not in ("In", "NotIn"):
            raise InputError(f"{at}.operator: matchFields supports In and NotIn, not {shown(op)}")
        if len(values) != 1:
            raise InputError(f"{at}.values: matchFields needs exactly one value, got {len(values)}")
        return
    _check_label_key(key, f"{at}.key")
    if op not in _SELECTOR_OPS:
        raise InputError(f"{at}.operator: must be one of {', '.join(_SELECTOR_OPS)}, not {shown(op)}")
    if op in ("In", "NotIn") and not values:
        raise InputError(f"{at}.values: must be non-empty for {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise InputError(f"{at}.values: must be empty for {op}")
    if op in ("Gt", "Lt") and len(values) != 1:
        # Only the count is validated: the API server accepts a non-integer value, and the scheduler's
        # NodeAffinity then never matches that term (labels.NewRequirement fails, the term is skipped).
        raise InputError(f"{at}.values: {op} needs exactly one value, got {len(values)}")


def prefilter_node_names(required):
    """NodeAffinity's PreFilterResult: the node names its required terms can reach through
    `metadata.name In` matchFields (intersected within a term, united across terms), or None when
    some term names no node (every node stays a candidate). An empty set = the terms conflict."""
    if required is None:
        return None
    names = set()
    for term in required.get("nodeSelectorTerms") or []:
        term_names = None
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name" and req.get("operator") == "In":
                values = set(req.get("values") or [])
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names)


def required_affinity_matches(required, node_name, labels):
    """Terms are ORed; a term whose values are not valid label values fails (labels.NewRequirement)."""
    for term in required.get("nodeSelectorTerms") or []:
        if any(not _label_value_ok(v) for r in term.get("matchExpressions") or [] for v in r.get("values") or []):
            continue
        if term_matches(term, node_name, labels):
            return True
    return False


# ----------------------------------------------------------------------------------------------
# Resources (component-helpers/resource PodRequests; noderesources/fit.go)


def is_scalar_resource(name):
    """IsScalarResourceName: extended (vendor/x), hugepages-*, attachable-volumes-*, *kubernetes.io/*."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "/" not in name:
        return False
    return not name.startswith("requests.")  # extended or *kubernetes.io/* native-prefixed; quota names are not


def _amount(name, value, where):
    """One amount as the scheduler's Resource holds it: MilliValue for cpu, Value otherwise (both round up)."""
    return math.ceil(_exact(name, value, where))


def _exact(name, value, where):
    """The exact amount (cpu in millicores, possibly fractional): a pod's requests are summed exactly
    and rounded up once per pod, as PodRequests adds Quantities before the scheduler reads them."""
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        raise InputError(f"{where}: must be a quantity such as 500m, 2 or 4Gi, not {shown(value)}")
    try:
        q = quantity(str(value))
    except Exception as exc:
        why = getattr(exc, "reason", None) or str(exc)  # QuantityError's reason: its text would repeat the value
        raise InputError(f"{where}: {shown(value)} is not a quantity ({shown(why, 120, quote=False)})") from None
    if q < 0:
        raise InputError(f"{where}: must not be negative")
    return q * 1000 if name == "cpu" else q


def _resource_list(raw, where):
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: must be a map of resource name to quantity")
    out = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: resource names must be strings")
        out[name] = _exact(name, value, f"{where}.{name}")
    return out


def _container_resources(container, where, field):
    """One container's `resources.<field>` (limits or requests), read exactly; InputError naming the field."""
    if not isinstance(container, dict):
        raise InputError(f"{where}: must be an object")
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        raise InputError(f"{where}.resources: must be an object")
    return _resource_list(resources.get(field), f"{where}.resources.{field}")


def container_requests(container, where):
    """requests, defaulted from limits as the API server does on create."""
    return {**_container_resources(container, where, "limits"), **_container_resources(container, where, "requests")}


def _add(total, more):
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _containers(spec, field):
    items = spec.get(field)
    if items is None:
        return []
    if not isinstance(items, list):
        raise InputError(f"spec.{field}: must be a list")
    return items


def _aggregate(spec, amounts):
    """max(app containers + sidecars, each init container's peak), per resource; `amounts(container,
    where)` gives one container's resource map (its requests, or its limits)."""
    app = {}
    for i, c in enumerate(_containers(spec, "containers")):
        _add(app, amounts(c, f"spec.containers[{i}]"))
    sidecars, peaks = {}, {}
    for i, c in enumerate(_containers(spec, "initContainers")):
        req = amounts(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            _add(app, req)
            _add(sidecars, req)
            use = dict(sidecars)
        else:
            use = dict(sidecars)
            _add(use, req)
        for name, value in use.items():
            peaks[name] = max(peaks.get(name, 0), value)
    total = dict(app)
    for name, value in peaks.items():
        total[name] = max(total.get(name, 0), value)
    return total


def _container_limits(container, where):
    return _container_resources(container, where, "limits")


def _pod_level_supported(name):
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests(spec, containers_total):
    """The pod-level requests as the API server stores them (SetDefaults_Pod with PodLevelResources on).
    When `spec.resources` gives anything, a hugepages size the containers limit and the pod level names
    neither as limit nor as request gets the containers' aggregate limit at the pod level. Then, when
    pod-level limits exist, a cpu/memory request the pod level leaves out is the containers' aggregate
    request (`containers_total`) where they request it, else the pod-level limit; a hugepages request
    left out is the pod-level limit."""
    pod_level = spec.get("resources")
    if pod_level is None:
        return {}
    if not isinstance(pod_level, dict):
        raise InputError("spec.resources: must be an object")
    limits = _resource_list(pod_level.get("limits"), "spec.resources.limits")
    requests = _resource_list(pod_level.get("requests"), "spec.resources.requests")
    if limits or requests:
        for name, value in _aggregate(spec, _container_limits).items():
            if name.startswith("hugepages-") and name not in requests and name not in limits:
                limits[name] = value
    if limits:
        for name in ("cpu", "memory"):
            if name not in requests and name in containers_total:
                requests[name] = containers_total[name]
        for name, value in limits.items():
            if _pod_level_supported(name) and name not in requests:
                requests[name] = value
    return {name: value for name, value in requests.items() if _pod_level_supported(name)}


def pod_requests(spec):
    """The pod's effective request: max(app containers + sidecars, each init container's peak) + overhead.

    Init containers run one at a time; a sidecar (restartPolicy Always) keeps running, so each later init
    container's peak includes the sidecars started before it. Pod-level requests (cpu, memory,
    hugepages-*; defaulted as the API server does, pod_level_requests) replace the container sums;
    overhead is added last. CPU in millicores; amounts are added exactly and rounded up once at the end
    (two 0.1-byte requests make 1 byte, not 2)."""
    if not isinstance(spec, dict):
        raise InputError("spec: must be an object")
    total = _aggregate(spec, container_requests)
    total.update(pod_level_requests(spec, total))
    _add(total, _resource_list(spec.get("overhead"), "spec.overhead"))
    rounded = {k: math.ceil(v) for k, v in total.items()}  # once, after the exact sums (not per container)
    return {k: v for k, v in rounded.items() if v}


def pod_host_ports(spec):
    """[(protocol, hostIP, hostPort)] of app containers and sidecars (GetHostPorts); defaults TCP, 0.0.0.0.
    With `hostNetwork: true` a port without hostPort is a host port on its containerPort: the API
    server's Pod defaulting fills hostPort in before the scheduler ever sees the pod."""
    out = []
    host_network = spec.get("hostNetwork") is True
    containers = list(_containers(spec, "containers")) + [
        c for c in _containers(spec, "initContainers") if isinstance(c, dict) and c.get("restartPolicy") == "Always"
    ]
    for c in containers:
        if not isinstance(c, dict):
            continue
        ports = c.get("ports") or []
        if not isinstance(ports, list):
            raise InputError(f"container {c.get('name')}: ports must be a list")
        for p in ports:
            if not isinstance(p, dict):
                raise InputError(f"container {c.get('name')}: each port must be an object")
            host_port = p.get("hostPort") or 0
            if not host_port and host_network:
                host_port = p.get("containerPort") or 0
            if isinstance(host_port, bool) or not isinstance(host_port, int) or not 0 <= host_port <= 65535:
                raise InputError(f"container {c.get('name')}: hostPort must be a port number, not {shown(host_port)}")
            if host_port > 0:
                out.append((p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0", host_port))
    return out


def ports_conflict(wanted, used):
    """HostPortInfo.CheckConflict: same (protocol, port), and either side binds 0.0.0.0 or the IPs are equal."""
    for proto, ip, port in wanted:
        for u_proto, u_ip, u_port in used:
            if proto == u_proto and port == u_port and (ip == "0.0.0.0" or u_ip == "0.0.0.0" or ip == u_ip):
                return True
    return False


FOOTPRINT_KIND = "PodFootprint"

# The two PriorityClasses every cluster has (scheduling.k8s.io SystemPriorityClasses); any other class's
# value lives in a PriorityClass object, which gpudash does not mirror.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def pod_priority(spec):
    """The pod's priority as the scheduler reads it (corev1helpers.PodPriority: spec.priority, else 0).

    The Priority admission plugin fills spec.priority in on create, so every stored pod has it. A pod
    pasted into a preview may not: its priorityClassName then decides, which gpudash knows only for the
    system classes; for any other class the priority is unknown (None) and the preview says so. A pod
    with neither is 0, as upstream reads it (a cluster's globalDefault PriorityClass, which admission
    would apply, is not mirrored)."""
    priority = spec.get("priority")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InputError(f"spec.priority: must be an integer, not {shown(priority)}")
        return priority
    name = spec.get("priorityClassName") or ""
    if not isinstance(name, str):
        raise InputError("spec.priorityClassName: must be a string")
    if not name:
        return 0
    return SYSTEM_PRIORITY_CLASSES.get(name)


def pod_preempts(spec):
    """False for preemptionPolicy Never (the pod waits instead of evicting lower-priority pods)."""
    policy = spec.get("preemptionPolicy")
    if policy in (None, "", "PreemptLowerPriority"):
        return True
    if policy == "Never":
        return False
    raise InputError(f"spec.preemptionPolicy: must be PreemptLowerPriority or Never, not {shown(policy)}")


def pod_footprint(raw):
    """What a pod takes from its node: the compact document the mirror keeps for every pod,
    {kind: PodFootprint, metadata: {namespace, name, uid}, node, phase, requests, hostPorts, priority}
    (keyed like the Pod, so the live inventory handles it like any object). InputError for unreadable resources.
    `priority` (pod_priority) tells which pods preemption may evict; None when unknown. A footprint
    stored before it was kept lacks the key (FOOTPRINT_FIELDS): the sync writes it again."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    try:
        priority = pod_priority(spec)
    except InputError:
        priority = None
    return {
        "kind": FOOTPRINT_KIND,
        "metadata": {
            "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "",
            "uid": meta.get("uid") or "",
        },
        "node": spec.get("nodeName") or "",
        "phase": status.get("phase") or "",
        "requests": pod_requests(resized_spec(spec, status)),
        "hostPorts": [list(p) for p in pod_host_ports(spec)],
        "priority": priority,
    }


def _resize_infeasible(status):
    """IsPodResizeInfeasible: the first PodResizePending condition has reason Infeasible."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodResizePending":
            return cond.get("reason") == "Infeasible"
    return False


def resized_spec(spec, status):
    """The spec with the requests the scheduler counts for a bound pod (InPlacePodVerticalScaling, GA in
    v1.36; InPlacePodLevelResourcesVerticalScaling, beta and on): an app container or sidecar whose
    status entry reports `resources` counts, per resource, the largest of its spec request, its actuated
    request (`status...resources.requests`) and `allocatedResources`; once a resize is Infeasible the spec
    no longer counts, only the other two. The same holds for pod-level requests against `status.resources`
    and `status.allocatedResources`. A status that cannot be read leaves the spec as it is."""
    if not isinstance(spec, dict) or not isinstance(status, dict):
        return spec
    statuses = {}
    for field in ("containerStatuses", "initContainerStatuses"):
        items = status.get(field)
        for cs in items if isinstance(items, list) else []:
            if isinstance(cs, dict) and cs.get("name"):
                statuses[cs["name"]] = cs
    pod_level = spec.get("resources") if isinstance(spec.get("resources"), dict) else None
    if not statuses and (pod_level is None or status.get("resources") is None):
        return spec
    try:
        infeasible = _resize_infeasible(status)

        def effective(spec_amounts, actuated, allocated, where):
            """Quantities as written (the largest of each resource), so the result reads like a spec."""
            out = {} if infeasible else dict(spec_amounts)
            actuated = actuated.get("requests") if isinstance(actuated, dict) else None
            for more in (actuated, allocated):
                if more is None:
                    continue
                _resource_list(more, where)  # readable, else InputError
                for name, value in more.items():
                    if name not in out or _exact(name, value, where) > _exact(name, out[name], where):
                        out[name] = value
            return out

        def written(resources):
            """A container's requests as the API server stores them: requests defaulted from limits."""
            resources = resources if isinstance(resources, dict) else {}
            return {**(resources.get("limits") or {}), **(resources.get("requests") or {})}

        out = dict(spec)
        for field in ("containers", "initContainers"):
            changed = []
            for i, c in enumerate(_containers(spec, field)):
                cs = statuses.get(c.get("name")) if isinstance(c, dict) else None
                counted = field == "containers" or c.get("restartPolicy") == "Always"
                if cs is not None and cs.get("resources") is not None and counted:
                    container_requests(c, f"spec.{field}[{i}]")  # readable, else InputError
                    reqs = effective(
                        written(c.get("resources")),
                        cs["resources"],
                        cs.get("allocatedResources"),
                        f"status.{field}[{i}]",
                    )
                    c = {**c, "resources": {"requests": reqs}}
                changed.append(c)
            if field in spec:
                out[field] = changed
        level = (pod_level.get("requests") or {}) if pod_level else {}
        _resource_list(level, "spec.resources.requests")  # readable, else InputError
        if status.get("resources") is not None and any(_pod_level_supported(n) for n in level):
            eff = effective(level, status["resources"], status.get("allocatedResources"), "status")
            out["resources"] = {
                **pod_level,
                "requests": {n: (eff.get(n, "0") if _pod_level_supported(n) else v) for n, v in level.items()},
            }
        return out
    except InputError:
        return spec


FOOTPRINT_FIELDS = frozenset(pod_footprint({}))  # what a footprint of this version holds


def counts_on_node(footprint):
    """Whether the scheduler counts this pod on its node: bound and not Succeeded/Failed."""
    return bool(footprint.get("node")) and footprint.get("phase") not in TERMINAL_PHASES


class NodeUsage:
    """Requests of the non-terminal pods bound to one node (NodeInfo.Requested), their host ports.
    Immutable: plus()/minus() return a new one (inventories sharing it may be read by other threads)."""

    __slots__ = ("pods", "requested", "ports")

    def __init__(self, pods=0, requested=None, ports=()):
        self.pods = pods
        self.requested = requested or {}
        self.ports = tuple(ports)

    def plus(self, fp):
        requested = dict(self.requested)
        _add(requested, fp.get("requests") or {})
        return NodeUsage(self.pods + 1, requested, self.ports + tuple(tuple(p) for p in fp.get("hostPorts") or []))

    def minus(self, fp):
        requested = dict(self.requested)
        for name, value in (fp.get("requests") or {}).items():
            requested[name] = requested.get(name, 0) - value
        # The scheduler keeps a node's used host ports as a set (HostPortInfo), not a count: taking a
        # pod away frees each of its (protocol, hostIP, hostPort) entries even where another pod on
        # the node declares the same one (preemption's dry run sees such a port as free).
        gone = {tuple(p) for p in fp.get("hostPorts") or []}
        ports = [p for p in self.ports if p not in gone]
        return NodeUsage(self.pods - 1, requested, ports)


EMPTY_USAGE = NodeUsage()


# ----------------------------------------------------------------------------------------------
# Nodes and pods as the filters see them


class NodeFacts:
    """The parts of a Node the filters read; `allocatable` None when the node reports none."""

    __slots__ = ("name", "labels", "taints", "unschedulable", "allocatable", "ready")

    def __init__(self, raw):
        meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
        self.name = meta.get("name") or ""
        self.labels = meta.get("labels") or {}
        self.taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
        self.unschedulable = bool(spec.get("unschedulable"))
        alloc = status.get("allocatable")
        self.allocatable = None
        if isinstance(alloc, dict) and alloc:
            self.allocatable = {}
            for name, value in alloc.items():
                try:
                    self.allocatable[name] = _amount(name, value, f"Node {self.name} status.allocatable.{name}")
                except InputError:
                    self.allocatable[name] = 0
        cond = next(
            (c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), None
        )
        self.ready = None if cond is None else cond.get("status") == "True"


class SchedulingPod:
    """What the filters need of the pod being placed."""

    __slots__ = (
        "ref",
        "node_name",
        "tolerations",
        "node_selector",
        "required",
        "requests",
        "host_ports",
        "not_simulated",
        "hypothetical",
        "raw",
        "node_names",
        "priority",
        "priority_class",
        "preempts",
        "_checks",
    )

    def __init__(
        self,
        ref,
        *,
        node_name="",
        tolerations=(),
        node_selector=None,
        required=None,
        requests=None,
        host_ports=(),
        not_simulated=(),
        hypothetical=False,
        raw=None,
        priority=0,
        priority_class="",
        preempts=True,
    ):
        self.ref = ref
        self.priority = priority  # None: a priorityClassName whose value gpudash does not know (pod_priority)
        self.priority_class = priority_class
        self.preempts = preempts  # False: preemptionPolicy Never
        self.node_name = node_name
        self.tolerations = with_default_tolerations(list(tolerations))
        self.node_selector = node_selector or {}
        self.required = required
        self.requests = requests or {}
        self.host_ports = list(host_ports)
        self.not_simulated = list(not_simulated)
        self.hypothetical = hypothetical  # a would-be pod for a bare claim/template
        self.raw = raw  # the Pod object (its extended-resource claim is rebuilt per node)
        self.node_names = prefilter_node_names(required)  # None: no PreFilter cut
        self._checks = None

    def checks(self):
        """The Filter functions that run for this pod, in order: those whose PreFilter skips the pod
        (NodeName without spec.nodeName, NodeAffinity without selector or required affinity, NodePorts
        without host ports) are left out once here instead of being asked on every node."""
        if self._checks is None:
            skipped = set()
            if not self.node_name:
                skipped.add(NODE_NAME)
            if not self.node_selector and self.required is None:
                skipped.add(NODE_AFFINITY)
            if not self.host_ports:
                skipped.add(NODE_PORTS)
            self._checks = tuple(check for plugin, check in _CHECKS if plugin not in skipped)
        return self._checks

    @classmethod
    def from_pod(cls, raw, namespace=None):
        """From a Pod object; anything the API server would reject is an InputError naming the field."""
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        if not isinstance(spec, dict):
            raise InputError("Pod spec: must be an object")
        ns = meta.get("namespace") or namespace or "default"
        ref = f"{ns}/{meta.get('name') or meta.get('generateName') or 'pod'}"
        node_name = spec.get("nodeName") or ""
        if not isinstance(node_name, str):
            raise InputError("spec.nodeName: must be a string")
        return cls(
            ref,
            node_name=node_name,
            tolerations=parse_tolerations(spec.get("tolerations")),
            node_selector=parse_node_selector(spec.get("nodeSelector")),
            required=parse_required_affinity(spec.get("affinity")),
            requests=pod_requests(spec),
            host_ports=pod_host_ports(spec),
            not_simulated=unsimulated_plugins(spec),
            raw=raw,
            priority=pod_priority(spec),
            priority_class=spec.get("priorityClassName") or "",
            preempts=pod_preempts(spec),
        )

    @classmethod
    def would_be(cls, tolerations=None, node_selector=None):
        """The pod that would use a bare claim or template: no requests, the given tolerations/selector."""
        return cls(
            "(the pod using the claim)",
            tolerations=parse_tolerations(tolerations, "tolerations"),
            node_selector=parse_node_selector(node_selector, "nodeSelector"),
            hypothetical=True,
        )

    def describe(self):
        """The constraints in JSON form (the summary echoes them)."""
        return {
            "pod": self.ref,
            "tolerations": [t.to_dict() for t in self.tolerations],
            "nodeSelector": dict(self.node_selector),
            "requiredNodeAffinity": self.required,
            "requests": dict(self.requests),
            "hostPorts": [list(p) for p in self.host_ports],
            "priority": self.priority,
            "preemptionPolicy": "PreemptLowerPriority" if self.preempts else "Never",
        }


def scheduling_pod(objects=(), *, namespace=None, pod=None, tolerations=None, node_selector=None):
    """The pod a preview places: `pod` (a Pod object), else the one Pod among `objects`, else a would-be
    pod with `tolerations` / `node_selector` for bare claims and templates."""
    pods = [pod] if pod is not None else [o for o in objects if isinstance(o, dict) and o.get("kind") == "Pod"]
    if pods:
        if tolerations or node_selector:
            raise InputError(
                "tolerations / nodeSelector: only for bare claims and templates; for a Pod its own "
                "spec.tolerations and spec.nodeSelector apply"
            )
        return SchedulingPod.from_pod(pods[0], namespace)
    return SchedulingPod.would_be(tolerations, node_selector)


VOLUME_SOURCES_NEEDING_PLUGINS = (
    "persistentVolumeClaim",
    "ephemeral",
    "csi",
    "awsElasticBlockStore",
    "gcePersistentDisk",
    "azureDisk",
    "cinder",
    "iscsi",
    "rbd",
)


def unsimulated_plugins(spec):
    """[(plugin, why)] for the Filters this preview does not reproduce but the pod would meet."""
    out = []
    affinity = spec.get("affinity") or {}
    if isinstance(affinity, dict):
        for kind, plugin_reason in (
            ("podAffinity", "required pod affinity"),
            ("podAntiAffinity", "required pod anti-affinity"),
        ):
            part = affinity.get(kind) or {}
            if isinstance(part, dict) and part.get("requiredDuringSchedulingIgnoredDuringExecution"):
                out.append(("InterPodAffinity", f"{plugin_reason} depends on where other pods run"))
    if any(
        isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for c in spec.get("topologySpreadConstraints") or []
    ):
        out.append(("PodTopologySpread", "DoNotSchedule topology spread depends on where other pods run"))
    volumes = [
        v
        for v in spec.get("volumes") or []
        if isinstance(v, dict) and any(k in v for k in VOLUME_SOURCES_NEEDING_PLUGINS)
    ]
    if volumes:
        names = ", ".join(str(v.get("name")) for v in volumes[:3])
        out.append(
            (
                "VolumeBinding/VolumeRestrictions/NodeVolumeLimits/VolumeZone",
                f"volumes ({names}) depend on PersistentVolumes and CSI limits",
            )
        )
    seen, unique = set(), []
    for plugin, why in out:
        if plugin not in seen:
            seen.add(plugin)
            unique.append((plugin, why))
    return unique


# ----------------------------------------------------------------------------------------------
# The filters


def run_filters(pod, node, usage=None, dra_resources=frozenset()):
    """The plugins in order up to the first rejection: [FilterResult]. `usage`: the node's NodeUsage.
    `dra_resources`: extended resource names a DeviceClass maps (DRA serves them where the node's
    allocatable lacks them)."""
    usage = usage or EMPTY_USAGE
    if pod.node_names is not None and node.name not in pod.node_names:
        # Cut by NodeAffinity's PreFilter: no Filter runs on this node at all.
        return [_failed(NODE_AFFINITY, REASON_PREFILTER_CUT if pod.node_names else REASON_TERMS_CONFLICT)]
    out = []
    for check in pod.checks():
        result = check(pod, node, usage, dra_resources)
        out.append(result)
        if result.passed is False:
            break
    return out


# Passing verdicts carry nothing node-specific: one shared object per plugin; so do the rejections
# whose one reason is a fixed text.
_PASSED = {}
_FAILED = {}


def _failed(plugin, reason):
    result = _FAILED.get((plugin, reason))
    if result is None:
        result = _FAILED.setdefault(
            (plugin, reason), FilterResult(plugin, False, [reason], resolvable=plugin == NODE_PORTS)
        )
    return result


def _unschedulable(pod, node, usage, dra):
    if node.unschedulable and first_untolerated((UNSCHEDULABLE_TAINT,), pod.tolerations) is not None:
        return _failed(NODE_UNSCHEDULABLE, REASON_UNSCHEDULABLE)
    return _PASSED[NODE_UNSCHEDULABLE]


def _node_name(pod, node, usage, dra):
    if not pod.node_name:
        return None
    return _PASSED[NODE_NAME] if pod.node_name == node.name else _failed(NODE_NAME, REASON_NODE_NAME)


def _taints(pod, node, usage, dra):
    if not node.taints or first_untolerated(node.taints, pod.tolerations) is None:
        return _PASSED[TAINT_TOLERATION]
    return _failed(TAINT_TOLERATION, REASON_TAINT)


def _affinity(pod, node, usage, dra):
    if not pod.node_selector and pod.required is None:
        return None
    labels = node.labels
    ok = True
    for key, value in pod.node_selector.items():
        if labels.get(key) != value or key not in labels:
            ok = False
            break
    if ok and pod.required is not None:
        ok = required_affinity_matches(pod.required, node.name, labels)
    return _PASSED[NODE_AFFINITY] if ok else _failed(NODE_AFFINITY, REASON_AFFINITY)


def _ports(pod, node, usage, dra):
    if not pod.host_ports:
        return None
    if ports_conflict(pod.host_ports, usage.ports):
        return _failed(NODE_PORTS, REASON_PORTS)
    return _PASSED[NODE_PORTS]


def _resources(pod, node, usage, dra):
    alloc = node.allocatable
    if alloc is None:
        if pod.hypothetical:
            return _NO_ALLOCATABLE  # the would-be pod of bare claims: nodes written without a status stay unjudged
        # The scheduler's NodeInfo of a node without status.allocatable holds zero of everything, pods
        # included: even a pod without requests gets "Too many pods" there.
        alloc = {}
    reasons = []
    resolvable = True  # "Too many pods" is; a request larger than the whole node is not (upstream's Unresolvable)
    if usage.pods + 1 > alloc.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    requests = pod.requests
    if requests:
        for name in NATIVE:
            want = requests.get(name, 0)
            if want and want > alloc.get(name, 0) - usage.requested.get(name, 0):
                reasons.append(f"Insufficient {name}")
                resolvable = resolvable and want <= alloc.get(name, 0)
        for name in sorted(requests):
            if name in NATIVE or not is_scalar_resource(name):
                continue
            have = alloc.get(name, 0)
            if name in dra and have == 0:
                continue  # DRA-backed extended resource: DynamicResources allocates devices for it
            if requests[name] > have - usage.requested.get(name, 0):
                reasons.append(f"Insufficient {name}")
                resolvable = resolvable and requests[name] <= have
    return FilterResult(NODE_RESOURCES_FIT, False, reasons, resolvable) if reasons else _PASSED[NODE_RESOURCES_FIT]


_CHECKS = (
    (NODE_UNSCHEDULABLE, _unschedulable),
    (NODE_NAME, _node_name),
    (TAINT_TOLERATION, _taints),
    (NODE_AFFINITY, _affinity),
    (NODE_PORTS, _ports),
    (NODE_RESOURCES_FIT, _resources),
)


_PASSED.update({plugin: FilterResult(plugin, True) for plugin, _ in _CHECKS})
_NO_ALLOCATABLE = FilterResult(NODE_RESOURCES_FIT, None, ["not simulated: the node reports no status.allocatable"])


def rejected(results):
    """The failing FilterResult, or None (run_filters stops at it: it is the last one)."""
    if results and results[-1].passed is False:
        return results[-1]
    return None


def served_by_device_plugin(node, resources):
    """The DRA-mappable extended resources this node's device plugin advertises (allocatable > 0)."""
    alloc = node.allocatable or {}
    return frozenset(r for r in resources if alloc.get(r, 0) > 0)


__all__ = [
    "FILTER_ORDER",
    "FilterResult",
    "NodeFacts",
    "NodeUsage",
    "SchedulingPod",
    "Toleration",
    "counts_on_node",
    "first_untolerated",
    "parse_node_selector",
    "parse_toleration_flag",
    "parse_tolerations",
    "pod_footprint",
    "pod_host_ports",
    "pod_requests",
    "rejected",
    "run_filters",
    "scheduling_pod",
    "served_by_device_plugin",
    "with_default_tolerations",
]
