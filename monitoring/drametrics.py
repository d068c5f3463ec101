"""The DRA control plane's own metrics from a cluster's Prometheus: kubelet preparation latency, the
scheduler's DynamicResources plugin and binding conditions, the ResourceClaim controller's creations.

Each figure is a few PromQL instant queries, shown with the page so that an operator can paste them
into Prometheus. Metric and label names follow the v1.36 sources exactly (pkg/kubelet/metrics,
pkg/scheduler/metrics, pkg/controller/resourceclaim/metrics). A figure says plainly when Prometheus
holds no series of its metric ("not scraped") or no sample in the window: an absent value is never
drawn as zero. Nothing is stored; the page and the API ask Prometheus when they are read.
"""

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from mirror import messages

from .conf import setting
from .prometheus import PrometheusError, instant_query

# Range windows offered for rates and quantiles (PromQL durations).
WINDOWS = ("5m", "15m", "1h", "6h", "24h")
DEFAULT_WINDOW = "5m"
KUBELET, SCHEDULER, CONTROLLER = "kubelet", "kube-scheduler", "kube-controller-manager"
COMPONENTS = (
    (KUBELET, _("Kubelet: preparing devices for pods")),
    (SCHEDULER, _("Scheduler: DynamicResources plugin")),
    (CONTROLLER, _("Controller manager: ResourceClaim controller")),
)
# Figure statuses: values shown; the metric has series but nothing in the window (e.g. no operation:
# a quantile of no observations is NaN, which is not a zero); no series of the metric at all; the query failed.
OK, NO_DATA, ABSENT, ERROR = "ok", "no_data", "absent", "error"
NODE = "$node"  # stands for the node label of kubelet series (setting DRA_NODE_LABEL)
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# As many as the Prometheus connection pool holds (monitoring.prometheus).
_queries = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gpudash-dra-promql")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    how: str  # "quantile", "rate" (of a histogram's _count or a counter), "increase", "value"
    q: float = 0.0
    unit: str = "seconds"  # seconds, per_second, count
    matchers: str = ""  # extra label matchers of this column only


@dataclass(frozen=True)
class Figure:
    key: str
    component: str
    title: str
    metric: str
    kind: str  # histogram, counter, gauge
    by: tuple
    columns: tuple
    matchers: str = ""
    note: str = ""
    source: str = ""  # where the metric is defined upstream (shown with the figure)

    def by_labels(self, node_label):
        return tuple(node_label if b == NODE else b for b in self.by)


def _quantiles(unit="seconds"):
    return (
        Column("p50", "p50", "quantile", 0.5, unit),
        Column("p95", "p95", "quantile", 0.95, unit),
        Column("p99", "p99", "quantile", 0.99, unit),
    )


