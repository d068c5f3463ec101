"""The DRA control-plane metrics page in real Chromium with a slow Prometheus (2 s a query): the page
comes with every figure waiting, and static/gpudash/dra_metrics.js brings each in as its queries
finish (?fragment=figures), under the Content-Security-Policy, until none waits; none shows a value
Prometheus did not give."""

import threading

import pytest
from django.contrib.auth.models import User

from mirror.models import Cluster
from monitoring import drametrics
from monitoring.models import PrometheusSource
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in
from tests.monitoring.test_dra_metrics_slow_prometheus import SlowPrometheus
from tests.site.test_csp_browser import RECORD_VIOLATIONS

pytestmark = BROWSER_MARKS
PASSWORD = "dra-pass-123"


@pytest.fixture
def server(artifacts_dir):
    slow = SlowPrometheus()
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    PrometheusSource.objects.create(cluster=Cluster.objects.create(name="slow"), url=slow.url)
    User.objects.create_superuser("dora", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-dra.log")
    server.start()
    yield server
    server.stop()
    slow.shutdown()
    slow.server_close()


def test_figures_arrive_in_the_page_as_prometheus_answers(server):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script(RECORD_VIOLATIONS)
        log_in(page, server.url, "dora", PASSWORD)
        page.goto(server.url + "/dra-metrics/?cluster=slow&window=6h")
        figures = page.locator("[data-dra-figures]")
        assert figures.get_attribute("data-pending") == str(len(drametrics.FIGURES))
        assert page.locator("article [data-pending]").count() == len(drametrics.FIGURES)
        # Each fragment replaces the figures; the last one has none waiting (the deadline bounds it).
        page.wait_for_selector('[data-dra-figures][data-pending="0"]', timeout=60000)
        assert page.locator("article [data-pending]").count() == 0
        statuses = {
            a.get_attribute("data-figure"): a.get_attribute("data-status") for a in page.locator("article").all()
        }
        assert set(statuses) == set(drametrics.BY_KEY)
        # The slow Prometheus answers empty vectors: not scraped, or timed out where the deadline cut.
        assert set(statuses.values()) <= {drametrics.ABSENT, drametrics.TIMED_OUT}, statuses
        assert page.locator("table.grid td.num").count() == 0
        assert page.evaluate("window.__csp") == []
