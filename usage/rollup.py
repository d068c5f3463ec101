"""The daily rollup of the ledger (UsageDay, and UsageWorkloadDay for reports by workload), the
utilization sums (UsageUtilDay, and UsageWorkloadUtilDay by workload) and the totals /metrics
reports (UsageTotal), kept incrementally by `run()` (Celery beat every 10 minutes, `manage.py
usage_report --roll-up`). PostgreSQL only: on SQLite the reports read the ledger.

Which days are rebuilt: the ledger can still change a recent day (an event applied late, a relist
that closes an interval at the edge of a gap), so each run rebuilds the days since the last run plus
the last USAGE_ROLLUP_SETTLE_DAYS, and from the start of any ledger gap recorded since the last run
(its intervals got bounds inside it). Today is never rolled up: reports read it from the ledger. A
change of USAGE_TIME_ZONE rebuilds everything (days are local dates). Both day tables are rebuilt
by one statement per chunk of days, so they always cover the same days.

Utilization: each run adds the DCGM samples stored since the last run (monitoring.UtilizationSample,
pruned after a day) over the intervals that held the sampled device at that minute, per day and
key (by both tables' keys, in one statement each); these sums are kept when the samples are gone.
Admin-access watchers are not counted.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min
from django.utils import timezone

from monitoring.conf import setting as monitoring_setting
from monitoring.metrics import node_pools
from monitoring.models import UtilizationSample

from .models import (
    AllocationInterval,
    LedgerGap,
    RollupState,
    UsageDay,
    UsageTotal,
    UsageUtilDay,
    UsageWorkloadDay,
    UsageWorkloadUtilDay,
)
from .periods import local_midnight, report_zone
from .reports import team_label

log = logging.getLogger(__name__)

CHUNK_DAYS = 31  # days rebuilt per statement (bounds one transaction's work)
_LOCK = 0x47445572  # pg_advisory_xact_lock key ("GDUr"): one rollup run at a time

_KEY = "namespace, team, model, node_pool, unit_rule"
_WORKLOAD_KEY = "namespace, workload_kind, workload_name, team, model, unit_rule"


def _q(model):
    return connection.ops.quote_name(model._meta.db_table)


def _pools_sql():
    """A VALUES-free derived table of (cluster_id, node, pool) from the nodes' labels now, and its parameters."""
    pools = node_pools()
    return (
        "(SELECT unnest(%s::bigint[]) AS cluster_id, unnest(%s::text[]) AS node, unnest(%s::text[]) AS pool)",
        [[c for c, _n in pools], [n for _c, n in pools], list(pools.values())],
    )


def rebuild_days(first_day, end_day, zone, now):
    """Replace the UsageDay and UsageWorkloadDay rows of local days [first_day, end_day) with sums from
    the ledger (read once for both); returns how many rows of each it wrote."""
    lo, hi = local_midnight(first_day, zone), local_midnight(end_day, zone)
    pools, pool_params = _pools_sql()
    interval, day, workload = _q(AllocationInterval), _q(UsageDay), _q(UsageWorkloadDay)
    overlap = (
        "EXTRACT(EPOCH FROM LEAST(COALESCE(i.ended_at, %(now)s), d.day_end) - GREATEST(i.started_at, d.day_start))"
    )
    # `parts` sums the ledger once by the keys of both tables; each table's INSERT sums it by its own.
    sql = f"""
        WITH parts AS (
            SELECT i.cluster_id, d.day, i.namespace, COALESCE(i.labels ->> %(team)s, '') AS team,
                   i.model, COALESCE(np.pool, '') AS node_pool, i.unit_rule, i.admin_access,
                   i.workload_kind, i.workload_name,
                   SUM(CASE WHEN i.admin_access THEN 1.0 ELSE i.units END * {overlap}) AS s
            FROM {interval} i
            CROSS JOIN LATERAL (
                SELECT g::date AS day, g AT TIME ZONE %(tz)s AS day_start, (g + interval '1 day') AT TIME ZONE %(tz)s AS day_end
                FROM generate_series(
                    date_trunc('day', GREATEST(i.started_at, %(lo)s) AT TIME ZONE %(tz)s),
                    (LEAST(COALESCE(i.ended_at, %(now)s), %(hi)s) - interval '1 microsecond') AT TIME ZONE %(tz)s,
                    interval '1 day') AS g
            ) d
            LEFT JOIN {pools} np ON np.cluster_id = i.cluster_id AND np.node = i.node
            WHERE i.started_at < %(hi)s AND (i.ended_at IS NULL OR i.ended_at > %(lo)s)
              AND COALESCE(i.ended_at, %(now)s) > i.started_at
            GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
        ), days AS (
            INSERT INTO {day} (cluster_id, day, {_KEY}, admin_access, gpu_seconds)
            SELECT cluster_id, day, {_KEY}, admin_access, SUM(s) FROM parts
            GROUP BY cluster_id, day, {_KEY}, admin_access HAVING SUM(s) > 0
            RETURNING 1
        ), workloads AS (
            INSERT INTO {workload} (cluster_id, day, {_WORKLOAD_KEY}, admin_access, gpu_seconds)
            SELECT cluster_id, day, {_WORKLOAD_KEY}, admin_access, SUM(s) FROM parts
            GROUP BY cluster_id, day, {_WORKLOAD_KEY}, admin_access HAVING SUM(s) > 0
            RETURNING 1
        )
        SELECT (SELECT COUNT(*) FROM days), (SELECT COUNT(*) FROM workloads)
    """
    # psycopg takes one style of placeholders per statement: the pools' positional ones become named.
    sql = sql.replace(pools, pools.replace("%s", "%(pc)s", 1).replace("%s", "%(pn)s", 1).replace("%s", "%(pp)s", 1))
    params = {
        "team": team_label(),
        "tz": zone.key,
        "lo": lo,
        "hi": hi,
        "now": now,
        "pc": pool_params[0],
        "pn": pool_params[1],
        "pp": pool_params[2],
    }
    with connection.cursor() as cursor:
        for table in (day, workload):
            cursor.execute(f"DELETE FROM {table} WHERE day >= %s AND day < %s", [first_day, end_day])
        cursor.execute(sql, params)
        return cursor.fetchone()


