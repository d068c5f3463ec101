"""Usage reports: GPU-hours of a period by namespace, team, workload, model or node pool, from the
allocation ledger (usage/models.py).

A figure is units x time: an interval's whole-GPU equivalents (dra/units.py) times its overlap with
the period, an open interval counted up to now. Each figure is kept per unit rule (whole device,
partition, consumable-capacity share) so the report can say which rule produced it; admin-access
allocations (which do not take the device) are listed apart. Whole days the rollup covers (rollup.py,
PostgreSQL) are read from it, the rest of the period from the ledger itself; both give the same sums
(tests/usage/test_usage_reports.py checks it).
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, FloatField, Q, Sum, TextField, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from monitoring.metrics import node_pools

from .models import (
    AllocationInterval,
    LedgerGap,
    RollupState,
    UsageDay,
    UsageUtilDay,
    UsageWorkloadDay,
    UsageWorkloadUtilDay,
)
from .periods import local_midnight

# Report groupings and the columns that name a group.
GROUPS = {
    "namespace": ("namespace",),
    "team": ("team",),
    "workload": ("namespace", "workload_kind", "workload_name"),  # rolled up apart (UsageWorkloadDay)
    "model": ("model",),
    "node_pool": ("node_pool",),
    "cluster": ("cluster",),
}
RULES = ("whole", "partition", "capacity", "admin")
MAX_GAPS = 50
# Filters a report takes (the FilterSet's cleaned values), by column.
FILTERS = ("cluster", "namespace", "team", "workload_kind", "workload_name", "model", "node_pool", "unit_rule")


def team_label():
    return getattr(settings, "USAGE_TEAM_LABEL", "team") or "team"


def price_of(model):
    """Price per GPU-hour of a model (USAGE_PRICES, "*" for the rest), or None when no price is set."""
    prices = getattr(settings, "USAGE_PRICES", None) or {}
    value = prices.get(model, prices.get("*"))
    return None if value is None else float(value)


def currency():
    return getattr(settings, "USAGE_CURRENCY", "USD") if getattr(settings, "USAGE_PRICES", None) else None


# --- the ledger, read directly ---------------------------------------------------------------------


def _overlap_sql(lo, hi, now):
    """SQL of an interval's seconds inside [lo, hi) (an open one up to `now`), and its parameters."""
    if connection.vendor == "postgresql":
        sql = "EXTRACT(EPOCH FROM (LEAST(COALESCE(ended_at, %s), %s) - GREATEST(started_at, %s)))"
    else:  # SQLite keeps datetimes as ISO text in UTC: they order as text, julianday() reads them
        # (julianday's day fractions are good to a few microseconds: rounded to the millisecond)
        sql = "ROUND((julianday(MIN(COALESCE(ended_at, %s), %s)) - julianday(MAX(started_at, %s))) * 86400.0, 3)"
    end = min(hi, now)
    return sql, [now, end, lo]


def _ledger_rows(lo, hi, now, where, keys):
    """{(group values..., unit_rule, model, admin_access): GPU-seconds} of the ledger inside [lo, hi)."""
    end = min(hi, now)
    if end <= lo:
        return {}
    rows = AllocationInterval.objects.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=lo))
    rows = rows.annotate(team=Coalesce(KT(f"labels__{team_label()}"), Value(""), output_field=TextField()))
    pools = None
    if "node_pool" in keys or where.get("node_pool") is not None:
        pools = node_pools()
    rows = _filter(rows, where, pools)
    columns = [("node" if k == "node_pool" else "cluster_id" if k == "cluster" else k) for k in keys]
    sql, params = _overlap_sql(lo, hi, now)
    # Admin-access rows have 0 units (they do not take the device): their figure is device-hours watched.
    units = Case(When(admin_access=True, then=Value(1.0)), default=F("units"), output_field=FloatField())
    seconds = Sum(units * RawSQL(sql, params, output_field=FloatField()), output_field=FloatField())
    out = {}
    for values in (
        rows.order_by().values_list(*columns, "cluster_id", "unit_rule", "model", "admin_access").annotate(s=seconds)
    ):
        *group, cid, rule, model, admin, s = values
        group = [
            pools.get((cid, v), "") if k == "node_pool" else v for k, v in zip(keys, group)
        ]  # node -> its pool now
        if s:
            key = (*group, rule, model, admin)
            out[key] = out.get(key, 0.0) + s
    return out


