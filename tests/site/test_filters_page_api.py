"""One FilterSet per list: a list page and its API endpoint give the same rows for the same filter.

The fleet is the UI tests' cluster "alpha" plus the demo scenario (every state, a few hundred rows);
each case is a filter that keeps some rows and drops others, so a page that filtered by other rules
than its endpoint (containment vs. icontains, another state vocabulary) would list other rows.
"""

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from claims.models import Finding
from claims.stuck import DELETION_BLOCKED, STALE_RESERVATION
from mirror import debounce
from mirror.models import Cluster
from tests.api_fixtures import client_for
from tests.fleet_data import load_scenario
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


@pytest.fixture(scope="module")
def fleets(django_db_setup, django_db_blocker):
    """Both fleets, committed once for the module: every test only reads them (what a test adds is rolled
    back with it), and loading them took seconds a test. The tables are emptied after the module, as a
    transactional test's flush does."""
    with django_db_blocker.unblock():
        load_fleet("alpha")
        load_scenario(Cluster.objects.create(name="demo"))
    # Committed, the loads asked for the class recount (a timer thread without Redis): not run, as when
    # each test loaded the fleets in its own rolled-back transaction.
    debounce.stop_pending()
    yield
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def users(fleets, client):
    user = make_user("alice")
    client.force_login(user)
    return client, client_for(user)


def _page_rows(client, url_name, params):
    resp = client.get(reverse(url_name), {**params, "per_page": 1000})
    assert resp.status_code == 200
    ctx = resp.context
    if url_name == "claims:claim-list":
        return {(c.cluster_name, c.namespace, c.name) for c in ctx["page_obj"].object_list}
    if url_name == "claims:pod-list":
        return {(p.cluster_name, p.namespace, p.name) for p in ctx["pods"]}
    if url_name == "claims:template-list":
        return {(t.cluster.name, t.namespace, t.name) for t in ctx["page_obj"].object_list}
    if url_name == "inventory:slice-list":
        return {(s.cluster.name, s.name) for s in ctx["page_obj"].object_list}
    if url_name == "inventory:node-list":
        return {(n.cluster_name, n.name) for n in ctx["nodes"]}
    if url_name == "inventory:device-list":
        return {(d.cluster_name, d.node_name, d.pool, d.name) for d in ctx["devices"]}
    raise AssertionError(url_name)


def _api_rows(api, path, params):
    resp = api.get(path, {**params, "page_size": 1000})
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert not body.get("next")
    rows = body["results"]
    if path == "/api/v1/claims/":
        return {(r["cluster"], r["namespace"], r["name"]) for r in rows}
    if path == "/api/v1/pods/":  # the page lists the pods that use claims
        return {(r["cluster"], r["namespace"], r["name"]) for r in rows if r["claims"]}
    if path == "/api/v1/claim-templates/":
        return {(r["cluster"], r["namespace"], r["name"]) for r in rows}
    if path == "/api/v1/resource-slices/":
        return {(r["cluster"], r["name"]) for r in rows}
    if path == "/api/v1/nodes/":
        return {(r["cluster"], r["name"]) for r in rows}
    if path == "/api/v1/devices/":
        return {(r["cluster"], r["node"], r["pool"], r["name"]) for r in rows}
    raise AssertionError(path)


LISTS = {
    "claims:claim-list": "/api/v1/claims/",
    "claims:pod-list": "/api/v1/pods/",
    "claims:template-list": "/api/v1/claim-templates/",
    "inventory:slice-list": "/api/v1/resource-slices/",
    "inventory:node-list": "/api/v1/nodes/",
    "inventory:device-list": "/api/v1/devices/",
}

CASES = [
    ("claims:claim-list", {"state": "allocated"}),
    ("claims:claim-list", {"state": "stuck"}),
    ("claims:claim-list", {"state": "pending", "namespace": "team-a"}),
    ("claims:claim-list", {"device_class": "mig.nvidia.com"}),
    ("claims:claim-list", {"device_class": "gpu.nvidia.com", "node": "node-a"}),
    ("claims:claim-list", {"q": "TRAIN"}),  # the name or the owner pod's, any case
    ("claims:pod-list", {"phase": "Pending"}),
    ("claims:pod-list", {"q": "pod", "namespace": "team-a"}),
    ("claims:pod-list", {"node": "node-a"}),
    ("claims:template-list", {"device_class": "h100.nvidia.com"}),
    ("claims:template-list", {"namespace": "inference"}),
    ("inventory:slice-list", {"node": "node-b"}),
    ("inventory:node-list", {"ready": "false"}),
    ("inventory:node-list", {"q": "NODE-"}),
    ("inventory:node-list", {"min_free_gpus": "2", "gpu_source": "dra"}),
    ("inventory:device-list", {"fleet_state": "free"}),
    ("inventory:device-list", {"fleet_state": "stuck"}),
    ("inventory:device-list", {"fleet_state": "unhealthy"}),
    ("inventory:device-list", {"flag": "tainted"}),
    ("inventory:device-list", {"kind": "partition"}),
    ("inventory:device-list", {"q": "productName = NVIDIA A100 80GB PCIe; memory >= 40Gi"}),
    ("inventory:device-list", {"q": "profile ~ 1g"}),  # answered in SQL
    ("inventory:device-list", {"q": "node ~ NODE-B"}),  # checked in Python after SQL
    ("inventory:device-list", {"q": "memory >= 40Gi", "node": "node-c"}),
]


