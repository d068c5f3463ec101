"""The Content-Security-Policy: every page carries it, and in real Chromium every page (the admin and
the API docs included) works under it with no violation reported: the live socket connects, the
cluster picker submits, a preview runs and renders."""

import pytest
from django.contrib.auth.models import User

from tests.api_fixtures import load_fleet
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, wait_live

pytestmark = BROWSER_MARKS
PASSWORD = "csp-pass-123"
PAGES = [
    "/",
    "/fleet/map/",
    "/nodes/",
    "/nodes/alpha/node-a/",
    "/devices/",
    "/devices/alpha/gpu.nvidia.com/node-a/gpu-0/",
    "/classes/",
    "/pools/",
    "/claims/",
    "/claims/alpha/team-a/train/",
    "/pods/",
    "/preview/?cluster=alpha",
    "/stuck/",
    "/pending/",
    "/readiness/?cluster=alpha",
    "/admin/",
    "/admin/mirror/cluster/",
    "/api/docs/",
]
# Collects what the browser refuses; added before any page script runs (and not subject to the policy).
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
});
"""


@pytest.fixture
def server(artifacts_dir):
    load_fleet()
    User.objects.create_superuser("ada", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-csp.log")
    server.start()
    yield server
    server.stop()


def test_every_page_works_under_the_policy(server):
    with chromium() as browser:
        page = browser.new_page()
        page.add_init_script(RECORD_VIOLATIONS)
        console = []
        page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
        log_in(page, server.url, "ada", PASSWORD)
        for path in PAGES:
            response = page.goto(server.url + path)
            assert response.status == 200, path
            policy = response.headers.get("content-security-policy", "")
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, (path, policy)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("window.__csp") == [], path
        page.goto(server.url + "/api/docs/")
        page.wait_for_selector(".swagger-ui .opblock", timeout=15000)  # its start-up script ran
        assert page.evaluate("window.__csp") == []

        page.goto(server.url + "/claims/")
        wait_live(page)  # the websocket is allowed by connect-src
        with page.expect_navigation():
            page.select_option("#cluster-select", "alpha")  # data-autosubmit, no inline handler
        assert "cluster=alpha" in page.url

        page.goto(server.url + "/preview/?cluster=alpha")
        page.fill(
            "textarea[name=yaml]",
            "devices:\n  requests:\n  - name: gpu\n    exactly: {deviceClassName: gpu.nvidia.com}\n",
        )
        with page.expect_navigation():
            page.click("#pv-run")
        assert page.locator("#preview-error").count() == 0 and page.locator("text=node-a").count() > 0
        assert page.evaluate("window.__csp") == []
    assert not [m for m in console if "Content Security Policy" in m], console
