"""The readiness page on the demo in real Chromium: the primer's five checks, each line about objects
linking to them (the RDMA driver's pods the configured label does not find, the node where the GPU driver
has no pod), a link followed to its page; at 1440 and 390 px, in English and Chinese (screenshots to
artifacts/).

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "readiness-pass-123"


@pytest.fixture
def stack(tmp_path, artifacts_dir, browser):
    with demo_site(tmp_path, artifacts_dir, "daphne-readiness.log") as site:
        make_user("rhea", role=roles.VIEWER, password=PASSWORD)
        yield {**site, "browser": browser}


def _line(page, section, text):
    return page.locator(f"#check-{section} li", has_text=text)


def test_readiness_lines_link_to_their_objects(stack):
    base = stack["base"]
    page = new_page(stack["browser"], base, "rhea", PASSWORD, viewport={"width": 1440, "height": 900})
    assert page.goto(base + "/readiness/").status == 200
    for n, check in enumerate(("versions", "drivers", "rbac", "reporting", "recovery"), 1):
        assert page.locator(f"#check-{check} h2").inner_text().startswith(f"{n}. ")
    # 1: the gates the demo's API server reports on its /metrics.
    gates = _line(page, "versions", "DRA feature gates enabled").inner_text()
    assert "DynamicResourceAllocation" in gates and "DRAPartitionableDevices" in gates
    # 2: the RDMA driver's pods are found through its DaemonSet and the label mismatch explained, with
    # links to those pods; no line claims that no rdma driver pod runs on gpu-h100-02.
    mismatch = _line(page, "drivers", "configured pod selectors")
    assert mismatch.count() == 1 and "rdma-dra-driver/rdma-dra-driver-kubelet-plugin" in mismatch.inner_text()
    pod_links = mismatch.locator("a[href^='/pods/demo/rdma-dra-driver/']")
    assert pod_links.count() == 4
    missing = [t for t in page.locator("#check-drivers li").all_inner_texts() if "where no driver pod runs" in t]
    assert not any("rdma" in t and "gpu-h100-02" in t for t in missing)
    assert "1 of 4 desired pods ready" not in page.locator("#check-drivers").inner_text()  # 3 of 4: h100-04 is down
    assert _line(page, "drivers", "rdma.example.com: DaemonSet").inner_text().count("3 of 4 desired pods ready") == 1
    gone = _line(page, "drivers", "no driver pod on gpu-l4-03")
    assert gone.locator("a[href='/nodes/demo/gpu-l4-03/']").count() == 1
    down = _line(page, "drivers", "the node itself is NotReady").first
    assert down.locator("a[href='/nodes/demo/gpu-h100-04/']").count() == 1
    # 5: what the NotReady node's drivers hold back, linking the claims there.
    held = _line(page, "recovery", "is down on gpu-h100-04").first
    assert held.locator("a[href='/claims/?node=gpu-h100-04']").count() == 1
    shot(page, path=str(stack["shots"] / "readiness-1440-en.png"), full_page=True)

    pod_links.first.click()
    page.wait_for_url("**/pods/demo/rdma-dra-driver/**")
    assert "rdma-dra-driver-kubelet-plugin-" in page.locator("h1").inner_text()

    phone = new_page(stack["browser"], base, "rhea", PASSWORD, viewport={"width": 390, "height": 844})
    phone.context.add_cookies([{"name": "gpudash_language", "value": "zh-hans", "url": base}])
    assert phone.goto(base + "/readiness/").status == 200
    assert phone.locator("#overall").inner_text() in ("通过", "警告", "失败")
    assert _line(phone, "drivers", "配置的 Pod 选择算符").locator("a[href^='/pods/demo/rdma-dra-driver/']").count() == 4
    # Nothing wider than the phone's screen.
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390 + 1
    shot(phone, path=str(stack["shots"] / "readiness-390-zh.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(base + "/readiness/")
    shot(page, path=str(stack["shots"] / "readiness-390-en.png"), full_page=True)
    phone.set_viewport_size({"width": 1440, "height": 900})
    phone.goto(base + "/readiness/")
    shot(phone, path=str(stack["shots"] / "readiness-1440-zh.png"), full_page=True)
