"""The fleet-history charts in real Chromium: the overview draws them from the API with the vendored
uPlot, under the Content-Security-Policy, with the sampled values; the range buttons refetch; a
namespace's page draws its own."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from mirror.models import Cluster
from monitoring import history
from monitoring.models import FleetSample, NamespaceSample

from .browser import BROWSER_MARKS, AsgiServer, chromium, free_port, log_in
from .fleet_data import load_scenario
from .test_csp_browser import RECORD_VIOLATIONS

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
    server = AsgiServer(free_port(), artifacts_dir / "daphne-history.log")
    server.start()
    yield server, end
    server.stop()


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
        assert states.get_attribute("data-chart-points") == str(len(history.points(24)[1]))
        legend = states.locator(".u-legend").inner_text()
        for state in ("free", "allocated", "partial", "unhealthy"):
            assert state in legend, legend
        # uPlot's legend shows the values of one point (the cursor's): show the newest sample's.
        states.scroll_into_view_if_needed()
        states.evaluate("(f, ts) => f._uplot.setLegend({idx: f._uplot.data[0].indexOf(ts)})", int(end.timestamp()))
        allocated = states.locator(".u-legend .u-series", has_text="allocated")
        page.wait_for_function(
            "el => el.innerText !== '--'", arg=allocated.locator(".u-value").element_handle(), timeout=5000
        )
        assert allocated.locator(".u-value").inner_text() == str(allocated_now), states.locator(
            ".u-legend"
        ).inner_text()
        by_model = chart(page, "Free whole GPUs by model").locator(".u-legend").inner_text()
        assert "NVIDIA H100 80GB HBM3" in by_model and "ConnectX-7" not in by_model
        held = chart(page, "Whole GPUs held, top namespaces").locator(".u-legend").inner_text()
        assert "ml-training" in held and "inference" in held

        page.get_by_role("button", name="7 days").click()
        page.wait_for_function(
            """() => document.querySelector("figure[data-history-chart]").getAttribute("data-chart-points") === "%d"
                               """
            % len(history.points(168)[1])
        )
        assert page.get_by_role("button", name="7 days").get_attribute("aria-pressed") == "true"

        page.locator("a[data-namespace-history]").first.click()
        page.wait_for_url("**/history/namespaces/**")
        namespace = page.url.rstrip("/").rsplit("/", 1)[1]
        devices = chart(page, f"Devices held by {namespace}").locator(".u-legend").inner_text()
        assert "gpu" in devices and "idle" in devices
        assert NamespaceSample.objects.filter(namespace=namespace).exists()
        assert page.evaluate("window.__csp") == [] and missing == [] and errors == [], (missing, errors)
