"""Usage reports on PostgreSQL: GPU-hours across day, week and month boundaries, in other time zones and
across DST changes; per unit rule; admin access apart; open intervals up to now; the daily rollups (by
the report keys, by workload) give the same figures as the ledger, rebuild the days a late gap touches;
idle GPU-hours from DCGM samples; cost from prices."""

import random
from datetime import date, timedelta
from zoneinfo import ZoneInfo

import pytest

from mirror.models import Cluster
from monitoring.models import UtilizationSample
from usage import reports, rollup
from usage.models import LedgerGap, RollupState, UsageDay, UsageWorkloadDay
from usage.periods import Period, parse_period, period_containing

from .usage_fixtures import interval, utc

pytestmark = pytest.mark.django_db
UTC_ZONE = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")
SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = utc(2026, 11, 20, 12)


@pytest.fixture
def alpha():
    return Cluster.objects.create(name="alpha")


def hours(period, group_by="namespace", now=NOW, **where):
    rows, admin, _source = reports.build_rows(period, where, group_by, now)
    return {tuple(r.key.values()): round(r.gpu_hours, 6) for r in rows}, {
        tuple(r.key.values()): round(r.gpu_hours, 6) for r in admin
    }


def day(d, zone=UTC_ZONE):
    return Period("day", d, zone)


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_day_boundary_splits_an_interval(alpha):
    interval(alpha, "team-a", utc(2026, 3, 1, 22), utc(2026, 3, 2, 2))
    assert hours(day(date(2026, 3, 1)))[0] == {("team-a",): 2.0}
    assert hours(day(date(2026, 3, 2)))[0] == {("team-a",): 2.0}
    assert hours(day(date(2026, 3, 3)))[0] == {}


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_the_time_zone_moves_the_boundary(alpha):
    interval(alpha, "team-a", utc(2026, 3, 1, 22), utc(2026, 3, 2, 2))
    # 06:00-10:00 on March 2 in Shanghai: all four hours on the local day after.
    assert hours(day(date(2026, 3, 1), SHANGHAI))[0] == {}
    assert hours(day(date(2026, 3, 2), SHANGHAI))[0] == {("team-a",): 4.0}
    # 23:00 March 1 to 03:00 March 2 in Berlin (UTC+1 in March): one hour, then three.
    assert hours(day(date(2026, 3, 1), BERLIN))[0] == {("team-a",): 1.0}
    assert hours(day(date(2026, 3, 2), BERLIN))[0] == {("team-a",): 3.0}


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_dst_days_are_23_and_25_hours(alpha):
    interval(alpha, "team-a", utc(2026, 3, 27), utc(2026, 11, 1))
    spring, autumn = day(date(2026, 3, 29), BERLIN), day(date(2026, 10, 25), BERLIN)
    assert (spring.hours, autumn.hours) == (23.0, 25.0)
    assert hours(spring)[0] == {("team-a",): 23.0}
    assert hours(autumn)[0] == {("team-a",): 25.0}
    # The month of March in Berlin: 31 days less the hour skipped, from the 27th (UTC midnight = 01:00 local).
    march = Period("month", date(2026, 3, 1), BERLIN)
    assert hours(march)[0] == {("team-a",): 5 * 24 - 1 - 1.0}


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_week_and_month_boundaries(alpha):
    # Saturday Jan 31 20:00 to Monday Feb 2 04:00 (UTC): Jan 4 h + Feb 28 h; ISO week 5 ends Sunday Feb 1.
    interval(alpha, "team-a", utc(2026, 1, 31, 20), utc(2026, 2, 2, 4), units=0.5, rule="partition")
    jan, feb = Period("month", date(2026, 1, 1), UTC_ZONE), Period("month", date(2026, 2, 1), UTC_ZONE)
    assert hours(jan)[0] == {("team-a",): 2.0} and hours(feb)[0] == {("team-a",): 14.0}
    week5 = period_containing("week", date(2026, 2, 1), UTC_ZONE)
    assert week5.first_day == date(2026, 1, 26) and week5.label == "2026-W05"
    assert hours(week5)[0] == {("team-a",): 14.0}
    assert hours(Period("week", date(2026, 2, 2), UTC_ZONE))[0] == {("team-a",): 2.0}
    assert jan.previous() == Period("month", date(2025, 12, 1), UTC_ZONE)


