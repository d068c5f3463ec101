"""The usage report through every door: the page, GET /api/v1/usage, its CSV (API and page link) and
`manage.py usage_report` give the same figures; the scope matrix (a scoped user sees its namespaces
only, cluster totals only admins); bad parameters are 400s that say why; /metrics counts GPU-seconds."""

import csv
import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client

from mirror import roles
from mirror.models import Cluster
from tests.api_fixtures import client_for
from tests.fleet_data import make_user
from usage import rollup
from usage.models import LedgerGap

from .usage_fixtures import interval, utc

pytestmark = pytest.mark.django_db
OWN, OTHER = "team-a", "team-b"
OCTOBER = {"period": "month", "date": "2026-10-01", "trend": "2"}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.USAGE_TIME_ZONE = "Europe/Berlin"


@pytest.fixture
def ledger():
    alpha = Cluster.objects.create(name="alpha")
    # October 2026 in Berlin (DST ends on the 25th): whole GPUs, partitions, a capacity share, admin access.
    interval(alpha, OWN, utc(2026, 10, 24, 20), utc(2026, 10, 26, 2), team="vision", workload=("Job", "train"))
    interval(alpha, OWN, utc(2026, 10, 1, 0), utc(2026, 10, 2, 0), units=0.5, rule="partition", model="H100")
    interval(alpha, OTHER, utc(2026, 9, 30, 20), utc(2026, 10, 1, 10), team="speech", workload=("Deployment", "web"))
    interval(alpha, OTHER, utc(2026, 10, 31, 20), utc(2026, 11, 1, 3), units=0.25, rule="capacity")
    interval(alpha, OTHER, utc(2026, 10, 3, 0), utc(2026, 10, 3, 5), admin=True)
    interval(alpha, OWN, utc(2026, 9, 10, 0), utc(2026, 9, 11, 0))  # September: the trend
    return alpha


@pytest.fixture
def users():
    return {
        "scoped-viewer": make_user("vic", roles.VIEWER, namespaces=[OWN]),
        "scoped-operator": make_user("sco", roles.OPERATOR, namespaces=[OWN]),
        "viewer": make_user("una", roles.VIEWER),
        "admin": make_user("ada", roles.ADMIN),
    }


def page_client(user):
    client = Client()
    client.force_login(user)
    return client


def api_rows(body):
    return {tuple(r[c] for c in body["group_columns"]): r["gpu_hours"] for r in body["results"]}


def csv_rows(text, columns):
    sums = {}
    for line in csv.DictReader(io.StringIO(text)):
        if line["admin_access"] == "true":
            continue
        key = tuple(line[c] for c in columns)
        sums[key] = round(sums.get(key, 0.0) + float(line["gpu_hours"]), 4)
    return sums


def page_rows(html):
    return {
        tuple(key.split("/")): float(hours)
        for key, hours in re.findall(r'<tr data-key="([^"]*)">.*?data-gpu-hours="([^"]+)"', html, re.S)
    }


@pytest.mark.parametrize("group_by", ["namespace", "team", "model", "workload"])
@pytest.mark.parametrize("rolled", [False, True])
def test_page_api_csv_and_command_agree(ledger, users, group_by, rolled):
    if rolled:
        rollup.run()
    params = {**OCTOBER, "group_by": group_by}
    body = client_for(users["admin"]).get("/api/v1/usage", params).json()
    wanted = api_rows(body)
    assert wanted and body["period"]["hours"] == 31 * 24 + 1  # the hour DST gives back
    # Rolled up, every grouping (workload too: UsageWorkloadDay) reads October's 31 days from the rollup.
    assert body["source"] == {
        "rollup_days": 31 if rolled else 0,
        "ledger_from": None if rolled else body["period"]["start"],
    }
    columns = body["group_columns"]
    api_csv = client_for(users["admin"]).get("/api/v1/usage/csv", params)
    assert api_csv["Content-Type"].startswith("text/csv")
    assert csv_rows(api_csv.content.decode(), columns) == pytest.approx(wanted, abs=1e-3)
    browser = page_client(users["admin"])
    page = browser.get("/usage/", params)
    assert page.status_code == 200
    assert page_rows(page.content.decode()) == pytest.approx(wanted, abs=1e-3)
    page_csv = browser.get("/usage/report.csv", params).content.decode()
    assert csv_rows(page_csv, columns) == pytest.approx(wanted, abs=1e-3)
    out = io.StringIO()
    call_command(
        "usage_report", period="month", date="2026-10-01", trend=2, group_by=group_by, format="json", stdout=out
    )
    command = json.loads(out.getvalue())
    assert api_rows(command) == wanted
    assert {k: v for k, v in command.items() if k != "computed_at"} == {
        k: v for k, v in body.items() if k != "computed_at"
    }
    out = io.StringIO()
    call_command("usage_report", period="month", date="2026-10-01", group_by=group_by, format="csv", stdout=out)
    assert csv_rows(out.getvalue(), columns) == pytest.approx(wanted, abs=1e-3)