FIGURES = (
    Figure(
        "kubelet_grpc",
        KUBELET,
        _("Device preparation by driver and node (the kubelet's gRPC calls to the DRA driver)"),
        "dra_grpc_operations_duration_seconds",
        "histogram",
        ("driver_name", "method_name", NODE),
        (
            *_quantiles(),
            Column("calls", _("calls/s"), "rate", unit="per_second"),
            Column("errors", _("failed calls/s"), "rate", unit="per_second", matchers='grpc_status_code!="OK"'),
        ),
        note=_(
            "NodePrepareResources runs before a pod's containers start, NodeUnprepareResources after they stop; "
            "a call is one pod's claims of one driver. Failed calls are those with a gRPC status other than OK."
        ),
        source="pkg/kubelet/metrics: DRAGRPCOperationsDuration",
    ),
    Figure(
        "kubelet_operations",
        KUBELET,
        _("Preparation and unpreparation per node (all drivers of a pod together)"),
        "dra_operations_duration_seconds",
        "histogram",
        ("operation_name", NODE),
        (
            *_quantiles(),
            Column("ops", _("operations/s"), "rate", unit="per_second"),
            Column("errors", _("failed/s"), "rate", unit="per_second", matchers='is_error="true"'),
        ),
        note=_("PrepareResources and UnprepareResources as the kubelet times them; this metric has no driver label."),
        source="pkg/kubelet/metrics: DRAOperationsDuration",
    ),
    Figure(
        "kubelet_claims_in_use",
        KUBELET,
        _("ResourceClaims in use per node"),
        "dra_resource_claims_in_use",
        "gauge",
        ("driver_name", NODE),
        (Column("claims", _("claims in use"), "value", unit="count"),),
        note=_(
            'driver_name "<any>" counts each claim once across drivers; the per-driver rows do not add up to it '
            "when a claim uses devices of several drivers."
        ),
        source="pkg/kubelet/metrics: DRAResourceClaimsInUseDesc",
    ),
    Figure(
        "scheduler_plugin",
        SCHEDULER,
        _("DynamicResources plugin time by extension point (the Filter extension point runs once per node)"),
        "scheduler_plugin_execution_duration_seconds",
        "histogram",
        ("extension_point", "status"),
        (*_quantiles(), Column("runs", _("sampled runs/s"), "rate", unit="per_second")),
        matchers='plugin="DynamicResources"',
        note=_(
            "The scheduler records plugin times for about one scheduling cycle in ten, so the rate "
            "undercounts; its buckets end at about 22 ms, above which a quantile reads as the last finite bucket."
        ),
        source="pkg/scheduler/metrics: PluginExecutionDuration",
    ),
    Figure(
        "binding_allocations",
        SCHEDULER,
        _("Allocations of devices with binding conditions, by driver and outcome"),
        "scheduler_dra_bindingconditions_allocations_total",
        "counter",
        ("driver", "status"),
        (Column("increase", _("in the window"), "increase", unit="count"),),
        note=_(
            "Counted per driver per scheduling attempt; registered only where the DRADeviceBindingConditions "
            "gate is on. Outcomes: success, failure, timeout, error."
        ),
        source="pkg/scheduler/metrics: DRABindingConditionsAllocationsTotal",
    ),
    Figure(
        "binding_wait",
        SCHEDULER,
        _("Waiting for binding conditions in PreBind, by driver and outcome"),
        "scheduler_dra_bindingconditions_wait_duration_seconds",
        "histogram",
        ("driver", "status"),
        (*_quantiles(), Column("waits", _("waits/s"), "rate", unit="per_second")),
        source="pkg/scheduler/metrics: DRABindingConditionsPreBindDuration",
    ),
    Figure(
        "claim_creates",
        CONTROLLER,
        _("ResourceClaims created from templates, by outcome"),
        "resourceclaim_controller_creates_total",
        "counter",
        ("status", "admin_access"),
        (Column("increase", _("in the window"), "increase", unit="count"),),
        source="pkg/controller/resourceclaim/metrics: ResourceClaimCreate",
    ),
    Figure(
        "claims",
        CONTROLLER,
        _("ResourceClaims by allocation, admin access and source"),
        "resourceclaim_controller_resource_claims",
        "gauge",
        ("allocated", "admin_access", "source"),
        (Column("claims", _("claims"), "value", unit="count"),),
        note=_(
            'source "resource_claim_template": made from a pod\'s template; "extended_resource": for an extended '
            "resource request; empty: created by a user. Only the leading controller manager reports it."
        ),
        source="pkg/controller/resourceclaim/metrics: NumResourceClaimsDesc",
    ),
)
BY_KEY = {f.key: f for f in FIGURES}


def node_label():
    label = str(setting("DRA_NODE_LABEL", "node"))
    return label if _LABEL.match(label) else "node"


def _matchers(*parts):
    return ", ".join(p.strip() for p in parts if p and p.strip())


def _braced(*parts):
    """`{a="b", c!="d"}`, or nothing when there is no matcher (a bare metric name reads better)."""
    inner = _matchers(*parts)
    return "{" + inner + "}" if inner else ""


def presence_promql(figure, window, selector=""):
    """How many series of the figure's metric Prometheus held in the window, per scrape job (over the
    window, as the rates are: a metric that stopped a minute ago still has rates to show)."""
    name = figure.metric + ("_count" if figure.kind == "histogram" else "")
    return f"count by (job) (last_over_time({name}{_braced(figure.matchers, selector)}[{window}]))"


def column_promql(figure, column, window, selector="", node=None):
    by = ", ".join(figure.by_labels(node or node_label()))
    sel = _braced(figure.matchers, column.matchers, selector)
    m = figure.metric
    if column.how == "quantile":
        return f"histogram_quantile({column.q:g}, sum by (le, {by}) (rate({m}_bucket{sel}[{window}])))"
    if column.how == "rate":
        series = f"{m}_count" if figure.kind == "histogram" else m
        return f"sum by ({by}) (rate({series}{sel}[{window}]))"
    if column.how == "increase":
        return f"sum by ({by}) (increase({m}{sel}[{window}]))"
    # Gauges: max, not sum, so that a target scraped by two jobs (or a controller manager during a
    # leader hand-over) is not counted twice.
    return f"max by ({by}) ({m}{sel})"


