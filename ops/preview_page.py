"""The preview page's view of an engine result: summary first, hard errors once, headroom, fitting
nodes with device strips, failing nodes grouped by reason — every list capped per page, every count
taken from the whole result (never from what is rendered).

Kept apart from the view so the shaping is testable without HTTP and the view stays small.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

import yaml
from django.db.models import Q
from django.utils.translation import gettext, gettext_lazy

from claims.preview import PreviewError, post_filter_text
from claims.preview_service import dispatch
from dra.gcpause import collector_paused
from inventory import devicestate
from inventory.fleet import natural_key, state_label
from inventory.models import Device, DeviceClass
from mirror import roles

FITS_PER_PAGE = 50  # each fitting node renders a device strip: keep the page light
NODES_PER_GROUP_PAGE = 100
EXAMPLE_NODES = 5  # node names quoted under a hard error shown once

# One line per reason code of the engine (docs/allocator.md, "Reason codes"), in the page's language;
# the codes and the engine's own reason texts stay as upstream's scheduler writes them.
REASON_TITLES = {
    "allocated": gettext_lazy("Devices already allocated to other claims"),
    "tainted": gettext_lazy("Devices tainted"),
    "counters": gettext_lazy("Shared counters used up (e.g. a GPU's MIG partitions)"),
    "capacity": gettext_lazy("Not enough consumable capacity"),
    "selector": gettext_lazy("No device matches the selectors"),
    "too-few-devices": gettext_lazy("Too few devices"),
    "class": gettext_lazy("No device of the class"),
    "no-pool": gettext_lazy("No complete pool of the driver on the node"),
    "constraint": gettext_lazy("A matchAttribute / distinctAttribute constraint cannot be met"),
    "combination": gettext_lazy("Requests compete for the same devices or counters"),
    "invalid-pools": gettext_lazy("Invalid resource pools"),
    "unavailable": gettext_lazy("An allocated claim of the pod is bound elsewhere"),
    "unschedulable": gettext_lazy("Cannot allocate all claims"),
    # The kube-scheduler's node filters, which run before DRA (dra/nodefilters.py).
    "node-unschedulable": gettext_lazy("Node cordoned (NodeUnschedulable)"),
    "node-name": gettext_lazy("Another node named by spec.nodeName (NodeName)"),
    "node-taints": gettext_lazy("Untolerated node taints, e.g. NotReady (TaintToleration)"),
    "node-affinity": gettext_lazy("Node selector / affinity does not match (NodeAffinity)"),
    "node-ports": gettext_lazy("Host ports taken (NodePorts)"),
    "node-resources": gettext_lazy("Not enough cpu, memory, pods or extended resources (NodeResourcesFit)"),
    "error": gettext_lazy("Hard error (the scheduler fails the attempt)"),
}

_POSITION = re.compile(r"at line (\d+), column (\d+)")
_CEL_OWNER = re.compile(
    r"^(class (?P<cls>[^:]+)|claim (?P<claim>[^:,]+)(, request [^:]+)?): selector #(?P<index>\d+): CEL compile error"
)


def reason_title(code):
    return REASON_TITLES.get(code or "", code or gettext("Does not fit"))


@dataclass
class Position:
    """Where an error points: in the pasted YAML, or inside one CEL expression (then `yaml_line` is
    where that expression starts in the paste, when it came from there)."""

    line: int
    column: int
    kind: str  # "yaml" | "cel"
    expression: str = ""
    owner: str = ""
    yaml_line: int | None = None

    @property
    def source_line(self):
        """The line of the expression (or the YAML) the error is on, and a caret under the column."""
        if self.kind != "cel":
            return None
        lines = self.expression.splitlines() or [""]
        if not 1 <= self.line <= len(lines):
            return None
        return lines[self.line - 1], " " * (self.column - 1) + "^"


def yaml_error_position(message):
    """(line, column) of a malformed-YAML message of the engine, else None."""
    if "malformed YAML" not in message:
        return None
    m = _POSITION.search(message)
    return Position(int(m.group(1)), int(m.group(2)), "yaml") if m else None


def _cel_expressions_in_yaml(yaml_text):
    """(expression, 1-based line where its scalar starts) for every `cel: {expression: ...}` in the text.
    Uses the YAML node tree (not the loaded dicts) because only nodes know their line."""
    out = []
    try:
        nodes = list(yaml.compose_all(yaml_text))
    except yaml.YAMLError:
        return out
    stack = [n for n in nodes if n is not None]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if getattr(key, "value", None) == "cel" and isinstance(value, yaml.MappingNode):
                    for k2, v2 in value.value:
                        if getattr(k2, "value", None) == "expression" and isinstance(v2, yaml.ScalarNode):
                            # A block scalar (`|`) starts on the line after its indicator.
                            first = v2.start_mark.line + (2 if v2.style in ("|", ">") else 1)
                            out.append((v2.value, first))
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return sorted(out, key=lambda e: e[1])


def cel_error_position(message, *, yaml_text=None, claim_spec=None, cluster=None):
    """Locate a CEL compile error named in an engine message: which expression, line and column in it,
    and where that expression is in the pasted YAML. None when the message is no such error."""
    owner = _CEL_OWNER.match(message)
    m = _POSITION.search(message)
    if not owner or not m:
        return None
    from dra.cel import CelCompileError, compile_selector

    line, column = int(m.group(1)), int(m.group(2))
    if owner.group("cls"):
        cls = DeviceClass.objects.filter(cluster=cluster, name=owner.group("cls").strip()).first() if cluster else None
        selectors = ((cls.raw.get("spec") or {}).get("selectors") or []) if cls else []
        candidates = [(((s or {}).get("cel") or {}).get("expression") or "", None) for s in selectors]
    elif yaml_text:
        candidates = _cel_expressions_in_yaml(yaml_text)
    else:
        candidates = [(e, None) for e in _cel_expressions_in_spec(claim_spec or {})]
    for expression, yaml_line in candidates:
        try:
            compile_selector(expression)
        except CelCompileError as exc:
            if (exc.line, exc.column) == (line, column):
                return Position(line, column, "cel", expression, owner.group(1), yaml_line)
    return Position(line, column, "cel", "", owner.group(1))


def _cel_expressions_in_spec(spec):
    for req in (spec.get("devices") or {}).get("requests") or []:
        for variant in [req.get("exactly") or {}] + list(req.get("firstAvailable") or []):
            for sel in variant.get("selectors") or []:
                yield ((sel or {}).get("cel") or {}).get("expression") or ""


@dataclass
class ErrorGroup:
    text: str
    count: int
    nodes: list
    position: Position | None = None


@dataclass
class Listing:
    """One capped list of nodes: `rows` is the page shown, `total` the whole count."""

    key: str
    title: str
    total: int
    rows: list
    page: int = 1
    pages: int = 1
    per_page: int = 0
    example: str = ""
    open: bool = False

    @property
    def first_index(self):
        return (self.page - 1) * self.per_page + 1 if self.rows else 0

    @property
    def last_index(self):
        return self.first_index + len(self.rows) - 1 if self.rows else 0


def _page(items, page, per_page):
    pages = max(1, math.ceil(len(items) / per_page))
    page = min(max(1, page), pages)
    return items[(page - 1) * per_page : page * per_page], page, pages


def parse_show(value):
    """`show` names the list being paged and the page: "fits:3", "allocated:2"."""
    key, _, page = (value or "").rpartition(":")
    try:
        return key, max(1, int(page))
    except ValueError:
        return "", 1


@dataclass
class PreviewReport:
    result: dict
    cluster: object = None
    yaml_text: str | None = None
    claim_spec: dict | None = None
    show: str = ""
    summary: dict = field(init=False)

    def __post_init__(self):
        self.summary = self.result.get("summary") or {}
        self.nodes = self.result.get("nodes") or []
        self.show_key, self.show_page = parse_show(self.show)
        self._total = None

    @classmethod
    @collector_paused()
    def read(cls, answer, **page):
        """(report, settled answer) of a preview worker's encoded answer (dispatch.submit), read and
        settled while the cyclic collector is paused: a big fleet's per-node entries are then freed at
        once when settled, instead of being visited by the young-generation collection that runs when
        the collector resumes. Raises what the answer's error is (dispatch.result_of)."""
        report = cls(dispatch.result_of(answer), **page)
        return report, report.settle()

    def settle(self):
        """Work out everything the page shows, then let go of the per-node answer; returns the answer
        without its `nodes`. The page keeps the nodes it lists (a page of each list) and the counts."""
        for name in (
            "fit_count",
            "reasons",
            "node_filters",
            "post_filter",
            "error_groups",
            "every_node_errs",
            "fits",
            "groups",
            "headroom",
        ):
            getattr(self, name)
        self._total = len(self.nodes)
        self.nodes = ()
        self.result = {key: value for key, value in self.result.items() if key != "nodes"}
        return self.result

    # -- summary ----------------------------------------------------------------------------------
    @property
    def total(self):
        return len(self.nodes) if self._total is None else self._total

    @cached_property
    def fit_count(self):
        return sum(1 for n in self.nodes if n.get("fits"))

    @cached_property
    def reasons(self):
        """(code, title, count, example) of failing nodes, most common first, hard errors left out
        (they are shown once, above)."""
        out = []
        for r in self.summary.get("reasons") or []:
            if r.get("code") != "error":
                out.append(
                    {
                        "code": r["code"],
                        "title": reason_title(r["code"]),
                        "nodes": r["nodes"],
                        "example": r.get("example") or "",
                        "pct": round(100 * r["nodes"] / self.total) if self.total else 0,
                    }
                )
        return out

    @cached_property
    def node_filters(self):
        """The node filters' part of the summary: which pod, how many nodes each filter rejected, caveats."""
        return (self.summary.get("nodeFilters") or {}) if isinstance(self.summary, dict) else {}

    @cached_property
    def post_filter(self):
        """What the scheduler does next when no node fits (deallocate a claim, preempt), in words."""
        return post_filter_text(self.summary) if isinstance(self.summary, dict) else ""

    @cached_property
    def error_groups(self):
        """Hard errors, each distinct text once with how many nodes it hit. An up-front error (unknown
        class, CEL compile error, too many devices) is the same on every node: one group."""
        counts, nodes = Counter(), {}
        for n in self.nodes:
            if n.get("error"):
                counts[n["error"]] += 1
                nodes.setdefault(n["error"], [])
                if len(nodes[n["error"]]) < EXAMPLE_NODES:
                    nodes[n["error"]].append(n["node"])
        return [
            ErrorGroup(
                text,
                count,
                nodes[text],
                cel_error_position(text, yaml_text=self.yaml_text, claim_spec=self.claim_spec, cluster=self.cluster),
            )
            for text, count in counts.most_common()
        ]

    @cached_property
    def every_node_errs(self):
        return bool(self.nodes) and all(n.get("error") for n in self.nodes)

    # -- lists ------------------------------------------------------------------------------------
    def _listing(self, key, title, items, per_page, example=""):
        page = self.show_page if self.show_key == key else 1
        rows, page, pages = _page(items, page, per_page)
        return Listing(key, title, len(items), rows, page, pages, per_page, example, open=self.show_key == key)

    @cached_property
    def fits(self):
        fitting = [n for n in self.nodes if n.get("fits")]
        return self._listing("fits", gettext("Nodes that fit"), fitting, FITS_PER_PAGE)

    @cached_property
    def groups(self):
        """Failing nodes grouped by reason code, most common first (hard errors included as a group
        only when they are not the same on every node)."""
        by_code = {}
        for n in self.nodes:
            if n.get("fits") or (n.get("error") and self.every_node_errs):
                continue
            code = n.get("code") or ("error" if n.get("error") else "unschedulable")
            by_code.setdefault(code, []).append(n)
        reasons = self.summary.get("reasons") or []
        examples = {r["code"]: r.get("example") or "" for r in reasons}
        rank = {r["code"]: i for i, r in enumerate(reasons)}  # the summary's order, so both lists agree on ties
        ordered = sorted(by_code.items(), key=lambda kv: (rank.get(kv[0], len(rank)), -len(kv[1]), kv[0]))
        return [
            self._listing(code, reason_title(code), nodes, NODES_PER_GROUP_PAGE, examples.get(code, ""))
            for code, nodes in ordered
        ]

    # -- headroom ---------------------------------------------------------------------------------
    @cached_property
    def headroom(self):
        room = self.result.get("headroom")
        if not room:
            return None
        if room.get("error"):
            return {"error": room["error"]}
        copies = room.get("copies") or 0

        def table(mapping):
            return [
                {"name": k, "copies": v, "pct": round(100 * v / copies) if copies else 0}
                for k, v in sorted(mapping.items(), key=lambda kv: (-kv[1], kv[0]))
            ]

        return {
            "copies": copies,
            "by_pool": table(room.get("byNodePool") or {}),
            "by_model": table(room.get("byDeviceModel") or {}),
            "nodes_with_room": len(room.get("byNode") or {}),
            "capped": room.get("cappedNodes") or [],
            "max_per_node": room.get("maxPerNode"),
            "seconds": room.get("seconds"),
            "by_node": room.get("byNode") or {},
        }


