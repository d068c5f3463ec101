"""Device health on the pages (health/pages.py through mirror.views.register_page_parts): device, node,
claim and pod pages, the overview and the fleet map's markers and legend."""

import re

import pytest
from django.urls import reverse

from tests.ui_fixtures import make_user

from .health_fixtures import load_health_fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha():
    return load_health_fleet()


@pytest.fixture
def viewer(client, alpha):
    client.force_login(make_user("alice"))
    return client


def page(client, url):
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def section(body, sid):
    match = re.search(rf'<section id="{sid}".*?</section>', body, re.S)
    assert match, sid
    return match.group(0)


def words(html):
    """The section's text, tags dropped (verbatim parts are spans marked translate="no")."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_device_page_shows_state_reasons_reports_and_timeline(viewer, alpha):
    body = page(viewer, reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-0"]))
    health = section(body, "device-health-state")
    assert 'data-health="unhealthy"' in health
    assert "pod team-a/train-1-pod (container main) reports it Unhealthy: XID 79: GPU has fallen off the bus" in words(
        health
    )
    assert '<span translate="no">XID 79: GPU has fallen off the bus</span>' in health
    timeline = re.search(r'<table class="grid health-timeline" id="device-health-timeline">.*?</table>', health, re.S)
    assert 'data-to="unhealthy"' in timeline.group(0)
    assert "team-a/train-1" in timeline.group(0) and "team-a/train-1-pod" in timeline.group(0)

    quiet = page(viewer, reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-5"]))
    assert 'data-health="healthy"' in section(quiet, "device-health-state")
    assert "No health change recorded in the history period." in quiet


def test_node_claim_and_pod_pages(viewer, alpha):
    node = section(page(viewer, reverse("inventory:node-detail", args=[alpha.name, "node-a"])), "node-health")
    rows = dict(re.findall(r'<tr data-device="gpu\.nvidia\.com/node-a/([^"]+)">.*?data-health="(\w+)"', node, re.S))
    assert rows == {"gpu-0": "unhealthy", "gpu-2": "degraded", "gpu-1": "unknown"}
    claim = section(
        page(viewer, reverse("claims:claim-detail", args=[alpha.name, "team-a", "train-1"])), "claim-health"
    )
    assert re.findall(r'data-device="gpu\.nvidia\.com/node-a/(gpu-\d)"', claim) == ["gpu-0", "gpu-1"]
    assert "reports it Unhealthy: XID 79" in words(claim)
    pod = section(page(viewer, reverse("claims:pod-detail", args=[alpha.name, "team-a", "train-1-pod"])), "pod-health")
    assert 'data-health="unknown"' in pod


def test_overview_counts_and_fleet_map_markers(viewer, alpha):
    overview = section(page(viewer, reverse("inventory:overview")), "overview-health")
    counts = dict(re.findall(r'data-health="(\w+)" data-count="(\d+)"', overview))
    assert counts == {"unhealthy": "2", "degraded": "1", "unknown": "1"}
    body = page(viewer, reverse("inventory:fleet-map"))
    cells = dict(re.findall(r'class="cell [^"]*h-(\w+)[^"]*" href="[^"]*/node-a/(gpu-\d)/"', body))
    assert {v: k for k, v in cells.items()} == {"gpu-0": "unhealthy", "gpu-1": "unknown", "gpu-2": "degraded"}
    assert 'id="map-health-legend"' in body


def test_a_scoped_reader_sees_no_pod_of_other_namespaces(client, alpha):
    client.force_login(make_user("bob", namespaces=["team-b"]))
    for url in (
        reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-0"]),
        reverse("inventory:node-detail", args=[alpha.name, "node-a"]),
        reverse("inventory:overview"),
    ):
        body = page(client, url)
        assert "train-1-pod" not in body and "XID 79" not in body, url
    body = page(client, reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-0"]))
    assert "a pod in another namespace reports it Unhealthy" in words(section(body, "device-health-state"))
