"""A page reached by POST keeps its live parts working, in real Chromium against the demo.

The release confirmation (/stuck/release/) answers a POST, so its own URL cannot be fetched again
with GET: its connection status and the nav's stuck badge come from /live/ instead. Here a new
finding appears while the operator reads the dry run; the badge follows it, and no live fetch fails.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from claims import stuck
from claims.models import Finding, Pod
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_live, wait_until
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
LIVE_MS = 10000  # sync + detector + publish + the page's fetch on a loaded machine
PASSWORD = "post-pass-123"


@pytest.fixture
def stack(tmp_path, artifacts_dir, settings, browser):
    settings.GPUDASH_STUCK = {**settings.GPUDASH_STUCK, **{k: 0 for k in stuck.DEFAULTS if k.endswith("GRACE")}}
    with demo_site(tmp_path, artifacts_dir, "daphne-post.log") as site:
        make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
        yield {**site, "page": new_page(browser, site["base"], "olivia", PASSWORD)}


def test_release_confirmation_page_refreshes_its_badges_without_errors(stack):
    api, cluster, base, page = stack["api"], stack["cluster"], stack["base"], stack["page"]
    stuck.detect(cluster)
    fetched = []  # every region fetch the page makes: (url, status)
    page.on("response", lambda r: "fragment=" in r.url and fetched.append((r.url, r.status)))

    page.goto(base + "/stuck/?cluster=demo")
    page.locator("#findings-table input[name=ids]").first.check()
    with page.expect_navigation():
        page.click("#bulk-dry-run")
    assert page.url.endswith("/stuck/release/")
    page.wait_for_selector("pre.request")
    wait_live(page)
    badge = page.locator("#nav-stuck .navbadge")
    before = int(badge.inner_text())

    # A new finding while the operator reads the dry run: the detector publishes it, the badge follows.
    api.store.delete("pods", "inference", "llm-serve-2")
    wait_until(
        lambda: not Pod.objects.filter(cluster=cluster, namespace="inference", name="llm-serve-2").exists(),
        10,
        "the pod's deletion to sync",
    )
    stuck.detect(cluster)
    assert Finding.objects.stuck().filter(cluster=cluster).count() == before + 1
    page.wait_for_function(
        "([n]) => document.querySelector('#nav-stuck .navbadge').textContent.trim() === String(n)",
        arg=[before + 1],
        timeout=LIVE_MS,
    )

    assert fetched, "the page fetched its live regions"
    assert all(status == 200 for _, status in fetched), fetched
    assert all("/live/?" in url for url, _ in fetched), fetched
    assert page.evaluate("() => document.body.dataset.live") == "on"
    assert "refresh failed" not in page.locator("#live").inner_text()
    shot(page, path=str(stack["shots"] / "stuck-release-live.png"), full_page=True)