def test_parse_period_reads_and_refuses():
    assert parse_period("month", "2026-02", UTC_ZONE, NOW).first_day == date(2026, 2, 1)
    assert parse_period("week", "2026-W05", UTC_ZONE, NOW).first_day == date(2026, 1, 26)
    assert parse_period("day", "", UTC_ZONE, NOW).first_day == date(2026, 11, 20)
    with pytest.raises(ValueError, match="YYYY-MM"):
        parse_period("month", "Feb", UTC_ZONE, NOW)


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_open_intervals_count_up_to_now_and_rules_and_admin_apart(alpha):
    interval(alpha, "team-a", utc(2026, 11, 20, 8))  # open: 4 h by NOW
    interval(alpha, "team-a", utc(2026, 11, 20, 0), utc(2026, 11, 20, 2), units=0.25, rule="capacity")
    interval(alpha, "team-a", utc(2026, 11, 20, 0), utc(2026, 11, 20, 3), admin=True)
    rows, admin, _ = reports.build_rows(day(date(2026, 11, 20)), {}, "namespace", NOW)
    assert [(r.key, round(r.by_rule["whole"], 6), round(r.by_rule["capacity"], 6)) for r in rows] == [
        ({"namespace": "team-a"}, 4.0, 0.5)
    ]
    assert [(a.key, a.by_rule) for a in admin] == [({"namespace": "team-a"}, {"admin": 3.0})]


def test_groupings_and_filters(alpha, settings):
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "NODE_POOL_LABELS": ["pool"]}
    from inventory.models import Node

    Node.objects.create(cluster=alpha, name="node-a", uid="n-a", labels={"pool": "train-pool"}, raw={})
    interval(alpha, "team-a", utc(2026, 5, 1, 0), utc(2026, 5, 1, 1), team="vision", workload=("Job", "a"))
    interval(alpha, "team-b", utc(2026, 5, 1, 0), utc(2026, 5, 1, 2), team="vision", model="H100", node="node-b")
    d = day(date(2026, 5, 1))
    assert hours(d, "team")[0] == {("vision",): 3.0}
    assert hours(d, "model")[0] == {("NVIDIA A100-SXM4-80GB",): 1.0, ("H100",): 2.0}
    assert hours(d, "node_pool")[0] == {("train-pool",): 1.0, ("",): 2.0}
    assert hours(d, "workload")[0] == {("team-a", "Job", "a"): 1.0, ("team-b", "Job", "train"): 2.0}
    assert hours(d, "namespace", model="H100")[0] == {("team-b",): 2.0}
    assert hours(d, "namespace", node_pool="train-pool")[0] == {("team-a",): 1.0}
    assert hours(d, "namespace", namespaces=["team-a"])[0] == {("team-a",): 1.0}


def random_ledger(cluster, seed, start, days):
    rng = random.Random(seed)
    for i in range(150):
        begin = start + timedelta(minutes=rng.randrange(days * 1440))
        end = None if i % 17 == 0 else begin + timedelta(minutes=rng.randrange(1, 3 * 1440))
        end = None if end is not None and end >= NOW else end
        rule = rng.choice(["whole", "partition", "capacity"])
        interval(
            cluster,
            rng.choice(["ns-a", "ns-b", "ns-c"]),
            begin,
            end,
            units=1.0 if rule == "whole" else rng.choice([0.125, 0.5]),
            rule=rule,
            team=rng.choice(["", "red", "blue"]),
            model=rng.choice(["A100", "H100"]),
            admin=rng.random() < 0.05,
            workload=rng.choice([("Job", "train"), ("Job", "eval"), ("Deployment", "serve")]),
        )


def costs(period, group_by, **where):
    rows, _admin, source = reports.build_rows(period, where, group_by, NOW)
    return {tuple(r.key.values()): r.cost for r in rows}, source


# Reports by or filtered on workload read UsageWorkloadDay (team too); with node pool, only the ledger has the keys.
WORKLOAD_REPORTS = [
    ("workload", {}),
    ("workload", {"model": "H100", "unit_rule": "partition"}),
    ("workload", {"namespace": "ns-b", "namespaces": ["ns-a", "ns-b"]}),
    ("namespace", {"workload_name": "train"}),
    ("model", {"workload_kind": "Deployment", "workload_name": "serve"}),
    ("workload", {"team": "red"}),
    ("team", {"workload_name": "train"}),
    ("workload", {"node_pool": ""}),
]


