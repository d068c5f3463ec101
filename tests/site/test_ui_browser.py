"""The dashboard in headless Chromium: real ASGI server (daphne subprocess), Redis channel layer,
watchers syncing from the built-in API server, and live updates end to end.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from inventory.models import Device
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_live, wait_until
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
LIVE_TIMEOUT_MS = 2000  # the promise: a change shows within 2 s
PASSWORD = "browser-pass-123"


@pytest.fixture
def stack(tmp_path, artifacts_dir):
    with demo_site(tmp_path, artifacts_dir, "daphne.log") as site:
        make_user("alice", password=PASSWORD)
        yield site


@pytest.fixture
def page(stack, browser):
    return new_page(browser, stack["base"], "alice", PASSWORD)


def _claim(namespace, name, node=None, devices=()):
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": max(1, len(devices))}}
                ]
            }
        },
    }
    if devices:
        raw["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            }
        }
    return raw


def test_every_page_renders_and_device_filter_works(stack, page):
    base, shots = stack["server"].url, stack["shots"]
    pages = {
        "overview": "/?cluster=demo",
        "fleet-map": "/fleet/map/",
        "nodes": "/nodes/",
        "node-detail": "/nodes/demo/gpu-a100-01/",
        "devices": "/devices/",
        "classes": "/classes/",
        "pools": "/pools/",
        "claims": "/claims/",
        "pods": "/pods/",
        "preview": "/preview/",
    }
    for name, path in pages.items():
        resp = page.goto(base + path)
        assert resp.status == 200, path
        assert page.locator(".connitem.conn-connected").count() == 1, f"{path}: cluster shown connected"
        wait_live(page)
        shot(page, path=str(shots / f"{name}.png"), full_page=name not in ("fleet-map", "devices"))

    # Filter devices by an attribute typed into the filter box.
    page.goto(base + "/devices/")
    page.fill("form.filters input[name=q]", "productName = NVIDIA L4")
    page.click("#device-filter button[type=submit]")
    page.wait_for_url("**/devices/?*")
    rows = page.locator("#device-table tbody tr")
    expected = Device.objects.filter(cluster=stack["cluster"], attributes__productName__string="NVIDIA L4").count()
    assert expected > 0 and rows.count() == expected
    assert all("NVIDIA L4" in t for t in rows.all_inner_texts())
    shot(page, path=str(shots / "devices-filtered.png"), full_page=True)

    # A claim detail page with its allocation, and a device detail page.
    page.goto(base + "/claims/?q=llama")
    page.locator("#claim-table a", has_text="llama").first.click()
    page.wait_for_selector("#allocation")
    shot(page, path=str(shots / "claim-detail.png"), full_page=True)
    page.locator("#allocation a").first.click()
    page.wait_for_selector("text=Attributes")
    shot(page, path=str(shots / "device-detail.png"), full_page=True)


def test_pages_update_live_and_catch_up_after_a_server_restart(stack, page):
    base, api, server, shots = stack["server"].url, stack["api"], stack["server"], stack["shots"]

    # A new claim appears in the list without a reload; the filter stays.
    page.set_viewport_size({"width": 1400, "height": 300})  # short window, so the page scrolls
    page.goto(base + "/claims/?namespace=research")
    wait_live(page)
    page.evaluate("window.scrollTo(0, 40)")
    assert page.evaluate("window.scrollY") == 40
    api.store.apply("resourceclaims", _claim("research", "live-claim-1"))
    page.wait_for_selector("#claim-table >> text=live-claim-1", timeout=LIVE_TIMEOUT_MS)
    assert page.input_value("select[name=namespace]") == "research"
    assert page.evaluate("window.scrollY") == 40

    page.set_viewport_size({"width": 1400, "height": 900})

    # A free device turns allocated on the node page.
    free = _first_free_device(stack["cluster"], "gpu-l4-02")
    page.goto(base + "/nodes/demo/gpu-l4-02/")
    wait_live(page)
    row = page.locator("tr", has=page.locator(f"a:text-is('{free}')"))
    assert "free" in row.inner_text()
    api.store.apply("resourceclaims", _claim("inference", "live-claim-2", node="gpu-l4-02", devices=[free]))
    page.wait_for_function(
        """([name]) => [...document.querySelectorAll('[data-region=devices] tr')].some(
               tr => tr.querySelector('a') && tr.querySelector('a').textContent === name && tr.innerText.includes('allocated'))""",
        arg=[free],
        timeout=LIVE_TIMEOUT_MS,
    )
    shot(page, path=str(shots / "node-detail-live.png"), full_page=True)

    # Restart the ASGI server: the page notices, reconnects by itself and catches up on what it missed.
    page.goto(base + "/claims/?namespace=research")
    wait_live(page)
    server.stop()
    page.wait_for_function("() => document.body.dataset.live !== 'on'", timeout=10000)
    api.store.apply("resourceclaims", _claim("research", "while-down"))
    from claims.models import ResourceClaim

    wait_until(lambda: ResourceClaim.objects.filter(name="while-down").exists(), 10, "the watcher to store the claim")
    server.start()
    page.wait_for_function("() => document.body.dataset.live === 'on'", timeout=20000)
    page.wait_for_selector("#claim-table >> text=while-down", timeout=LIVE_TIMEOUT_MS)
    # ...and keeps receiving live changes on the new connection.
    api.store.apply("resourceclaims", _claim("research", "after-restart"))
    page.wait_for_selector("#claim-table >> text=after-restart", timeout=LIVE_TIMEOUT_MS)


def _first_free_device(cluster, node):
    from inventory.fleet import FREE, states_for

    devices = states_for(Device.objects.filter(cluster=cluster, node_name=node).order_by("name"))
    return next(d.name for d in devices if d.st.state == FREE)