def _filter(rows, where, pools=None):
    """Apply report filters (FILTERS, plus `namespaces`: the user's scope) to ledger or rollup rows."""
    ledger = rows.model is AllocationInterval
    for name in FILTERS:
        value = where.get(name)
        if value is None:
            continue
        if name == "cluster":
            rows = rows.filter(cluster_id__in=value if isinstance(value, list | tuple | set) else [value])
        elif name == "node_pool" and ledger:
            nodes = {node for (cid, node), pool in (pools or {}).items() if pool == value}
            rows = rows.filter(node__in=nodes) if value else rows.exclude(node__in={n for _c, n in pools or {}})
        else:
            rows = rows.filter(**{name: value})
    if where.get("namespaces") is not None:
        rows = rows.filter(namespace__in=where["namespaces"])
    return rows


# --- the rollup ------------------------------------------------------------------------------------


# Keys only the workload rollup keeps: a report grouped or filtered by them reads UsageWorkloadDay.
WORKLOAD_KEYS = ("workload_kind", "workload_name")


def rollup_table(keys=(), where=None):
    """The rollup table that keeps every key a report groups or filters by, or None (only the ledger
    has them: a workload report by or filtered on node pool)."""
    used = set(keys) | {k for k in FILTERS if (where or {}).get(k) is not None}
    if used.isdisjoint(WORKLOAD_KEYS):
        return UsageDay
    return UsageWorkloadDay if used <= set(UsageWorkloadDay.KEYS) else None


def rollup_state(zone, keys=(), where=None):
    """The rollup's state when it covers days in `zone` and has the report's keys (None: read the
    ledger for the whole period)."""
    if connection.vendor != "postgresql" or rollup_table(keys, where) is None:
        return None
    state = RollupState.objects.filter(pk=1).first()
    if state is None or state.zone != zone.key or state.complete_before is None:
        return None
    return state


def _rollup_rows(first_day, end_day, where, keys):
    table = rollup_table(keys, where)
    rows = _filter(table.objects.filter(day__gte=first_day, day__lt=end_day), where)
    columns = [("cluster_id" if k == "cluster" else k) for k in keys]
    out = {}
    for *group, rule, model, admin, s in (
        rows.order_by().values_list(*columns, "unit_rule", "model", "admin_access").annotate(s=Sum("gpu_seconds"))
    ):
        if s:
            key = (*group, rule, model, admin)
            out[key] = out.get(key, 0.0) + s
    return out


def gpu_seconds(period, where, keys, now=None):
    """({(group..., unit_rule, model, admin_access): GPU-seconds}, how it was read) for a period."""
    now = now or timezone.now()
    state = rollup_state(period.zone, keys, where)
    lo = period.start
    out, source = {}, {"rollup_days": 0, "ledger_from": None}
    if state is not None:
        until = min(period.end_day, state.complete_before)
        if until > period.first_day:
            out = _rollup_rows(period.first_day, until, where, keys)
            source["rollup_days"] = (until - period.first_day).days
            lo = local_midnight(until, period.zone)
    if lo < min(period.end, now):
        source["ledger_from"] = lo
        for key, s in _ledger_rows(lo, period.end, now, where, keys).items():
            out[key] = out.get(key, 0.0) + s
    return out, source


# The utilization sums kept by the keys of each day table.
_UTIL_TABLE = {UsageDay: UsageUtilDay, UsageWorkloadDay: UsageWorkloadUtilDay}


def utilization_seconds(period, where, keys):
    """{(group..., unit_rule, model): (known GPU-seconds, idle GPU-seconds)} from the utilization sums.

    They are kept by the keys of the two day tables (the samples behind them are pruned after a day):
    a report whose keys only the ledger has (workload with node pool) has no used/idle figures."""
    table = _UTIL_TABLE.get(rollup_table(keys, where))
    if table is None or rollup_state(period.zone, keys, where) is None:
        return {}
    rows = _filter(table.objects.filter(day__gte=period.first_day, day__lt=period.end_day), where)
    columns = [("cluster_id" if k == "cluster" else k) for k in keys]
    out = {}
    for *group, rule, model, known, idle in (
        rows.order_by()
        .values_list(*columns, "unit_rule", "model")
        .annotate(k=Sum("known_seconds"), i=Sum("idle_seconds"))
    ):
        out[(*group, rule, model)] = (known or 0.0, idle or 0.0)
    return out