# Each utilization table and the ledger columns of its keys (after cluster and day).
_UTIL_TABLES = (
    (
        UsageUtilDay,
        _KEY,
        "i.namespace, COALESCE(i.labels ->> %(team)s, ''), i.model, COALESCE(np.pool, ''), i.unit_rule",
    ),
    (
        UsageWorkloadUtilDay,
        _WORKLOAD_KEY,
        "i.namespace, i.workload_kind, i.workload_name, COALESCE(i.labels ->> %(team)s, ''), i.model, i.unit_rule",
    ),
)


def add_utilization(start, end, zone):
    """Add the samples of minutes [start, end) to UsageUtilDay and UsageWorkloadUtilDay (each sample
    stands for one poll period); returns the rows written to each."""
    pools, pool_params = _pools_sql()
    pools = pools.replace("%s", "%(pc)s", 1).replace("%s", "%(pn)s", 1).replace("%s", "%(pp)s", 1)
    step = max(float(monitoring_setting("POLL_SECONDS", 60)), 60.0)
    threshold = float(monitoring_setting("IDLE_THRESHOLD_PERCENT", 5))
    interval, sample = _q(AllocationInterval), _q(UtilizationSample)
    params = {
        "tz": zone.key,
        "team": team_label(),
        "step": step,
        "threshold": threshold,
        "start": start,
        "end": end,
        "pc": pool_params[0],
        "pn": pool_params[1],
        "pp": pool_params[2],
    }
    written = []
    for table, key, columns in _UTIL_TABLES:
        util = _q(table)
        group_by = ", ".join(str(n) for n in range(1, 3 + len(key.split(","))))  # cluster, day and the keys
        # Node pools only where the key has them (the workload sums do not).
        pools_join = (
            f"LEFT JOIN {pools} np ON np.cluster_id = i.cluster_id AND np.node = i.node" if "np." in columns else ""
        )
        sql = f"""
            INSERT INTO {util} (cluster_id, day, {key}, known_seconds, idle_seconds)
            SELECT i.cluster_id, (s.minute AT TIME ZONE %(tz)s)::date, {columns},
                   SUM(i.units * %(step)s),
                   COALESCE(SUM(i.units * %(step)s) FILTER (WHERE s.gpu_util < %(threshold)s), 0)
            FROM {sample} s
            JOIN {interval} i ON i.cluster_id = s.cluster_id AND i.driver = s.driver AND i.pool = s.pool
                 AND i.device = s.device AND i.started_at <= s.minute AND (i.ended_at IS NULL OR i.ended_at > s.minute)
            {pools_join}
            WHERE s.minute >= %(start)s AND s.minute < %(end)s AND s.gpu_util IS NOT NULL AND NOT i.admin_access
              AND i.started_at < %(end)s AND (i.ended_at IS NULL OR i.ended_at > %(start)s)
            GROUP BY {group_by}
            ON CONFLICT (day, cluster_id, {key}) DO UPDATE SET
                known_seconds = {util}.known_seconds + EXCLUDED.known_seconds,
                idle_seconds = {util}.idle_seconds + EXCLUDED.idle_seconds
        """
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            written.append(cursor.rowcount)
    return tuple(written)


def refresh_totals():
    total, day = _q(UsageTotal), _q(UsageDay)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {total}")
        cursor.execute(
            f"INSERT INTO {total} (cluster_id, namespace, model, unit_rule, gpu_seconds) "
            f"SELECT cluster_id, namespace, model, unit_rule, SUM(gpu_seconds) FROM {day} "
            "GROUP BY cluster_id, namespace, model, unit_rule"
        )