@pytest.mark.parametrize("url_name, params", CASES, ids=[f"{u}?{p}" for u, p in CASES])
def test_page_and_api_list_the_same_rows(users, url_name, params):
    client, api = users
    path = LISTS[url_name]
    everything = _api_rows(api, path, {})
    rows = _api_rows(api, path, params)
    assert rows and rows < everything, "a case that keeps everything or nothing would compare nothing"
    assert _page_rows(client, url_name, params) == rows


def test_page_state_is_the_api_fleet_state_and_old_page_names_still_work(users):
    client, api = users
    for state in ("allocated", "partial", "tainted", "stuck"):
        expected = _api_rows(api, "/api/v1/devices/", {"fleet_state": state})
        assert _page_rows(client, "inventory:device-list", {"state": state}) == expected, state
    expected = _api_rows(api, "/api/v1/claims/", {"device_class": "mig.nvidia.com"})
    assert _page_rows(client, "claims:claim-list", {"class": "mig.nvidia.com"}) == expected


@pytest.mark.parametrize(
    "path, params, field, message",
    [
        ("/api/v1/devices/", {"q": "memory >> 4"}, "q", "expected `name op value`"),
        ("/api/v1/devices/", {"q": "nosuchattr = 1"}, "q", "no device publishes"),
        ("/api/v1/devices/", {"fleet_state": "broken"}, "fleet_state", "Unknown state 'broken'"),
        ("/api/v1/devices/", {"flag": "broken"}, "flag", "Unknown flag 'broken'"),
        ("/api/v1/claims/", {"q": "x" * 1001}, "q", "at most 1000 characters"),
        ("/api/v1/nodes/", {"min_free_gpus": "x"}, "min_free_gpus", "must be a whole number"),
    ],
)
def test_api_rejects_what_the_page_rejects(users, path, params, field, message):
    _client, api = users
    resp = api.get(path, params)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["field"] == field and message in error["message"], error


@pytest.mark.parametrize(
    "page_params, api_params",
    [
        ({}, {}),  # open findings by default
        ({"history": "1"}, {"active": "all"}),
        ({"rule": STALE_RESERVATION, "history": "1"}, {"rule": STALE_RESERVATION, "active": "all"}),
        ({"namespace": "team-a"}, {"namespace": "team-a"}),
        ({"claim_name": "stuck-claim", "history": "1"}, {"claim": "stuck-claim", "active": "all"}),
        ({"severity": "critical", "history": "1"}, {"severity": "critical", "active": "all"}),
    ],
)
def test_stuck_page_and_findings_api_list_the_same_findings(users, page_params, api_params):
    client, api = users
    alpha, now = Cluster.objects.get(name="alpha"), timezone.now()
    common = {"cluster": alpha, "summary": "test finding", "first_seen": now, "last_seen": now}
    Finding.objects.create(rule=STALE_RESERVATION, namespace="team-a", claim_name="train-1", claim_uid="u1", **common)
    Finding.objects.create(
        rule=DELETION_BLOCKED, namespace="team-b", claim_name="stuck-claim", claim_uid="u2", cleared_at=now, **common
    )
    Finding.objects.create(
        rule=STALE_RESERVATION, namespace="team-b", claim_name="other", claim_uid="u3", severity="critical", **common
    )
    everything = {f.id for f in Finding.objects.all()}
    body = api.get("/api/v1/findings", {**api_params, "page_size": 1000}).json()
    rows = {r["id"] for r in body["results"]}
    assert rows and rows <= everything
    page = client.get(reverse("ops:stuck"), {**page_params, "per_page": 1000})
    assert {f.id for f in page.context["page_obj"].object_list} == rows
