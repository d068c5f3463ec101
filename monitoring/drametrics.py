"""The DRA control plane's own metrics from a cluster's Prometheus: kubelet preparation latency, the
scheduler's DynamicResources plugin and binding conditions, the ResourceClaim controller's creations.

Each figure is a few PromQL instant queries, shown with the page so that an operator can paste them
into Prometheus. Metric and label names follow the v1.36 sources exactly (pkg/kubelet/metrics,
pkg/scheduler/metrics, pkg/controller/resourceclaim/metrics). A figure says plainly when Prometheus
holds no series of its metric ("not scraped") or no sample in the window: an absent value is never
drawn as zero, and a query that got no answer in time makes its figure say "timed out". Nothing is
stored in the database: the page and the API ask Prometheus when they are read, off the request's thread,
and share one evaluation per source and window for DRA_CACHE_SECONDS (`cached`).
"""

import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from mirror import messages

from .conf import setting
from .prometheus import PrometheusError, PrometheusTimeout, instant_query

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
# TIMED_OUT: a query got no answer within its timeout or the page's deadline (its cells say so).
OK, NO_DATA, ABSENT, ERROR, TIMED_OUT = "ok", "no_data", "absent", "error", "timed_out"
NODE = "$node"  # stands for the node label of kubelet series (setting DRA_NODE_LABEL)
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Query threads per Prometheus URL, as many as the connection pool holds per host
# (monitoring.prometheus): a silent Prometheus holds only its own threads (each evaluation is bounded by
# its deadline), never the queries of another cluster's page. Threads start on first use.
QUERY_THREADS = 4
_executors = {}
_executors_lock = threading.Lock()


def _executor(url):
    with _executors_lock:
        if url not in _executors:
            _executors[url] = ThreadPoolExecutor(max_workers=QUERY_THREADS, thread_name_prefix="gpudash-dra-promql")
        return _executors[url]


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
    timed_out: list = field(default_factory=list)  # keys of the queries that timed out ("presence" or a column)

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
            "timed_out": list(self.timed_out),
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


