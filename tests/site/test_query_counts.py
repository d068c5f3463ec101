"""Query-count baselines per API endpoint and UI page (NetBox style).

Each endpoint and page is requested at two page sizes; the test fails when its query count grows
with the page size, or exceeds the baseline recorded here. A change that adds a query per row shows
up as growth; one that adds a fixed query shows up against the baseline: lower the baseline when a
change saves queries, raise it only with a reason in the commit. The fleet is the UI tests' cluster
"alpha" plus the demo scenario (every state, a few hundred rows), so a page of 1 and a page of 1000
differ.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.authtoken.models import Token

from mirror.models import Cluster
from tests.fleet_data import load_scenario
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]

# API: path -> queries at most (token auth and role are two of them).
API_BASELINES = {
    "/api/v1/clusters/": 4,
    "/api/v1/nodes/": 3,
    "/api/v1/nodes/?ready=false&ordering=-name": 3,
    "/api/v1/device-classes/": 4,
    "/api/v1/resource-slices/": 3,
    "/api/v1/devices/": 4,  # +1: the NotReady nodes read once (devicestate.not_ready_nodes)
    "/api/v1/devices/?state=free&attribute=productName:NVIDIA H100 80GB HBM3&capacity=memory>=40Gi": 6,  # +1: NotReady nodes, read once for the filter and the state
    "/api/v1/devices/?cluster=demo&fleet_state=allocated": 6,
    "/api/v1/devices/?cursor=&state=free": 5,
    # +1: the page's device status entries (status.devices), one prefetch
    "/api/v1/claims/": 6,
    "/api/v1/claims/?state=reserved&ordering=-creation_timestamp": 6,
    "/api/v1/claims/?cursor=&ordering=-namespace,name": 6,
    "/api/v1/claim-templates/": 3,
    # +2: the page's device health reports (a prefetch), and the allocation results their CDI resource
    # IDs resolve through (one query for the page, when it has any)
    "/api/v1/pods/": 6,
    "/api/v1/audit/": 3,
}
# Aggregates have no pages: only the baseline.
API_FIXED = {
    "/api/v1/aggregates/devices": 4,  # +1: NotReady nodes read once instead of an EXISTS per summary row
    "/api/v1/aggregates/devices?group_by=node&group_by=state&cluster=demo": 4,
    "/api/v1/aggregates/allocation": 4,
}
# UI pages: path -> queries at most, at ?per_page=1 and ?per_page=1000 (a viewer: session, user,
# its groups, once per role check).
PAGE_BASELINES = {
    "inventory:fleet-map": 32,  # +2: the health markers of the page's devices and the legend's counts
    "inventory:node-list": 25,
    "inventory:device-list": 24,
    "inventory:pool-list": 17,
    "claims:claim-list": 21,
    "claims:pod-list": 23,
}
PAGE_SORTED = {  # a sort by a computed column reads every row's value: still a fixed number of queries
    "inventory:node-list": ("free", 25),  # sorted in SQL (a correlated sum per node): the unsorted page's queries
    "inventory:device-list": ("state", 24),
    "claims:claim-list": ("-created", 21),
}
PAGE_FIXED = {
    "inventory:overview": 35,  # +2: device health counts and the worst devices
    "inventory:class-list": 18,
    "ops:search": 24,  # with ?q=gpu
}


@pytest.fixture
def fleet():
    from claims.models import AuditEntry

    alpha = load_fleet("alpha")
    load_scenario(Cluster.objects.create(name="demo"))
    for action in ("deallocate", "remove-finalizer", "remove-reservation"):
        AuditEntry.objects.create(
            username="op",
            cluster=alpha,
            cluster_name="alpha",
            namespace="team-b",
            claim_name="stuck-claim",
            action=action,
            outcome="done",
        )


def count(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.content[:300])
    return len(ctx.captured_queries), response


def page_sizes(client, url, size_param, rows):
    sep = "&" if "?" in url else "?"
    small, r1 = count(client, f"{url}{sep}{size_param}=1")
    large, r2 = count(client, f"{url}{sep}{size_param}=1000")
    assert rows(r1) == 1 < rows(r2), f"{url}: the two page sizes must differ ({rows(r1)}, {rows(r2)} rows)"
    return small, large


def test_api_query_counts_stay_at_their_baselines(fleet, client):
    user = make_user("qc-admin")
    user.is_superuser = True
    user.save()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
    measured, failures = {}, []
    for url, baseline in API_BASELINES.items():
        small, large = page_sizes(client, url, "page_size", lambda r: len(r.json()["results"]))
        measured[url] = (small, large)
        if large > small or small > baseline:
            failures.append(f"{url}: {small} queries for a page of 1, {large} for 1000; baseline {baseline}")
    for url, baseline in API_FIXED.items():
        n, _ = count(client, url)
        measured[url] = n
        if n > baseline:
            failures.append(f"{url}: {n} queries; baseline {baseline}")
    assert not failures, "\n".join(failures) + f"\nmeasured: {measured}"


def test_page_query_counts_stay_at_their_baselines(fleet, client):
    client.force_login(make_user("qc-viewer"))
    client.get("/?cluster=all")  # the session's cluster choice, as a user's first page sets it
    rows = lambda r: len(r.context["page_obj"].object_list)  # noqa: E731
    measured, failures = {}, []
    cases = [(name, reverse(name), baseline) for name, baseline in PAGE_BASELINES.items()]
    cases += [
        (f"{name} sorted by {col}", f"{reverse(name)}?ordering={col}", baseline)
        for name, (col, baseline) in PAGE_SORTED.items()
    ]
    for label, url, baseline in cases:
        small, large = page_sizes(client, url, "per_page", rows)
        measured[label] = (small, large)
        if large > small or small > baseline:
            failures.append(f"{label}: {small} queries for a page of 1, {large} for 1000; baseline {baseline}")
    for name, baseline in PAGE_FIXED.items():
        n, _ = count(client, reverse(name) + ("?q=gpu" if name == "ops:search" else ""))
        measured[name] = n
        if n > baseline:
            failures.append(f"{name}: {n} queries; baseline {baseline}")
    assert not failures, "\n".join(failures) + f"\nmeasured: {measured}"
