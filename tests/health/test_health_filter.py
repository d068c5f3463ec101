"""The devices list's health filter: the page and the API list the same rows (one FilterSet), on the health
fleet loaded in each test's own transaction (tests/site/test_filters_page_api.py commits other fleets for
its module, under the same cluster name)."""

import pytest
from django.urls import reverse

from tests.api_fixtures import client_for
from tests.site.test_filters_page_api import _api_rows, _page_rows
from tests.ui_fixtures import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


@pytest.fixture
def health_users(client):
    from tests.health.health_fixtures import load_health_fleet

    load_health_fleet("alpha")  # node-a gpu-0 unhealthy, gpu-1 unknown, gpu-2 degraded
    user = make_user("alice")
    client.force_login(user)
    return client, client_for(user)


@pytest.mark.parametrize("health", ["unhealthy", "degraded", "unknown", "healthy"])
def test_devices_page_and_api_filter_by_health_alike(health_users, health):
    client, api = health_users
    everything = _api_rows(api, "/api/v1/devices/", {})
    rows = _api_rows(api, "/api/v1/devices/", {"health": health})
    assert rows and rows < everything
    assert {
        r["health"] for r in api.get("/api/v1/devices/", {"health": health, "page_size": 1000}).json()["results"]
    } == {health}
    assert _page_rows(client, "inventory:device-list", {"health": health}) == rows
    expected = {
        "unhealthy": {
            ("alpha", "node-a", "node-a", "gpu-0"),
            ("alpha", "node-c", "node-c", "gpu-1"),
        },  # a report, a taint
        "unknown": {("alpha", "node-a", "node-a", "gpu-1")},
        "degraded": {("alpha", "node-a", "node-a", "gpu-2")},
    }
    assert rows == expected.get(health, everything - set().union(*expected.values()))


def test_devices_page_has_the_health_control_and_both_reject_a_wrong_health(health_users):
    client, api = health_users
    page = client.get(reverse("inventory:device-list"), {"health": "unhealthy"}).content.decode()
    assert '<select name="health">' in page and '<option value="unhealthy" selected>' in page
    resp = api.get("/api/v1/devices/", {"health": "broken"})
    assert resp.status_code == 400 and "Unknown health 'broken'" in resp.json()["error"]["message"]
    bad = client.get(reverse("inventory:device-list"), {"health": "broken"})
    assert "Unknown health &#x27;broken&#x27;" in bad.content.decode() and bad.context["devices"] == []