@pytest.mark.parametrize("zone", [UTC_ZONE, BERLIN])
def test_rollup_gives_the_ledgers_figures(alpha, settings, zone):
    settings.USAGE_TIME_ZONE = zone.key
    settings.USAGE_PRICES = {"A100": 2.0, "*": 1.5}
    random_ledger(alpha, 7, utc(2026, 9, 20), 60)
    # Days, weeks and months around the end of DST in Berlin (October 25), a month boundary, today.
    periods = [
        period_containing(kind, d, zone)
        for kind in ("day", "week", "month")
        for d in (date(2026, 10, 25), date(2026, 11, 1), date(2026, 11, 19), date(2026, 11, 20))
    ]
    reports_ = [(g, {}) for g in reports.GROUPS if g != "node_pool"] + WORKLOAD_REPORTS
    wanted = {(p, i): hours(p, g, **where) for p in periods for i, (g, where) in enumerate(reports_)}
    wanted_cost = {(p, i): costs(p, g, **where)[0] for p in periods for i, (g, where) in enumerate(WORKLOAD_REPORTS)}
    done = rollup.run(NOW)
    assert done["rebuilt_to"] == "2026-11-20" and UsageDay.objects.exists() and done["workload_day_rows"] > 0
    assert UsageWorkloadDay.objects.count() == done["workload_day_rows"]
    for (p, i), figures in wanted.items():
        got = hours(p, reports_[i][0], **reports_[i][1])
        for part in (0, 1):
            assert got[part].keys() == figures[part].keys(), (p, reports_[i])
            for key, h in figures[part].items():
                assert got[part][key] == pytest.approx(h, abs=1e-6), (p, reports_[i], key)
    for (p, i), figures in wanted_cost.items():
        g, where = WORKLOAD_REPORTS[i]
        assert costs(p, g, **where)[0] == pytest.approx(figures, abs=1e-6), (p, g, where)
    november = periods[-1]  # the rollup's 19 days, then today from the ledger
    for g, where in [("namespace", {}), *WORKLOAD_REPORTS[:-1]]:
        _rows, _admin, source = reports.build_rows(november, where, g, NOW)
        assert source["rollup_days"] == 19 and source["ledger_from"] == november.start + timedelta(days=19), (g, where)
    # By workload and node pool: UsageWorkloadDay has no node pool, the ledger answers for the whole month.
    assert costs(november, "workload", node_pool="")[1] == {"rollup_days": 0, "ledger_from": november.start}


def test_a_late_gap_rebuilds_the_days_it_touches(alpha, settings):
    settings.USAGE_TIME_ZONE = "UTC"
    settings.USAGE_ROLLUP_SETTLE_DAYS = 1
    row = interval(alpha, "ns-a", utc(2026, 11, 1), None)
    rollup.run(NOW)
    nov5 = day(date(2026, 11, 5))
    assert hours(nov5)[0] == {("ns-a",): 24.0}
    assert hours(nov5, "workload")[0] == {("ns-a", "Job", "train"): 24.0}
    # A relist finds the allocation gone: the ledger ends it at the gap's start, days ago.
    row.ended_at, row.end_exact = utc(2026, 11, 5, 6), False
    row.save()
    LedgerGap.objects.create(cluster=alpha, started_at=utc(2026, 11, 5, 6), ended_at=utc(2026, 11, 20, 11))
    rollup.run(NOW + timedelta(minutes=10))
    assert hours(nov5)[0] == {("ns-a",): 6.0}
    assert hours(nov5, "workload")[0] == {("ns-a", "Job", "train"): 6.0}
    assert hours(day(date(2026, 11, 10)))[0] == {}
    assert hours(day(date(2026, 11, 10)), "workload")[0] == {}
    assert RollupState.objects.get().gap_seen == LedgerGap.objects.get().pk


def test_a_new_time_zone_rebuilds_the_rollup(alpha, settings):
    settings.USAGE_TIME_ZONE = "UTC"
    interval(alpha, "ns-a", utc(2026, 11, 1, 22), utc(2026, 11, 2, 2))
    rollup.run(NOW)
    settings.USAGE_TIME_ZONE = "Asia/Shanghai"
    assert reports.rollup_state(SHANGHAI) is None  # until rebuilt the ledger answers
    assert hours(day(date(2026, 11, 2), SHANGHAI))[0] == {("ns-a",): 4.0}
    assert UsageWorkloadDay.objects.filter(day=date(2026, 11, 1)).exists()  # UTC days: two of them
    rollup.run(NOW)
    for table in (UsageDay, UsageWorkloadDay):
        assert set(table.objects.values_list("day", flat=True)) == {date(2026, 11, 2)}
    assert hours(day(date(2026, 11, 2), SHANGHAI))[0] == {("ns-a",): 4.0}
    assert hours(day(date(2026, 11, 2), SHANGHAI), "workload")[0] == {("ns-a", "Job", "train"): 4.0}
    # An explicit rebuild empties and refills both.
    UsageWorkloadDay.objects.update(gpu_seconds=1.0)
    rollup.run(NOW, rebuild=True)
    assert list(UsageWorkloadDay.objects.values_list("day", "gpu_seconds")) == [(date(2026, 11, 2), 4 * 3600.0)]