@dataclass
class FigureResult:
    figure: Figure
    window: str
    node_label: str
    presence: str
    queries: dict  # column key -> PromQL
    status: str = OK
    jobs: dict = field(default_factory=dict)  # scrape job -> series
    rows: list = field(default_factory=list)  # [(label values tuple, {column key: float})]
    error: str = ""

    @property
    def has_quantiles(self):
        return any(c.how == "quantile" for c in self.figure.columns)

    @property
    def series_name(self):
        """The metric with the figure's own matchers, as a selector (e.g. the DynamicResources plugin's)."""
        return self.figure.metric + _braced(self.figure.matchers)

    @property
    def labels(self):
        return self.figure.by_labels(self.node_label)

    @property
    def missing_node_label(self):
        """Kubelet rows without the node label: the scrape config does not set it (all nodes merged)."""
        if NODE not in self.figure.by:
            return False
        i = self.figure.by.index(NODE)
        return any(values[i] == "" for values, _ in self.rows)

    def as_json(self):
        f = self.figure
        return {
            "key": f.key,
            "component": f.component,
            "title": str(f.title),
            "metric": f.metric,
            "type": f.kind,
            "source": f.source,
            "window": self.window,
            "status": self.status,
            "error": self.error,
            "presence_promql": self.presence,
            "jobs": self.jobs,
            "labels": list(self.labels),
            "columns": [
                {"key": c.key, "label": str(c.label), "unit": c.unit, "promql": self.queries[c.key]} for c in f.columns
            ],
            # A column with no sample for a row is null, never 0.
            "rows": [
                {"labels": dict(zip(self.labels, values)), "values": {c.key: vals.get(c.key) for c in f.columns}}
                for values, vals in self.rows
            ],
        }


def evaluate(source, window=DEFAULT_WINDOW, keys=None, at=None):
    """[FigureResult] of every figure (or those in `keys`), from `source` (a PrometheusSource), its
    queries sent in parallel (evaluated at `at`, Unix seconds, default now). Prometheus trouble becomes the figure's error, never an exception."""
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {', '.join(WINDOWS)}, not {window!r}")
    timeout = float(setting("QUERY_TIMEOUT_SECONDS", 10))
    node = node_label()
    selector = source.series_selector
    results = []
    jobs = []
    for figure in FIGURES:
        if keys and figure.key not in keys:
            continue
        r = FigureResult(
            figure,
            window,
            node,
            presence_promql(figure, window, selector),
            {c.key: column_promql(figure, c, window, selector, node) for c in figure.columns},
        )
        results.append(r)
        jobs.append((r, None, r.presence))
        jobs += [(r, key, q) for key, q in r.queries.items()]

    def one(job):
        r, key, promql = job
        try:
            return job, instant_query(source.url, promql, auth_header=source.auth_header, timeout=timeout, at=at), None
        except PrometheusError as exc:
            return job, None, str(exc)

    answers = list(_queries.map(one, jobs))
    rows = {}  # FigureResult id -> {label values: {column: value}}
    for (r, key, _promql), found, error in answers:
        if error:
            r.status, r.error = ERROR, r.error or error[:2000]
            continue
        if key is None:
            r.jobs = {labels.get("job", ""): int(v) for labels, v in found}
            continue
        target = rows.setdefault(id(r), {})
        for labels, value in found:
            if math.isfinite(value):
                target.setdefault(tuple(labels.get(lb, "") for lb in r.labels), {})[key] = value
    for r in results:
        if r.status == ERROR:
            continue
        r.rows = sorted(rows.get(id(r), {}).items())
        if not r.jobs and not r.rows:
            r.status = ABSENT
        elif not r.rows:
            r.status = NO_DATA
    return results


def grouped(results):
    """[(component, title, [FigureResult])] in the page's order."""
    return [(key, title, [r for r in results if r.figure.component == key]) for key, title in COMPONENTS]


def format_value(value, unit):
    """A cell's text in the active language; None (no sample) is the caller's to say, never "0"."""
    if value is None:
        return ""
    if unit == "seconds":
        return messages.duration(value)
    if unit == "per_second":
        return gettext("%(n)s/s") % {"n": number_format(value, 3 if value < 1 else 1)}
    if value == int(value):
        return messages.grouped(int(value))
    return number_format(value, 2)


def page_rows(result, limit=None):
    """(rows, total) of a figure for the page: label values, then each column's text (None = no
    sample). With many nodes a latency figure has a row per node and driver: the page shows the
    `limit` (setting DRA_PAGE_ROWS, 50) slowest by p95 first, the API all of them."""
    limit = limit or int(setting("DRA_PAGE_ROWS", 50))
    rows = result.rows
    if any(c.key == "p95" for c in result.figure.columns):
        rows = sorted(rows, key=lambda row: -row[1].get("p95", -1.0))  # stable: label order among equals
    shown = [
        (values, [(c, format_value(vals.get(c.key), c.unit) if c.key in vals else None) for c in result.figure.columns])
        for values, vals in rows[:limit]
    ]
    return shown, len(rows)
