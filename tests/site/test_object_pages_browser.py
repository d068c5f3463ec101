"""Object pages in real Chromium: the YAML each page shows (its text as the browser renders it) parses back to
the mirrored raw object, the Copy buttons put exactly that text (and a kubectl command) on the clipboard,
and a 3,000-character line wraps instead of widening the page."""

import pytest
import yaml

from mirror import roles
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in
from tests.site.test_object_pages import load_objects, pages
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "objects-pass-1"
READ_CLIPBOARD = "() => navigator.clipboard.readText()"
YAML_FITS = "() => { const pre = document.getElementById('yaml'); return pre.scrollWidth <= pre.clientWidth + 1; }"


@pytest.fixture
def server(artifacts_dir):
    cluster = load_objects()
    make_user("olga", roles.VIEWER, password=PASSWORD)
    srv = browser_server(artifacts_dir / "daphne-objects.log")
    srv.start()
    yield srv, cluster
    srv.stop()


def test_object_pages_yaml_copy_and_wrap_in_chromium(server):
    srv, cluster = server
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.url)
        page = context.new_page()
        log_in(page, srv.url, "olga", PASSWORD)
        for url, raw in pages(cluster):
            response = page.goto(srv.url + url)
            assert response.status == 200, url
            shown = page.locator("#yaml").inner_text()
            assert yaml.safe_load(shown) == raw, url
            assert page.evaluate(YAML_FITS), f"{url}: the YAML block scrolls sideways"
        # The last page is the pod with the 3,000-character annotation: copied whole, not as wrapped lines.
        page.click("button[data-copy=yaml]")
        page.wait_for_function("() => document.querySelector('button[data-copy=yaml]').textContent !== 'Copy'")
        copied = page.evaluate(READ_CLIPBOARD)
        assert yaml.safe_load(copied) == pages(cluster)[-1][1]
        assert "x" * 3000 in copied
        page.click("button[data-copy=kubectl-1]")
        page.wait_for_function("() => document.querySelector('button[data-copy=kubectl-1]').textContent !== 'Copy'")
        assert page.evaluate(READ_CLIPBOARD) == "kubectl get pod tpl-pod -n team-a -o yaml"