def attach_device_strips(cluster, rows, user=None):
    """Give each fitting node row `strip`: the node's devices in the fleet map's order and colours,
    with the devices the engine chose marked `chosen`; and `choices`: its results with whether each
    device is on the node's strip. One query for the page's nodes."""
    names = [r["node"] for r in rows]
    if not names:
        return rows
    chosen = {(r["node"], res["driver"], res["pool"], res["device"]) for r in rows for res in r.get("results") or []}
    devices = (
        Device.objects.filter(cluster=cluster)
        .filter(Q(node_name__in=names))
        .annotate(st=devicestate.state_expression(), unhealthy=devicestate.node_not_ready())
        .order_by()
        .values_list(
            "node_name",
            "driver",
            "pool",
            "name",
            "st",
            "tainted",
            "unhealthy",
            "admin_watched",
            "held_by_namespace",
            "held_by_name",
        )
    )
    scope = roles.visible_namespaces(user) if user is not None else None
    strips = {}
    for node, driver, pool, name, st, tainted, unhealthy, admin, holder_ns, holder in devices:
        if holder and scope is not None and holder_ns not in scope:
            holder_text = "a claim in another namespace"
        else:
            holder_text = f"{holder_ns}/{holder}" if holder else ""
        strips.setdefault(node, []).append(
            {
                "driver": driver,
                "pool": pool,
                "name": name,
                "state": st,
                "label": state_label(st),
                "flags": [
                    f
                    for f, on in (
                        (devicestate.TAINTED, tainted),
                        (devicestate.UNHEALTHY, unhealthy),
                        (devicestate.ADMIN, admin),
                    )
                    if on and f != st
                ],
                "holder": holder_text,
                "chosen": (node, driver, pool, name) in chosen,
            }
        )
    # Devices of pools not bound to the node (network-attached, allNodes) are listed, not drawn.
    on_strip = {(n, d["driver"], d["pool"], d["name"]) for n, devs in strips.items() for d in devs}
    for r in rows:
        r["strip"] = sorted(strips.get(r["node"], []), key=lambda d: (d["driver"], natural_key(d["name"])))
        r["choices"] = [
            dict(res, on_strip=(r["node"], res["driver"], res["pool"], res["device"]) in on_strip)
            for res in r.get("results") or []
        ]
    return rows