# --- the report ------------------------------------------------------------------------------------


@dataclass
class Row:
    """One group's figures, kept per unit rule (hours) so every figure names its rule."""

    key: dict
    by_rule: dict = field(default_factory=dict)  # rule -> GPU-hours
    cost: float | None = None
    known: float = 0.0  # GPU-hours with a utilization sample
    idle: float = 0.0  # of those, under the idle threshold
    idle_cost: float | None = None
    trend: list = field(default_factory=list)  # GPU-hours of the previous periods, newest first

    @property
    def gpu_hours(self):
        return sum(self.by_rule.values())

    @property
    def used(self):
        return self.known - self.idle


def _add_cost(row, attr, hours, model):
    price = price_of(model)
    if price is not None:
        setattr(row, attr, (getattr(row, attr) or 0.0) + hours * price)


def build_rows(period, where, group_by, now=None):
    """(rows by GPU-hours, admin-access rows, how it was read): Row per group, ordinary allocations
    and admin-access ones apart."""
    keys = GROUPS[group_by]
    seconds, source = gpu_seconds(period, where, keys, now)
    rows, admin = {}, {}
    for (*group, rule, model, is_admin), s in seconds.items():
        target = admin if is_admin or rule == "admin" else rows
        group = tuple(group)
        row = target.get(group)
        if row is None:
            row = target[group] = Row(dict(zip(keys, group)))
        hours = s / 3600
        rule = "admin" if target is admin else rule
        row.by_rule[rule] = row.by_rule.get(rule, 0.0) + hours
        _add_cost(row, "cost", hours, model)
    for (*group, rule, model), (known, idle) in utilization_seconds(period, where, keys).items():
        row = rows.get(tuple(group))
        if row is None:
            continue
        row.known += known / 3600
        row.idle += idle / 3600
        _add_cost(row, "idle_cost", idle / 3600, model)
    order = lambda r: (-r.gpu_hours, tuple(str(v) for v in r.key.values()))  # noqa: E731
    return sorted(rows.values(), key=order), sorted(admin.values(), key=order), source


@dataclass
class Report:
    period: object
    group_by: str
    rows: list
    admin: list
    trend: list  # [(period, GPU-hours of the rows' scope)], newest first
    cluster_total: float | None  # every namespace's GPU-hours (admins only)
    source: dict
    now: object
    gaps: list = field(default_factory=list)  # LedgerGaps overlapping the period (at most MAX_GAPS)
    gap_seconds: float = 0.0  # their total length inside the period

    @property
    def total(self):
        return sum(r.gpu_hours for r in self.rows)

    @property
    def gap_hours(self):
        return self.gap_seconds / 3600

    def totals_by_rule(self):
        out = {}
        for r in self.rows:
            for rule, h in r.by_rule.items():
                out[rule] = out.get(rule, 0.0) + h
        return out

    @property
    def known(self):
        return sum(r.known for r in self.rows)

    @property
    def idle(self):
        return sum(r.idle for r in self.rows)

    @property
    def admin_total(self):
        return sum(r.gpu_hours for r in self.admin)

    def _sum(self, attr):
        values = [getattr(r, attr) for r in self.rows if getattr(r, attr) is not None]
        return sum(values) if values else None

    @property
    def cost(self):
        return self._sum("cost")

    @property
    def idle_cost(self):
        return self._sum("idle_cost")


