"""The fleet-history charts in real Chromium: the overview draws them from the API with the vendored
uPlot, under the Content-Security-Policy, with the sampled values; the range buttons refetch; a
namespace's page draws its own."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from inventory.fleet import state_label
from mirror.models import Cluster
from monitoring import history
from monitoring.models import FleetSample, NamespaceSample
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in
from tests.fleet_data import load_scenario
from tests.site.test_csp_browser import RECORD_VIOLATIONS

pytestmark = BROWSER_MARKS
PASSWORD = "history-pass-123"


@pytest.fixture
def server(artifacts_dir):
    load_scenario(Cluster.objects.create(name="demo"))
    # On 30-minute boundaries: points of every range (steps of 2, 15 and 30 minutes) fall on samples.
    end = history.points(336)[1][-1]
    for minutes_ago in (90, 60, 30, 0):
        history.sample(end - timedelta(minutes=minutes_ago))
    User.objects.create_superuser("hana", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-history.log")
    server.start()
    yield server, end
    server.stop()


def collected_points(hours, end):
    """The chart's points from the first one with a sample (the server fixture's oldest is 90 minutes back)."""
    return sum(1 for m in history.points(hours)[1] if m >= end - timedelta(minutes=90))


def chart(page, caption):
    figure = page.locator("figure[data-history-chart]", has=page.locator("figcaption", has_text=caption))
    try:
        figure.locator("canvas").wait_for(timeout=20000)
    except Exception as exc:
        raise AssertionError(f"chart {caption!r} not drawn: {figure.inner_text()!r}") from exc
    return figure


def test_overview_draws_the_history_charts(server):
    server, end = server
    allocated_now = sum(r.allocated for r in FleetSample.objects.filter(minute=end, kind="gpu"))
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script(RECORD_VIOLATIONS)
        errors = []
        # Chromium's own /favicon.ico request (there is none) is no error of the page's.
        page.on(
            "console",
            lambda msg: (
                errors.append(msg.text)
                if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico")
                else None
            ),
        )
        missing = []
        page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
        log_in(page, server.url, "hana", PASSWORD)
        states = chart(page, "Whole-GPU devices by state")
        # The x axis spans the samples collected (90 minutes of a 24 h range), with a note since when.
        assert states.get_attribute("data-chart-points") == str(collected_points(24, end))
        since = states.locator("[data-chart-since]")
        assert since.get_attribute("data-chart-since") == str(int((end - timedelta(minutes=90)).timestamp()))
        assert "collecting since" in since.inner_text()
        legend = states.locator(".u-legend").inner_text()
        for state in ("free", "allocated", "partial", "unhealthy"):
            assert state_label(state) in legend, legend
        # Before any hover the legend shows the newest sample's values, not "--".
        allocated = states.locator(".u-legend .u-series", has_text=state_label("allocated"))
        assert allocated.locator(".u-value").inner_text() == str(allocated_now), legend
        by_model = chart(page, "Free whole GPUs by model").locator(".u-legend").inner_text()
        assert "NVIDIA H100 80GB HBM3" in by_model and "ConnectX-7" not in by_model
        held = chart(page, "Whole GPUs held, top namespaces").locator(".u-legend").inner_text()
        assert "ml-training" in held and "inference" in held

        page.get_by_role("button", name="7 days").click()
        page.wait_for_function(
            """() => document.querySelector("figure[data-history-chart]").getAttribute("data-chart-points") === "%d"
                               """
            % collected_points(168, end)
        )
        assert page.get_by_role("button", name="7 days").get_attribute("aria-pressed") == "true"

        page.locator("a[data-namespace-history]").first.click()
        page.wait_for_url("**/history/namespaces/**")
        namespace = page.url.rstrip("/").rsplit("/", 1)[1]
        devices = chart(page, f"Devices held by {namespace}").locator(".u-legend").inner_text()
        assert "whole GPUs" in devices and "idle GPUs" in devices
        assert NamespaceSample.objects.filter(namespace=namespace).exists()
        assert page.evaluate("window.__csp") == [] and missing == [] and errors == [], (missing, errors)