def _sample_class(cluster):
    """A device class of the cluster for the sample snippets (a GPU class if there is one)."""
    names = (
        list(DeviceClass.objects.filter(cluster=cluster).order_by("name").values_list("name", flat=True))
        if cluster
        else []
    )
    return next((n for n in names if "gpu" in n), names[0] if names else "gpu.example.com")


def samples(cluster):
    """Quick-fill snippets for the YAML box: a claim, a template, a pod with a claim from a template."""
    cls = _sample_class(cluster)
    # The memory selector names the capacity's domain: the driver of a device that publishes memory.
    mem = (
        Device.objects.filter(cluster=cluster, capacity__has_key="memory").values_list("driver", flat=True).first()
        if cluster
        else None
    )
    selector = f"device.capacity['{mem}'].memory.compareTo(quantity('40Gi')) >= 0" if mem else "device.driver != ''"
    claim = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: two-gpus
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: {cls}
        count: 2
"""
    template = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: big-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {cls}
          selectors:
          - cel:
              expression: {selector}
"""
    pod = f"""apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  containers:
  - name: main
    image: cuda
    resources:
      claims:
      - name: gpus
  resourceClaims:
  - name: gpus
    resourceClaimTemplateName: four-gpus
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: four-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {cls}
          count: 4
"""
    return [
        ("claim", gettext("Claim: 2 devices"), claim),
        ("template", gettext("Template: ≥ 40Gi memory"), template),
        ("pod", gettext("Pod + template: 4 devices"), pod),
    ]


def would_be_pod_params(params):
    """The page's node-filter fields as run_preview keywords: `tolerations` (one KEY[=VALUE][:EFFECT] per
    line or comma, or `*`), `node_selector` (KEY=VALUE, ...), `skip_node_filters` (checkbox).
    Raises claims.preview.PreviewError naming the field."""
    from dra.errors import InputError
    from dra.nodefilters import parse_node_selector, parse_toleration_flag

    text = params.get("tolerations", "") or ""
    selector = (params.get("node_selector", "") or "").strip()
    try:
        tolerations = [parse_toleration_flag(part) for part in re.split(r"[,\n]", text) if part.strip()]
        parse_node_selector(selector, "node selector")
    except InputError as exc:
        raise PreviewError(f"Would-be pod: {exc}") from None
    return {
        "tolerations": tolerations or None,
        "node_selector": selector or None,
        "node_filters": params.get("skip_node_filters", "") not in ("1", "on", "true"),
    }
