"""The dashboard in headless Chromium: real ASGI server (daphne subprocess), Redis channel layer,
watchers syncing from the built-in API server, and live updates end to end.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from devcluster.testing import running_devcluster
from inventory.models import Cluster, Device, SyncState

from .ui_fixtures import make_user

# Playwright's sync API runs an event loop in this thread; the ORM calls made between browser
# steps are ordinary blocking calls in the test, which is what this switch allows.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="the ASGI server subprocess and the watcher share Redis"),
]
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
LIVE_TIMEOUT_MS = 2000  # the promise: a change shows within 2 s


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AsgiServer:
    """daphne serving gpudash.asgi against this test run's database and Redis."""

    def __init__(self, port, log_path):
        db = connection.settings_dict
        self.port = port
        self.log_path = log_path
        self.env = {k: v for k, v in os.environ.items() if k != "GPUDASH_TEST_DB_NAME"}
        self.env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        # daphne, not uvicorn: uvicorn needs an extra websocket library that is not a dependency.
        cmd = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "-v", "0", "gpudash.asgi:application"]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.proc.returncode}; see {self.log_path}")
            try:
                urllib.request.urlopen(self.url + "/accounts/login/", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer within 30 s; see {self.log_path}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        self.log.close()


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def stack(tmp_path, artifacts_dir):
    from gpudash.sync.runner import Supervisor

    shots = artifacts_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with running_devcluster("demo") as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = Cluster.objects.create(name="demo", kubeconfig=str(kubeconfig))
        supervisor = Supervisor(cluster_names=["demo"]).start()
        server = AsgiServer(_free_port(), artifacts_dir / "daphne.log")
        try:
            _wait(lambda: SyncState.objects.filter(cluster=cluster, status=SyncState.Status.CONNECTED).count() >= 6, 60, "the watchers to connect")
            _wait(lambda: Device.objects.filter(cluster=cluster).exists(), 30, "devices to sync")
            make_user("alice", password="browser-pass-123")
            server.start()
            yield {"api": api, "cluster": cluster, "server": server, "shots": shots}
        finally:
            if server.proc:
                server.stop()
            supervisor.stop()


@pytest.fixture
def page(stack):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        base = stack["server"].url
        pg.goto(base + "/accounts/login/")
        pg.fill("input[name=username]", "alice")
        pg.fill("input[name=password]", "browser-pass-123")
        pg.click("button[type=submit]")
        pg.wait_for_url(base + "/")
        try:
            yield pg
        finally:
            browser.close()


def _claim(namespace, name, node=None, devices=()):
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": max(1, len(devices))}}]}},
    }
    if devices:
        raw["status"] = {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }}
    return raw


def _live(pg):
    pg.wait_for_function("document.body.dataset.live === 'on'", timeout=10000)


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
        _live(page)
        page.screenshot(path=str(shots / f"{name}.png"), full_page=name not in ("fleet-map", "devices"))

    # Filter devices by an attribute typed into the filter box.
    page.goto(base + "/devices/")
    page.fill("input[name=q]", "productName = NVIDIA L4")
    page.click("#device-filter button[type=submit]")
    page.wait_for_url("**/devices/?*")
    rows = page.locator("#device-table tbody tr")
    expected = Device.objects.filter(cluster=stack["cluster"], attributes__productName__string="NVIDIA L4").count()
    assert expected > 0 and rows.count() == expected
    assert all("NVIDIA L4" in t for t in rows.all_inner_texts())
    page.screenshot(path=str(shots / "devices-filtered.png"), full_page=True)

    # A claim detail page with its allocation, and a device detail page.
    page.goto(base + "/claims/?q=llama")
    page.locator("#claim-table a", has_text="llama").first.click()
    page.wait_for_selector("#allocation")
    page.screenshot(path=str(shots / "claim-detail.png"), full_page=True)
    page.locator("#allocation a").first.click()
    page.wait_for_selector("text=Attributes")
    page.screenshot(path=str(shots / "device-detail.png"), full_page=True)


def test_pages_update_live_and_catch_up_after_a_server_restart(stack, page):
    base, api, server, shots = stack["server"].url, stack["api"], stack["server"], stack["shots"]

    # A new claim appears in the list without a reload; the filter stays.
    page.set_viewport_size({"width": 1400, "height": 300})  # short window, so the page scrolls
    page.goto(base + "/claims/?namespace=research")
    _live(page)
    page.evaluate("window.scrollTo(0, 40)")
    assert page.evaluate("window.scrollY") == 40
    api.store.apply("resourceclaims", _claim("research", "live-claim-1"))
    page.wait_for_selector("#claim-table >> text=live-claim-1", timeout=LIVE_TIMEOUT_MS)
    assert page.input_value("select[name=namespace]") == "research"
    assert page.evaluate("window.scrollY") == 40

    page.set_viewport_size({"width": 1400, "height": 900})

    # A free device turns allocated on the node page.
    free = _first_free_device(stack["cluster"], "gpu-l4-02")
    page.goto(base + f"/nodes/demo/gpu-l4-02/")
    _live(page)
    row = page.locator("tr", has=page.locator(f"a:text-is('{free}')"))
    assert "free" in row.inner_text()
    api.store.apply("resourceclaims", _claim("inference", "live-claim-2", node="gpu-l4-02", devices=[free]))
    page.wait_for_function(
        """([name]) => [...document.querySelectorAll('[data-region=devices] tr')].some(
               tr => tr.querySelector('a') && tr.querySelector('a').textContent === name && tr.innerText.includes('allocated'))""",
        arg=[free], timeout=LIVE_TIMEOUT_MS,
    )
    page.screenshot(path=str(shots / "node-detail-live.png"), full_page=True)

    # Restart the ASGI server: the page notices, reconnects by itself and catches up on what it missed.
    page.goto(base + "/claims/?namespace=research")
    _live(page)
    server.stop()
    page.wait_for_function("document.body.dataset.live !== 'on'", timeout=10000)
    api.store.apply("resourceclaims", _claim("research", "while-down"))
    from claims.models import ResourceClaim

    _wait(lambda: ResourceClaim.objects.filter(name="while-down").exists(), 10, "the watcher to store the claim")
    server.start()
    page.wait_for_function("document.body.dataset.live === 'on'", timeout=20000)
    page.wait_for_selector("#claim-table >> text=while-down", timeout=LIVE_TIMEOUT_MS)
    # ...and keeps receiving live changes on the new connection.
    api.store.apply("resourceclaims", _claim("research", "after-restart"))
    page.wait_for_selector("#claim-table >> text=after-restart", timeout=LIVE_TIMEOUT_MS)


def _first_free_device(cluster, node):
    from inventory.fleet import FREE, states_for

    devices = states_for(Device.objects.filter(cluster=cluster, node_name=node).order_by("name"))
    return next(d.name for d in devices if d.st.state == FREE)


def test_chromium_binary_is_debians():
    assert shutil.which("chromium") or os.path.exists(CHROMIUM)
