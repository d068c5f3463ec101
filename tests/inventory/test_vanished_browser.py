"""A device page in real Chromium while its driver's slice goes away: after the sync the same URL shows
the last-seen page (what was mirrored, styled, with the site's navigation), at desktop and phone width.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from inventory.models import Vanished
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_live, wait_until
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "vanished-pass-123"
SYNC_BOUND = 60  # the watcher's sync of one delete on a loaded machine; a bound, not a figure


@pytest.fixture
def stack(tmp_path, artifacts_dir, browser):
    with demo_site(tmp_path, artifacts_dir, "daphne-vanished.log") as site:
        make_user("vera", role=roles.VIEWER, password=PASSWORD)
        yield {**site, "page": new_page(browser, site["base"], "vera", PASSWORD), "browser": browser}


def test_device_page_turns_into_its_last_seen_page(stack):
    api, base, page = stack["api"], stack["base"], stack["page"]
    url = f"{base}/devices/demo/gpu.nvidia.com/gpu-h100-01/gpu-7/"
    assert page.goto(url).status == 200
    slices = [
        s
        for s in api.store.list("resourceslices", field_selector="spec.nodeName=gpu-h100-01")
        if s["spec"]["driver"] == "gpu.nvidia.com"
    ]
    for s in slices:
        api.store.delete("resourceslices", None, s["metadata"]["name"])
    wait_until(
        lambda: Vanished.objects.filter(kind=Vanished.DEVICE, name="gpu-7", pool="gpu-h100-01").exists(),
        SYNC_BOUND,
        "the watcher to remember the device",
    )

    response = page.goto(url)
    assert response.status == 404
    assert "gpu-7" in page.locator("#vanished-title").inner_text()
    assert (
        page.locator("#mainnav").is_visible()
        and page.locator("#mainnav a[aria-current=page]").inner_text() == "Devices"
    )
    facts = page.locator("#vanished-facts").inner_text()
    assert "gpu-h100-01" in facts and "ml-training/llama-pretrain-0-gpus-" in facts
    assert "NVIDIA H100 80GB HBM3" in page.locator("#vanished-attributes").inner_text()
    # Styled: the site's stylesheet applies (a badge has its own background, not the default transparent).
    background = page.locator("#vanished-badge").evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")
    wait_live(page)  # its live regions come from /live/, so the connection stays on, no refresh error
    shot(page, path=str(stack["shots"] / "device-last-seen.png"), full_page=True)

    page.click("#vanished-facts a:has-text('gpu-h100-01-')")  # the slice, gone too
    assert page.locator("#vanished-title").inner_text().startswith("ResourceSlice")
    assert page.locator("#vanished-devices li").count() == 8

    phone = new_page(stack["browser"], base, "vera", PASSWORD, viewport={"width": 390, "height": 844})
    assert phone.goto(url).status == 404
    box = phone.locator("#vanished-facts").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    shot(phone, path=str(stack["shots"] / "device-last-seen-phone.png"), full_page=True)
