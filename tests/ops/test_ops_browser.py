"""The admin's troubleshooting path in headless Chromium, end to end with real parts: the demo scenario in the
built-in API server, the watchers syncing it (and asking the stuck-claim detector for a run after each
applied batch), a Celery worker running the detector, daphne serving the UI, Redis carrying both.

An operator sees a stale reservation appear live on the Stuck claims page after its pod is deleted, opens
the dry run (the exact request), confirms, and sees the API server's claim change and the finding clear
live. A viewer gets no release button and is refused when posting anyway.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claims import stuck
from claims.models import AuditEntry, Finding, ResourceClaim
from mirror import roles
from tests.browser import (
    BROWSER_MARKS,
    ROOT,
    demo_site,
    new_page,
    shot,
    stop_process,
    subprocess_env,
    wait_live,
    wait_until,
)
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS  # browser; transactional DB; skipped without chromium or Redis
LIVE_TIMEOUT_MS = 10000  # detector debounce (1 s here) + its run + the page's refresh
PASSWORD = "browser-pass-123"
# Only the rule this test exercises judges at once; the others keep their grace periods.
OPS_ENV = {"GPUDASH_STALE_RESERVATION_GRACE": "0", "GPUDASH_STUCK_DEBOUNCE": "1"}


class CeleryWorker:
    """`celery worker` (one process, solo pool) against this test run's database and Redis."""

    def __init__(self, env, log_path):
        self.env, self.log_path, self.proc = env, log_path, None

    def start(self):
        from gpudash.celery import app

        app.control.purge()  # tasks queued by earlier runs would name clusters of other test databases
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gpudash",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"ops-test-{os.getpid()}@%h",
        ]
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited with {self.proc.returncode}; see {self.log_path}")
            if b" ready." in Path(self.log_path).read_bytes():
                return
            time.sleep(0.3)
        raise RuntimeError(f"celery worker not ready within 60 s; see {self.log_path}")

    def stop(self):
        stop_process(self.proc, grace=15)
        self.proc = None
        self.log.close()


@pytest.fixture
def ops_stack(tmp_path, artifacts_dir, settings, monkeypatch):
    for key, value in OPS_ENV.items():
        monkeypatch.setenv(key, value)  # the subprocesses (daphne, the worker) read them at start
    settings.GPUDASH_STUCK = {**settings.GPUDASH_STUCK, "STALE_RESERVATION_GRACE": 0, "DEBOUNCE_SECONDS": 1}
    # Ready (and the queue purged) before the watchers start: the runs their first lists ask for must not be purged.
    worker = CeleryWorker(subprocess_env(), artifacts_dir / "celery-ops.log")
    worker.start()
    try:
        with demo_site(tmp_path, artifacts_dir, "daphne-ops.log", set_up_bound=60) as site:
            make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
            make_user("victor", role=roles.VIEWER, password=PASSWORD)
            yield site
    finally:
        worker.stop()


def logged_in(browser, base, username):
    return new_page(browser, base, username, PASSWORD)


def claim_reserved_for(cluster, namespace, pod):
    return ResourceClaim.objects.get(cluster=cluster, namespace=namespace, consumers__name=pod)


def stale_finding(claim):
    return (
        Finding.objects.filter(cluster_id=claim.cluster_id, claim_uid=claim.uid, rule=stuck.STALE_RESERVATION)
        .order_by("-id")
        .first()
    )