def test_the_october_figures(ledger, users):
    body = client_for(users["admin"]).get("/api/v1/usage", OCTOBER).json()
    # team-a: 30 h over the DST night (20:00 on the 24th to 02:00 on the 26th UTC) + 12 partition-hours;
    # team-b: 12 h of October 1 (Berlin's month starts at 22:00 UTC on Sep 30) + a quarter GPU for the
    # 3 h before November (Berlin's November starts at 23:00 UTC).
    assert api_rows(body) == {(OWN,): 42.0, (OTHER,): 12.75}
    rows = {r["namespace"]: r for r in body["results"]}
    assert rows[OWN]["by_rule"] == {"partition": 12.0, "whole": 30.0}
    assert rows[OTHER]["by_rule"] == {"capacity": 0.75, "whole": 12.0}
    assert rows[OWN]["trend"] == [24.0, 0.0]
    assert body["admin_access"] == [
        {**body["admin_access"][0], "namespace": OTHER, "gpu_hours": 5.0, "by_rule": {"admin": 5.0}}
    ]
    assert body["cluster_total_gpu_hours"] == 54.75 and body["total_by_rule"]["whole"] == 42.0
    assert [t["period"] for t in body["trend"]] == ["2026-09", "2026-08"]
    assert body["ledger_gaps"] == [] and body["ledger_gap_hours"] == 0


def test_the_page_says_when_no_utilization_was_sampled(ledger, users):
    # This ledger has no DCGM samples: used/idle is absent, not "0.00 of 0.00".
    page = page_client(users["admin"]).get("/usage/", OCTOBER).content.decode()
    assert "no utilization samples for these allocations" in page
    assert "idle 0.00 of 0.00" not in page


def test_gaps_in_the_ledger_are_reported(ledger, users):
    LedgerGap.objects.create(
        cluster=ledger, started_at=utc(2026, 10, 30, 22), ended_at=utc(2026, 11, 1, 2), reason="watcher down"
    )
    body = client_for(users["scoped-viewer"]).get("/api/v1/usage", OCTOBER).json()
    # Berlin's October ends at 23:00 UTC on the 31st: 25 hours of the gap are inside it.
    assert body["ledger_gap_hours"] == 25.0
    assert body["ledger_gaps"] == [
        {
            "cluster": "alpha",
            "start": "2026-10-30T22:00:00+00:00",
            "end": "2026-11-01T02:00:00+00:00",
            "reason": "watcher down",
        }
    ]
    page = page_client(users["scoped-viewer"]).get("/usage/", OCTOBER).content.decode()
    assert 'id="usage-gaps"' in page and "25.0 hours in all" in page


USERS = ("scoped-viewer", "scoped-operator", "viewer", "admin")


@pytest.mark.parametrize("who", USERS)
@pytest.mark.parametrize("asked", [None, OWN, OTHER])
def test_scope_matrix(ledger, users, who, asked):
    """Scoped users see their namespaces only, asked or not, by any grouping; the cluster total only admins."""
    scoped = who.startswith("scoped")
    params = {**OCTOBER, **({"namespace": asked} if asked else {})}
    visible = {OWN: 42.0, OTHER: 12.75}
    if scoped:
        visible.pop(OTHER)
    if asked:
        visible = {k: v for k, v in visible.items() if k == asked}
    api = client_for(users[who])
    body = api.get("/api/v1/usage", params).json()
    assert {k[0]: v for k, v in api_rows(body).items()} == visible
    assert body["cluster_total_gpu_hours"] == (54.75 if who == "admin" else None)
    assert [a["namespace"] for a in body["admin_access"]] == ([] if scoped or asked == OWN else [OTHER])
    by_model = api.get("/api/v1/usage", {**params, "group_by": "model"}).json()
    assert sum(r["gpu_hours"] for r in by_model["results"]) == pytest.approx(sum(visible.values()))
    text = api.get("/api/v1/usage/csv", {**params, "group_by": "workload"}).content.decode()
    if scoped:
        assert OTHER not in text and "speech" not in text and "web" not in text
    page = page_client(users[who]).get("/usage/", params).content.decode()
    assert {k[0]: v for k, v in page_rows(page).items()} == visible
    assert ("usage-cluster-total" in page) == (who == "admin")
    if scoped and asked != OTHER:  # (asked for, the page echoes the name given in its form: nothing more)
        assert OTHER not in page and "speech" not in page


