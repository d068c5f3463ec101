"""The language switch in real Chromium (issue 14): the nav, the overview and live.js's badge in Chinese, the choice kept
across pages, and back to English."""

import pytest
from django.urls import reverse

from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in
from tests.ui_fixtures import load_fleet, make_user

pytestmark = BROWSER_MARKS


@pytest.fixture
def server(artifacts_dir):
    load_fleet()
    make_user("mei", password="mei-pass-123")
    server = browser_server(artifacts_dir / "daphne-i18n.log")
    server.start()
    yield server
    server.stop()


def test_switching_to_chinese_in_the_browser(server):
    with chromium() as browser:
        page = browser.new_page(locale="en-US")
        log_in(page, server.url, "mei", "mei-pass-123")
        assert page.locator("nav.mainnav >> text=Overview").count() == 1
        with page.expect_navigation():
            page.select_option("#language-select", "zh-hans")
        assert page.url.rstrip("/") == server.url
        assert page.get_attribute("html", "lang") == "zh-hans"
        nav = page.inner_text("nav.mainnav")
        assert "概览" in nav and "节点" in nav and "设备类" in nav and "Overview" not in nav
        assert "设备群概览" in page.inner_text("main")
        # live.js's own words come from the page in its language: the badge once the websocket is up.
        page.wait_for_selector("body[data-live='on']")
        assert page.inner_text("#live .live-text") == "实时"
        page.goto(server.url + reverse("inventory:node-list"))
        assert "节点" in page.inner_text("nav.mainnav") and page.get_attribute("html", "lang") == "zh-hans"
        with page.expect_navigation():
            page.select_option("#language-select", "en")
        assert "Nodes" in page.inner_text("nav.mainnav")
        page.wait_for_selector("body[data-live='on']")
        assert page.inner_text("#live .live-text") == "live"