def test_stale_reservation_found_live_released_with_dry_run_and_cleared(ops_stack, browser):
    api, cluster, base, shots = ops_stack["api"], ops_stack["cluster"], ops_stack["server"].url, ops_stack["shots"]

    # The watchers' first lists already asked for a run: the demo's claim reserved for a long-gone pod.
    wait_until(
        lambda: Finding.objects.active().filter(claim_name="llm-serve-old-gpu", rule=stuck.STALE_RESERVATION).exists(),
        30,
        "the detector, requested by the sync, to find the demo's stale reservation",
    )

    page = logged_in(browser, base, "olivia")
    page.goto(base + "/stuck/?cluster=demo")
    wait_live(page)
    badge_before = int(page.locator("#nav-stuck .navbadge").inner_text())
    claim = claim_reserved_for(cluster, "inference", "llm-serve-2")
    assert page.locator(f"#findings-table tr:has-text('{claim.name}')").count() == 0

    # Delete the pod in the API server only: nothing removes it from the claim's reservedFor.
    pod_uid = api.store.get("pods", "inference", "llm-serve-2")["metadata"]["uid"]
    api.store.delete("pods", "inference", "llm-serve-2")
    row = page.locator(f"#findings-table tr:has-text('{claim.name}')")
    row.wait_for(timeout=LIVE_TIMEOUT_MS)  # no reload: the detector's change arrives over the websocket
    assert "Stale reservation" in row.inner_text() and "llm-serve-2" in row.inner_text()
    page.wait_for_function(
        "([n]) => document.querySelector('#nav-stuck .navbadge').textContent.trim() === String(n)",
        arg=[badge_before + 1],
        timeout=LIVE_TIMEOUT_MS,
    )
    finding = stale_finding(claim)
    assert finding.cleared_at is None and finding.subject == pod_uid
    shot(page, path=str(shots / "stuck.png"), full_page=True)

    # A second tab keeps the Stuck page open to watch the finding clear after the release.
    watcher_tab = page.context.new_page()
    watcher_tab.goto(base + "/stuck/?cluster=demo")
    wait_live(watcher_tab)
    assert watcher_tab.locator(f"tr[data-finding='{finding.id}']").count() == 1

    # The claim page offers the same release, dry run first.
    page.goto(base + f"/claims/demo/inference/{claim.name}/")
    section = page.locator("#claim-findings")
    assert "Stale reservation" in section.inner_text()
    shot(page, path=str(shots / "claim-findings.png"), full_page=False)
    section.locator(f"[data-finding='{finding.id}'] button.release-dry-run").click()

    # Dry run: the exact request, and nothing sent yet.
    page.wait_for_selector("pre.request")
    request = json.loads(page.locator(f"[data-result='{finding.id}'] pre.request").inner_text())
    assert request["method"] == "PATCH"
    assert request["path"] == f"/apis/resource.k8s.io/v1/namespaces/inference/resourceclaims/{claim.name}/status"
    assert request["content_type"] == "application/strategic-merge-patch+json"
    assert request["body"]["status"]["reservedFor"] == [{"$patch": "delete", "uid": pod_uid}]
    assert request["body"]["metadata"]["uid"] == claim.uid
    assert "dry-run" in page.locator(f"[data-result='{finding.id}'] .badge").inner_text()
    assert pod_uid in [
        r["uid"] for r in api.store.get("resourceclaims", "inference", claim.name)["status"]["reservedFor"]
    ]
    shot(page, path=str(shots / "stuck-dry-run.png"), full_page=True)

    # Confirm in the dialog; the request goes to the API server.
    page.click("#confirm-release")
    page.wait_for_selector("#confirm-dialog[open]")
    shot(page, path=str(shots / "stuck-confirm.png"))
    with page.expect_navigation():  # the confirmed form posts to the same URL as the dry run
        page.click("#confirm-ok")
    outcome = page.locator(f"[data-result='{finding.id}']")
    # Any outcome other than done (a conflict, a refusal) fails here with what the page said.
    assert "outcome-done" in outcome.locator(".badge").get_attribute("class"), outcome.inner_text()
    shot(page, path=str(shots / "stuck-released.png"), full_page=True)
    reserved = api.store.get("resourceclaims", "inference", claim.name)["status"].get("reservedFor") or []
    assert pod_uid not in [r["uid"] for r in reserved]
    assert api.store.get("resourceclaims", "inference", claim.name)["status"]["allocation"]  # only the reservation went

    # The open Stuck page drops the finding by itself.
    watcher_tab.locator(f"tr[data-finding='{finding.id}']").wait_for(state="detached", timeout=LIVE_TIMEOUT_MS)
    finding.refresh_from_db()
    assert finding.cleared_at is not None
    assert AuditEntry.objects.filter(username="olivia", claim_name=claim.name, outcome="done", dry_run=False).exists()


def test_viewer_gets_no_release_and_is_refused(ops_stack, browser):
    base, shots = ops_stack["server"].url, ops_stack["shots"]
    wait_until(
        lambda: Finding.objects.active().filter(claim_name="llm-serve-old-gpu", rule=stuck.STALE_RESERVATION).exists(),
        30,
        "the detector to find the demo's stale reservation",
    )
    finding = Finding.objects.active().get(claim_name="llm-serve-old-gpu", rule=stuck.STALE_RESERVATION)

    page = logged_in(browser, base, "victor")
    page.goto(base + "/stuck/?cluster=demo")
    row = page.locator(f"tr[data-finding='{finding.id}']")
    row.wait_for()
    assert row.locator("button, input[type=checkbox]").count() == 0
    assert page.locator("#bulk-dry-run").count() == 0

    page.goto(base + "/claims/demo/inference/llm-serve-old-gpu/")
    button = page.locator(f"#claim-findings [data-finding='{finding.id}'] button.release-dry-run")
    assert button.is_disabled()
    assert (
        "needs the operator role"
        in page.locator(f"#claim-findings [data-finding='{finding.id}'] .release-blocked").inner_text()
    )
    shot(page, path=str(shots / "claim-findings-viewer.png"))

    # Posting anyway (with a valid CSRF token, so only the role decides) is refused and audited.
    status, body = page.evaluate(
        """async ([id]) => {
             const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
             const form = new FormData(); form.append("ids", id); form.append("step", "release");
             form.append("csrfmiddlewaretoken", token);
             const resp = await fetch("/stuck/release/", {method: "POST", body: form, credentials: "same-origin"});
             return [resp.status, await resp.text()];
           }""",
        [str(finding.id)],
    )
    assert status == 403 and "CSRF" not in body
    assert AuditEntry.objects.filter(username="victor", claim_name="llm-serve-old-gpu", outcome="refused").exists()
    assert Finding.objects.get(id=finding.id).cleared_at is None


def test_pending_and_readiness_pages(ops_stack, browser):
    base, shots = ops_stack["server"].url, ops_stack["shots"]
    page = logged_in(browser, base, "olivia")

    # From the pods list, the Pending pod links to its checklist.
    page.goto(base + "/pods/?cluster=demo&phase=Pending")
    link = page.locator("#pod-table a.why-pending").first
    assert "llama-pretrain-1" in link.get_attribute("href")
    link.click()
    page.wait_for_url("**/pending/demo/ml-training/llama-pretrain-1/")
    assert "llama-pretrain-1" in page.locator("main").inner_text()
    wait_live(page)
    shot(page, path=str(shots / "pending.png"), full_page=True)

    page.goto(base + "/readiness/?cluster=demo")
    assert "demo" in page.locator("main h1").inner_text()
    wait_live(page)
    shot(page, path=str(shots / "readiness.png"), full_page=True)