def test_idle_gpu_hours_from_dcgm_samples_and_cost(alpha, settings):
    settings.USAGE_TIME_ZONE = "UTC"
    settings.USAGE_PRICES = {"A100": 2.0, "*": 1.0}
    settings.GPUDASH_MONITORING = {**settings.GPUDASH_MONITORING, "POLL_SECONDS": 60, "IDLE_THRESHOLD_PERCENT": 5}
    busy = interval(alpha, "ns-a", utc(2026, 11, 20, 9), utc(2026, 11, 20, 10), team="red", model="A100")
    half = interval(
        alpha,
        "ns-b",
        utc(2026, 11, 20, 9),
        utc(2026, 11, 20, 10),
        units=0.5,
        rule="partition",
        workload=("Deployment", "serve"),
    )
    for minute in range(60):
        when = utc(2026, 11, 20, 9, minute)
        for row, util in ((busy, 3.0 if minute < 30 else 80.0), (half, 1.0)):
            UtilizationSample.objects.create(
                cluster=alpha, driver=row.driver, pool=row.pool, device=row.device, minute=when, gpu_util=util
            )
    rollup.run(NOW)
    report = reports.build_report(day(date(2026, 11, 20)), "team", trend=1, now=NOW)
    by_team = {r.key["team"]: r for r in report.rows}
    red, none = by_team["red"], by_team[""]
    assert (red.gpu_hours, red.known, red.idle, red.used) == (1.0, 1.0, 0.5, 0.5)
    assert (red.cost, red.idle_cost) == (2.0, 1.0)
    assert (none.gpu_hours, none.known, none.idle, none.cost, none.idle_cost) == (0.5, 0.5, 0.5, 0.5, 0.5)
    assert report.cluster_total == 1.5 and report.idle == 1.0 and report.trend[0][1] == 0
    # By workload: the sums kept by UsageWorkloadDay's keys.
    by_workload = reports.build_report(day(date(2026, 11, 20)), "workload", trend=0, now=NOW)
    assert [(r.key["workload_name"], r.gpu_hours, r.known, r.idle, r.idle_cost) for r in by_workload.rows] == [
        ("train", 1.0, 1.0, 0.5, 1.0),
        ("serve", 0.5, 0.5, 0.5, 0.5),
    ]
    one = reports.build_report(day(date(2026, 11, 20)), "model", {"workload_name": "train"}, trend=0, now=NOW)
    assert [(r.gpu_hours, r.known, r.idle) for r in one.rows] == [(1.0, 1.0, 0.5)]
    # A team's workloads: the workload sums keep the team.
    red = reports.build_report(day(date(2026, 11, 20)), "workload", {"team": "red"}, trend=0, now=NOW)
    assert [(r.key["workload_name"], r.gpu_hours, r.known, r.idle) for r in red.rows] == [("train", 1.0, 1.0, 0.5)]
    # Workload with node pool: only the ledger has both keys, and the samples are not kept by them.
    mixed = reports.build_report(day(date(2026, 11, 20)), "node_pool", {"workload_name": "train"}, trend=0, now=NOW)
    assert [(r.gpu_hours, r.known) for r in mixed.rows] == [(1.0, 0.0)]
    # A second run adds nothing twice; a rebuild sums the stored samples again, once.
    rollup.run(NOW + timedelta(minutes=10))
    again = reports.build_report(day(date(2026, 11, 20)), "team", trend=0, now=NOW)
    assert [(r.known, r.idle) for r in again.rows] == [(1.0, 0.5), (0.5, 0.5)]
    rollup.run(NOW + timedelta(minutes=20), rebuild=True)
    for group in ("team", "workload"):
        rebuilt = reports.build_report(day(date(2026, 11, 20)), group, trend=0, now=NOW)
        assert [(r.known, r.idle) for r in rebuilt.rows] == [(1.0, 0.5), (0.5, 0.5)], group


@pytest.mark.sqlite_default  # the embedded default reads the ledger alike
def test_trend_lists_previous_periods(alpha):
    for d in (17, 18, 19):
        interval(alpha, "ns-a", utc(2026, 11, d, 0), utc(2026, 11, d, d - 16))
    report = reports.build_report(day(date(2026, 11, 20)), trend=3, now=NOW)
    assert [(p.label, h) for p, h in report.trend] == [("2026-11-19", 3.0), ("2026-11-18", 2.0), ("2026-11-17", 1.0)]
    assert report.rows == []
