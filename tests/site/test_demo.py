"""`make demo` from a clean copy of the checkout: SQLite, no Redis, built-in cluster, a page served."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from websockets.sync.client import connect as ws_connect

from tests.browser import ROOT, free_port


def _clean_copy(dest):
    # What a fresh clone would hold: tracked files plus new files git does not ignore.
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.mark.slow
def test_make_demo_serves_the_fleet_from_a_clean_checkout(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _clean_copy(checkout)
    assert not (checkout / ".data").exists()
    port = free_port()
    # A fresh machine has none of these (an xdist worker sets its own GPUDASH_DATA_DIR, which the demo must not follow).
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "GPUDASH_TEST_DB_NAME", "SECRET_KEY", "GPUDASH_DATA_DIR")
    }
    # Reuse this interpreter's virtualenv so the test does not download packages; make still checks it.
    venv = Path(sys.prefix)
    proc = subprocess.Popen(
        ["make", "demo", f"VENV={venv}", f"DEMO_ARGS=--port {port} --churn 5"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = []
    try:
        deadline = time.monotonic() + 120
        banner = None
        while time.monotonic() < deadline and banner is None:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            output.append(line)
            banner = re.search(r"gpudash demo: (http://\S+)\s+\(login (\w+) / (\w+)\)", line)
        assert banner, "demo did not start:\n" + "".join(output)
        base, user, password = banner.groups()

        session = requests.Session()
        deadline = time.monotonic() + 30
        while True:
            try:
                login_page = session.get(base + "accounts/login/", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "web server never answered"
                time.sleep(0.3)
        assert login_page.status_code == 200
        token = session.cookies["csrftoken"]
        resp = session.post(
            base + "accounts/login/",
            data={"username": user, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": base + "accounts/login/"},
        )
        assert resp.status_code == 200 and "logout" in resp.text.lower()

        # The in-process watcher fills the SQLite mirror from the built-in cluster.
        deadline = time.monotonic() + 60
        nodes = []
        while time.monotonic() < deadline and not nodes:
            data = session.get(base + "api/v1/nodes/", timeout=5).json()
            nodes = data.get("results", data) if isinstance(data, dict) else data
            time.sleep(0.5)
        assert nodes, "no nodes mirrored from the demo cluster"
        assert (checkout / ".data" / "gpudash.sqlite3").exists()

        # Live view without Redis: the in-process watchers publish on the server's in-memory layer.
        cookie = "; ".join(f"{k}={v}" for k, v in session.cookies.items())
        ws_url = base.replace("http://", "ws://") + "ws/live/"
        with ws_connect(
            ws_url, additional_headers={"Cookie": cookie, "Origin": base.rstrip("/")}, open_timeout=10
        ) as ws:
            ws.send('{"subscribe": {"cluster": null}}')
            messages = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                messages.append(msg)
                if '"type": "changes"' in msg or '"type":"changes"' in msg:
                    break
            assert any('"changes"' in m and "demo" in m for m in messages), messages
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