class Evaluation:
    """One run of the figures' queries against one source, started at construction on the shared pool
    (never on the request's thread). Bounded twice: each query by QUERY_TIMEOUT_SECONDS, the whole run by
    DRA_DEADLINE_SECONDS (a query not sent by then is not sent, one in flight gets only what is left), so
    a slow or silent Prometheus ends in figures that say "timed out", never in a page that waits on it.
    A figure is finished when all its queries are: `finished(r)`; `wait` and `wait_for_more` let a page
    show the finished ones first."""

    def __init__(self, source, window=DEFAULT_WINDOW, keys=None, at=None):
        if window not in WINDOWS:
            raise ValueError(f"window must be one of {', '.join(WINDOWS)}, not {window!r}")
        self.timeout = float(setting("QUERY_TIMEOUT_SECONDS", 10))
        self.deadline_seconds = float(setting("DRA_DEADLINE_SECONDS", 15))
        self.started = time.monotonic()
        self.deadline = self.started + self.deadline_seconds
        self.finished_at = None  # monotonic time when the last figure finished
        node = node_label()
        selector = source.series_selector
        self.results = []
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
            self.results.append(r)
            jobs.append((r, None, r.presence))
            jobs += [(r, key, q) for key, q in r.queries.items()]
        self._left = {id(r): 1 + len(r.queries) for r in self.results}
        self._rows = {}  # FigureResult id -> {label values: {column: value}}
        self._done = set()  # ids of finished figures
        self._changed = threading.Condition()
        self._source, self._at = source, at
        if not jobs:
            self.finished_at = self.started
        # The kubelet figures have a series per node (their quantiles take seconds at 1,000 nodes): the
        # scheduler's and controller manager's few series are asked for first, so they show at once.
        jobs.sort(key=lambda job: job[0].figure.component == KUBELET)
        executor = _executor(source.url)
        for job in jobs:
            executor.submit(self._one, job)

    def _one(self, job):
        r, key, promql = job
        found, error, timed_out = None, "", False
        left = self.deadline - time.monotonic()
        if left < 0.1:
            error, timed_out = (
                gettext("not sent: the page's %(n)s s deadline had passed")
                % {"n": number_format(self.deadline_seconds)},
                True,
            )
        else:
            try:
                found = instant_query(
                    self._source.url,
                    promql,
                    auth_header=self._source.auth_header,
                    timeout=min(self.timeout, left),
                    at=self._at,
                )
            except PrometheusTimeout as exc:
                error, timed_out = str(exc), True
            except PrometheusError as exc:
                error = str(exc)
            except Exception as exc:  # a bug must end in the figure's error, not in a figure that never finishes
                error = f"{type(exc).__name__}: {exc}"
        with self._changed:
            self._record(r, key, found, error, timed_out)
            self._left[id(r)] -= 1
            if not self._left[id(r)]:
                self._finish(r)
                self._done.add(id(r))
                if len(self._done) == len(self.results):
                    self.finished_at = time.monotonic()
                self._changed.notify_all()

    def _record(self, r, key, found, error, timed_out):
        if timed_out:
            r.timed_out.append("presence" if key is None else key)
            r.error = r.error or error[:2000]
        elif error:
            r.status, r.error = ERROR, error[:2000]
        elif key is None:
            r.jobs = {labels.get("job", ""): int(v) for labels, v in found}
        else:
            target = self._rows.setdefault(id(r), {})
            for labels, value in found:
                if math.isfinite(value):
                    target.setdefault(tuple(labels.get(lb, "") for lb in r.labels), {})[key] = value

    def _finish(self, r):
        r.rows = sorted(self._rows.pop(id(r), {}).items())
        if r.status == ERROR:
            return
        if r.timed_out:
            # Rows of the columns that came are kept; the others' cells say "timed out", never 0.
            r.status = TIMED_OUT
        elif not r.jobs and not r.rows:
            r.status = ABSENT
        elif not r.rows:
            r.status = NO_DATA

    def finished(self, r):
        with self._changed:
            return id(r) in self._done

    @property
    def done_count(self):
        with self._changed:
            return len(self._done)

    @property
    def complete(self):
        return self.finished_at is not None

    def wait(self, timeout=None):
        """Wait until every figure is finished (at most `timeout` seconds); True when they are."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._done) == len(self.results), timeout)

    def wait_for_more(self, seen, timeout):
        """Wait until more than `seen` figures are finished, or all are (at most `timeout` seconds)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._done) > seen or len(self._done) == len(self.results), timeout)


def evaluate(source, window=DEFAULT_WINDOW, keys=None, at=None):
    """[FigureResult] of every figure (or those in `keys`), from `source` (a PrometheusSource), its
    queries sent in parallel (evaluated at `at`, Unix seconds, default now), bounded by the deadline.
    Prometheus trouble becomes the figure's error or "timed out", never an exception."""
    evaluation = Evaluation(source, window, keys, at)
    evaluation.wait()
    return evaluation.results


# Evaluations kept for DRA_CACHE_SECONDS after they finish, per (source, window): a reload, another
# viewer, the page's fragment requests and the API share one run of the ~30 queries rather than each
# sending them again. One that is still running is shared too.
_cache = {}
_cache_lock = threading.Lock()


def cached(source, window=DEFAULT_WINDOW):
    """The running or recent Evaluation of every figure of `source` in `window`, started if none."""
    ttl = float(setting("DRA_CACHE_SECONDS", 30))
    key = (getattr(source, "pk", None), source.url, source.series_selector, source.auth_header, window, node_label())
    now = time.monotonic()
    with _cache_lock:
        for k, e in list(_cache.items()):
            if e.complete and now - e.finished_at >= ttl:
                del _cache[k]
        evaluation = _cache.get(key)
        if evaluation is None:
            evaluation = _cache[key] = Evaluation(source, window)
    return evaluation


def forget_cached():
    """Drop every kept evaluation (tests; a changed Prometheus source)."""
    with _cache_lock:
        _cache.clear()


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