def build_report(period, group_by="namespace", where=None, trend=3, namespaces=None, admin_view=True, now=None):
    """The report of a period: rows by `group_by`, admin-access rows, the previous `trend` periods.

    `namespaces`: the user's scope (None: every namespace). `admin_view`: whether the user may see the
    cluster's totals (the sum over every namespace, whatever the filters)."""
    now = now or timezone.now()
    where = dict(where or {})
    if namespaces is not None:
        where["namespaces"] = sorted(namespaces)
    rows, admin, source = build_rows(period, where, group_by, now)
    by_key = {tuple(r.key.values()): r for r in rows}
    history, p = [], period
    for _ in range(max(trend, 0)):
        p = p.previous()
        past, _admin, _source = build_rows(p, where, group_by, now)
        history.append((p, sum(r.gpu_hours for r in past)))
        past = {tuple(r.key.values()): r.gpu_hours for r in past}
        for key, row in by_key.items():
            row.trend.append(past.get(key, 0.0))
    cluster_total = None
    if admin_view:
        cluster_rows, _admin, _source = build_rows(period, {"cluster": where.get("cluster")}, "cluster", now)
        cluster_total = sum(r.gpu_hours for r in cluster_rows)
    report = Report(period, group_by, rows, admin, history, cluster_total, source, now)
    # Where the sync could not watch, the ledger has no time (it never invents any): say so.
    gaps = LedgerGap.objects.filter(started_at__lt=min(period.end, now), ended_at__gt=period.start)
    if where.get("cluster") is not None:
        gaps = gaps.filter(cluster_id=where["cluster"])
    for gap in gaps.order_by("started_at"):
        inside = min(gap.ended_at, period.end, now) - max(gap.started_at, period.start)
        report.gap_seconds += max(inside.total_seconds(), 0.0)
        if len(report.gaps) < MAX_GAPS:
            report.gaps.append(gap)
    return report


# --- one shape for the API, the CSV and the command ------------------------------------------------


def _h(hours):
    return None if hours is None else round(hours, 4)


def row_json(row, cluster_names):
    key = {k: (cluster_names.get(v, str(v)) if k == "cluster" else v) for k, v in row.key.items()}
    return {
        **key,
        "gpu_hours": _h(row.gpu_hours),
        "by_rule": {rule: _h(h) for rule, h in sorted(row.by_rule.items())},
        "cost": _h(row.cost),
        "utilization_known_gpu_hours": _h(row.known),
        "used_gpu_hours": _h(row.used),
        "idle_gpu_hours": _h(row.idle),
        "idle_cost": _h(row.idle_cost),
        "trend": [_h(h) for h in row.trend],
    }


def report_json(report, limit=None):
    from mirror.models import Cluster

    names = dict(Cluster.objects.values_list("id", "name"))
    p = report.period
    return {
        "period": {
            "kind": p.kind,
            "label": p.label,
            "start": p.start.isoformat(),
            "end": p.end.isoformat(),
            "time_zone": p.zone.key,
            "hours": p.hours,
        },
        "group_by": report.group_by,
        "group_columns": list(GROUPS[report.group_by]),
        "currency": currency(),
        "total_gpu_hours": _h(report.total),
        "total_by_rule": {rule: _h(h) for rule, h in sorted(report.totals_by_rule().items())},
        "cluster_total_gpu_hours": _h(report.cluster_total),
        "cost": _h(report.cost),
        "utilization_known_gpu_hours": _h(report.known),
        "idle_gpu_hours": _h(report.idle),
        "idle_cost": _h(report.idle_cost),
        "admin_access_gpu_hours": _h(report.admin_total),
        "count": len(report.rows),
        "results": [row_json(r, names) for r in report.rows[:limit]],
        "admin_access": [row_json(r, names) for r in report.admin],
        "trend": [{"period": q.label, "gpu_hours": _h(h)} for q, h in report.trend],
        "ledger_gaps": [
            {
                "cluster": names.get(g.cluster_id, ""),
                "start": g.started_at.isoformat(),
                "end": g.ended_at.isoformat(),
                "reason": g.reason,
            }
            for g in report.gaps
        ],
        "ledger_gap_hours": _h(report.gap_seconds / 3600),
        "computed_at": report.now.isoformat(),
        "source": {
            "rollup_days": report.source["rollup_days"],
            "ledger_from": report.source["ledger_from"].isoformat() if report.source["ledger_from"] else None,
        },
    }


CSV_HEADER = ("period", "time_zone", "group_by", *FILTERS, "admin_access", "gpu_hours")


def csv_lines(report, limit=None):
    """One line per (group, unit rule): the GPU-hours each rule produced; admin-access lines last."""
    from mirror.models import Cluster

    names = dict(Cluster.objects.values_list("id", "name"))
    for rows, admin in ((report.rows[:limit], False), (report.admin, True)):
        for row in rows:
            for rule, hours in sorted(row.by_rule.items()):
                key = {k: (names.get(v, str(v)) if k == "cluster" else v) for k, v in row.key.items()}
                yield (
                    report.period.label,
                    report.period.zone.key,
                    report.group_by,
                    *(key.get(c, "") for c in CSV_HEADER[3:10]),
                    rule,
                    "true" if admin else "false",
                    f"{hours:.4f}",
                )
