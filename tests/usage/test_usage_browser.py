"""The usage page in real Chromium: the trend chart drawn by the vendored uPlot under the Content-Security-
Policy, the top consumers with their unit rules, the same figures as the API, the group-by switch, and
the page in Chinese. A screenshot goes to artifacts/usage-page.png."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from mirror.models import Cluster
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.site.test_csp_browser import RECORD_VIOLATIONS
from usage.periods import period_containing, report_zone

from .usage_fixtures import interval

pytestmark = BROWSER_MARKS
PASSWORD = "usage-pass-123"


@pytest.fixture
def server(artifacts_dir):
    alpha = Cluster.objects.create(name="alpha")
    zone = report_zone()
    month = period_containing("month", timezone.now().astimezone(zone).date(), zone)
    start = month.start
    # This month: two namespaces, whole GPUs and partitions, one allocation still open; earlier months too.
    interval(alpha, "ml-training", start, start + timedelta(hours=10), team="vision")
    interval(alpha, "ml-training", start, start + timedelta(hours=8), units=0.5, rule="partition", model="H100")
    interval(alpha, "inference", timezone.now() - timedelta(hours=4), None, units=0.25, rule="capacity", team="serving")
    interval(alpha, "inference", start, start + timedelta(hours=2), admin=True)
    for back in (1, 2):
        p = month
        for _ in range(back):
            p = p.previous()
        interval(alpha, "ml-training", p.start, p.start + timedelta(hours=4 * back), team="vision")
    User.objects.create_superuser("hana", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-usage.log")
    server.start()
    yield server
    server.stop()


def test_usage_page_draws_and_agrees_with_the_api(server, artifacts_dir):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.add_init_script(RECORD_VIOLATIONS)
        errors = []
        page.on(
            "console",
            lambda msg: (
                errors.append(msg.text)
                if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico")
                else None
            ),
        )
        log_in(page, server.url, "hana", PASSWORD)
        page.get_by_role("link", name="Usage").click()
        page.wait_for_url("**/usage/")
        figure = page.locator("#usage-trend")
        figure.locator("canvas").wait_for(timeout=20000)
        assert figure.get_attribute("data-chart-points") == "4"  # three previous months and this one
        legend = figure.locator(".u-legend").inner_text()
        assert "ml-training" in legend and "inference" in legend
        # Before any hover the legend shows this month's figures, not "--".
        newest = figure.locator(".u-legend .u-series", has_text="ml-training").locator(".u-value").inner_text()
        assert newest == "14", legend
        rows = page.locator("#usage-rows tbody tr")
        assert rows.first.get_attribute("data-key") == "ml-training"
        assert "partitions" in rows.first.inner_text() and "whole devices" in rows.first.inner_text()
        shown = {
            rows.nth(i).get_attribute("data-key"): float(
                rows.nth(i).locator("[data-gpu-hours]").get_attribute("data-gpu-hours")
            )
            for i in range(rows.count())
        }
        api = page.request.get(server.url + "/api/v1/usage").json()
        from_api = {r["namespace"]: r["gpu_hours"] for r in api["results"]}
        assert shown["ml-training"] == from_api["ml-training"] == 14.0
        # The open capacity share grows between the two requests: agreed to the minute.
        assert abs(shown["inference"] - from_api["inference"]) < 0.02
        assert "inference" in page.locator("#usage-admin").inner_text()
        shot(page, path=str(artifacts_dir / "usage-page.png"), full_page=True)

        page.locator("select[name=group_by]").select_option("team")
        page.get_by_role("button", name="Show").click()
        page.wait_for_url("**group_by=team**")
        assert page.locator("#usage-rows tbody tr").first.get_attribute("data-key") == "vision"

        page.locator("#language-select").select_option("zh-hans")
        page.wait_for_function("document.documentElement.lang === 'zh-hans'")
        assert "GPU 用量" in page.locator("h1").inner_text()
        page.locator("#usage-trend canvas").wait_for(timeout=20000)
        shot(page, path=str(artifacts_dir / "usage-page-zh.png"), full_page=True)
        assert page.evaluate("window.__csp") == [] and errors == [], errors