def test_bad_parameters_are_400s_that_say_why(ledger, users):
    api = client_for(users["admin"])
    for params, field in (
        ({"period": "year"}, "period"),
        ({"date": "October"}, "date"),
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"group_by": "colour"}, "group_by"),
        ({"trend": "99"}, "trend"),
        ({"unit_rule": "half"}, "unit_rule"),
        ({"cluster": "nope"}, "cluster"),
        ({"colour": "red"}, "colour"),
    ):
        response = api.get("/api/v1/usage", params)
        assert response.status_code == 400, (params, response.content)
        assert field in response.content.decode(), (params, response.content)
    page = page_client(users["admin"]).get("/usage/", {"date": "October"})
    assert page.status_code == 400 and "YYYY-MM-DD" in page.content.decode()
    with pytest.raises(Exception, match="Mars/Olympus"):
        call_command("usage_report", tz="Mars/Olympus", stdout=io.StringIO())
    assert client_for(None).get("/api/v1/usage").status_code in (401, 403)


def test_other_time_zone_and_filters(ledger, users):
    api = client_for(users["admin"])
    # In UTC, team-b's October 1 hours start at midnight: 10 h, and its capacity share 4 h.
    body = api.get("/api/v1/usage", {**OCTOBER, "tz": "UTC"}).json()
    assert api_rows(body)[(OTHER,)] == 11.0 and body["period"]["hours"] == 744
    assert api_rows(api.get("/api/v1/usage", {**OCTOBER, "unit_rule": "partition"}).json()) == {(OWN,): 12.0}
    assert api_rows(api.get("/api/v1/usage", {**OCTOBER, "team": "vision"}).json()) == {(OWN,): 30.0}
    day = api.get("/api/v1/usage", {"period": "day", "date": "2026-10-25", "group_by": "team"}).json()
    assert api_rows(day) == {("vision",): 25.0} and day["period"]["hours"] == 25


def test_workload_filters_read_the_workload_rollup(ledger, users):
    rollup.run()
    api = client_for(users["admin"])
    body = api.get("/api/v1/usage", {**OCTOBER, "workload_name": "train"}).json()
    assert api_rows(body) == {(OWN,): 42.0, (OTHER,): 0.75} and body["source"]["rollup_days"] == 31
    # The workload rollup keeps the team: a team's workloads come from it too.
    body = api.get("/api/v1/usage", {**OCTOBER, "group_by": "workload", "team": "vision"}).json()
    assert api_rows(body) == {(OWN, "Job", "train"): 30.0} and body["source"]["rollup_days"] == 31
    # It has no node pool: a workload by node pool is read from the ledger for the whole month.
    body = api.get("/api/v1/usage", {**OCTOBER, "group_by": "node_pool", "workload_name": "train"}).json()
    assert api_rows(body) == {("",): 42.75} and body["source"]["rollup_days"] == 0


def test_metrics_count_gpu_seconds(ledger, users):
    rollup.run()
    text = Client().get("/metrics").content.decode()
    lines = [line for line in text.splitlines() if line.startswith("gpudash_gpu_seconds_total{")]
    assert any(f'namespace="{OWN}"' in line and 'unit_rule="partition"' in line for line in lines), lines
    total = sum(float(line.rsplit(" ", 1)[1]) for line in lines if 'unit_rule="admin"' not in line)
    # Every ledger hour: 30 + 12 (team-a, October) + 14 + 7 x 0.25 (team-b) + 24 (team-a, September).
    assert total == pytest.approx((30 + 12 + 14 + 1.75 + 24) * 3600)