def run(now=None, rebuild=False):
    """Bring the rollup up to date; returns what it did ({} on SQLite)."""
    if connection.vendor != "postgresql":
        return {}
    now = now or timezone.now()
    zone = report_zone()
    today = now.astimezone(zone).date()
    done = {"zone": zone.key}
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
        state, _ = RollupState.objects.get_or_create(pk=1, defaults={"zone": zone.key})
        if rebuild or state.zone != zone.key:
            # Days of another zone (or a rebuild asked for): start over, utilization sums too.
            UsageDay.objects.all().delete()
            UsageWorkloadDay.objects.all().delete()
            UsageUtilDay.objects.all().delete()
            UsageWorkloadUtilDay.objects.all().delete()
            state.zone, state.complete_before, state.gap_seen, state.util_through = zone.key, None, 0, None
        earliest = AllocationInterval.objects.aggregate(m=Min("started_at"))["m"]
        first = today if earliest is None else earliest.astimezone(zone).date()
        if state.complete_before is not None:
            first = max(first, min(state.complete_before, today - timedelta(days=settings.USAGE_ROLLUP_SETTLE_DAYS)))
        gaps = LedgerGap.objects.filter(pk__gt=state.gap_seen).aggregate(m=Min("started_at"), top=Max("pk"))
        if gaps["m"] is not None:
            first = min(first, gaps["m"].astimezone(zone).date())
            state.gap_seen = gaps["top"]
        rows = workload_rows = 0
        day = first
        while day < today:
            end = min(day + timedelta(days=CHUNK_DAYS), today)
            written = rebuild_days(day, end, zone, now)
            rows, workload_rows = rows + written[0], workload_rows + written[1]
            day = end
        done.update(
            rebuilt_from=first.isoformat(), rebuilt_to=today.isoformat(), day_rows=rows, workload_day_rows=workload_rows
        )
        state.complete_before = today
        refresh_totals()

        # Utilization: the minutes stored since the last run, up to the last whole minute (a poll can
        # still replace the current one).
        until = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
        start = state.util_through or UtilizationSample.objects.aggregate(m=Min("minute"))["m"]
        if start is not None and start < until:
            done["util_rows"], done["workload_util_rows"] = add_utilization(start, until, zone)
            state.util_through = until
        state.updated_at = now
        state.save()
    return done


def metric_families():
    """gpudash_gpu_seconds_total: GPU-seconds by cluster, namespace, model and unit rule, every rolled
    day (UsageTotal) plus the ledger since (today, open intervals up to now)."""
    from prometheus_client.core import CounterMetricFamily

    from mirror.models import Cluster

    from .models import UsageTotal
    from .reports import _ledger_rows

    names = dict(Cluster.objects.values_list("id", "name"))
    now = timezone.now()
    sums = {}
    state = RollupState.objects.filter(pk=1).first() if connection.vendor == "postgresql" else None
    if state is not None and state.complete_before is not None:
        for cid, ns, model, rule, s in UsageTotal.objects.values_list(
            "cluster_id", "namespace", "model", "unit_rule", "gpu_seconds"
        ):
            sums[(cid, ns, model, rule)] = sums.get((cid, ns, model, rule), 0.0) + s
        since = local_midnight(state.complete_before, report_zone(state.zone))
    else:
        earliest = AllocationInterval.objects.aggregate(m=Min("started_at"))["m"]
        since = earliest or now
    for (cid, ns, rule, model, _admin), s in _ledger_rows(since, now, now, {}, ("cluster", "namespace")).items():
        sums[(cid, ns, model, rule)] = sums.get((cid, ns, model, rule), 0.0) + s
    family = CounterMetricFamily(
        "gpudash_gpu_seconds",
        "Whole-GPU-equivalent seconds allocated (usage ledger), by unit rule (whole, partition, capacity, admin).",
        labels=["cluster", "namespace", "model", "unit_rule"],
    )
    for (cid, ns, model, rule), s in sorted(sums.items(), key=lambda kv: (str(kv[0][0]), *kv[0][1:])):
        family.add_metric([names.get(cid, ""), ns, model, rule], s)
    yield family


def queue_families():
    """gpudash_ledger_queued_events and gpudash_ledger_queue_age_seconds: claim events the sync queued
    that no fold has written into the ledger yet, per cluster, and how long the oldest has waited. A
    queue that keeps growing or ageing means no worker folds it (usage/ledger.py)."""
    from prometheus_client.core import GaugeMetricFamily

    from mirror.models import Cluster

    from .ledger import queued_events

    names = dict(Cluster.objects.values_list("id", "name"))
    now = timezone.now()
    count = GaugeMetricFamily(
        "gpudash_ledger_queued_events", "Claim events queued for the usage ledger, not folded yet.", labels=["cluster"]
    )
    age = GaugeMetricFamily(
        "gpudash_ledger_queue_age_seconds",
        "Seconds since the oldest queued claim event was observed (0 when the queue is empty).",
        labels=["cluster"],
    )
    queued = queued_events()
    for cid, name in sorted(names.items()):
        n, oldest = queued.get(cid, (0, None))
        count.add_metric([name], n)
        age.add_metric([name], max((now - oldest).total_seconds(), 0.0) if oldest else 0.0)
    yield count
    yield age
