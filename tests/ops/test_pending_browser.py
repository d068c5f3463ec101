"""The Pending explainer in headless Chromium, looked at as an operator would: the demo fleet in the
database, a pod wanting 3 L4s on one node, daphne serving the UI, previews on the preview workers.
The answer comes first, then the remedies the engine verified (the release of a stuck claim first,
with its dry run one click away), then the evidence with the per-node list collapsed. Screenshot:
artifacts/screenshots/pending-answer.png."""

import pytest

from mirror import roles
from mirror.models import Cluster
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.fleet_data import load_scenario, make_user
from tests.ops.test_pending_answer import pending_l4_trio, spare_finding

pytestmark = BROWSER_MARKS
PASSWORD = "browser-pass-123"


@pytest.fixture
def site(artifacts_dir):
    shots = artifacts_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    pending_l4_trio(cluster)
    spare_finding(cluster)
    make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-pending.log")
    server.start()
    try:
        with chromium() as browser:
            yield {"base": server.url, "shots": shots, "browser": browser}
    finally:
        server.stop()


def test_the_operator_reads_the_answer_then_the_remedies_and_dry_runs_the_release(site):
    page = site["browser"].new_context(viewport={"width": 1400, "height": 1000}).new_page()
    log_in(page, site["base"], "olivia", PASSWORD)
    page.goto(f"{site['base']}/pending/demo/inference/l4-trio/")
    verdict = page.locator("#verdict")
    assert verdict.inner_text().startswith("Why it is Pending: Request gpus needs 3 × NVIDIA L4 on one node:")
    # Reading order on screen: answer above remedies above evidence.
    tops = [page.locator(sel).bounding_box()["y"] for sel in ("#answer", "#remedies", "#evidence")]
    assert tops == sorted(tops)
    remedies = page.locator("ol.remedies > li")
    assert remedies.count() >= 2
    first = remedies.nth(0)
    assert first.inner_text().startswith(
        "Release a stuck claim. Release the devices of stuck claim inference/l4-warm-spare"
    )
    assert "It would fit on gpu-l4-01" in first.inner_text()
    # The per-node evidence is there, collapsed.
    details = page.locator("#pending-report details").first
    assert details.get_attribute("open") is None and not page.locator("#pending-report details li").first.is_visible()
    assert "`" not in page.locator("#pending-report").inner_text()
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, path=str(site["shots"] / "pending-answer.png"), full_page=True)
    # The release remedy's button opens the existing dry run: nothing is sent yet.
    first.locator("button.release-dry-run").click()
    page.wait_for_load_state("load")
    assert "/stuck/release/" in page.url
    body = page.locator("main").inner_text()
    assert "l4-warm-spare" in body and page.locator("#confirm-form").count() == 1
