"""The what-if page in headless Chromium (daphne serving it, previews on the preview workers): an operator
types changes, runs them, reads the verdicts, saves the scenario and opens its shared link; a bad line is
pointed out. The page's verdicts are checked against the API's and `manage.py whatif`'s for the same
scenario. Screenshots: artifacts/screenshots/whatif*.png."""

import io
import json
import urllib.request

import pytest
from django.core.management import call_command

from mirror import roles
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.fleet_data import make_user
from tests.whatif_fixtures import load_whatif_cluster, verdicts

pytestmark = BROWSER_MARKS
PASSWORD = "browser-pass-123"
CHANGES = ["add busy-00 2", "cordon small-00"]


@pytest.fixture
def site(artifacts_dir):
    shots = artifacts_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    cluster = load_whatif_cluster()
    olivia = make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-whatif.log")
    server.start()
    try:
        with chromium() as browser:
            yield {"cluster": cluster, "base": server.url, "shots": shots, "browser": browser, "olivia": olivia}
    finally:
        server.stop()


def api_whatif(site, body):
    """POST /api/v1/whatif to the running server, as a script would (token auth)."""
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=site["olivia"])
    request = urllib.request.Request(
        site["base"] + "/api/v1/whatif",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {token.key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        return json.loads(resp.read())


def page_verdicts(page):
    rows = page.locator("tr[data-workload]")
    return {
        rows.nth(i).get_attribute("data-workload"): rows.nth(i).get_attribute("data-verdict")
        for i in range(rows.count())
    }


def test_operator_plans_saves_and_shares(site):
    page = site["browser"].new_context(viewport={"width": 1400, "height": 1000}).new_page()
    log_in(page, site["base"], "olivia", PASSWORD)
    page.goto(site["base"] + "/whatif/?cluster=plan")
    page.fill("#wi-changes", "\n".join(CHANGES))
    page.fill("#wi-shapes", "2 x gpu.nvidia.com")
    page.click("#wi-run")
    page.wait_for_selector("#whatif-result")
    shot(page, path=str(site["shots"] / "whatif-result.png"), full_page=True)

    shown = page_verdicts(page)
    out = io.StringIO()
    call_command("whatif", "--cluster", "plan", "--json", *sum((["--change", c] for c in CHANGES), []), stdout=out)
    cli = verdicts(json.loads(out.getvalue()))
    api = api_whatif(site, {"cluster": "plan", "changes": CHANGES})
    assert shown == cli == verdicts(api["result"])
    assert shown["team-a/job-two"] == "now-schedulable"
    assert page.locator('#whatif-counts b[data-verdict="now-schedulable"]').inner_text() == "1"
    assert page.locator('#whatif-headroom tr[data-shape="2 x gpu.nvidia.com"] td').nth(2).inner_text() == "2"
    row = page.locator('tr[data-workload="team-a/job-two"]').inner_text()
    assert "busy-00-whatif-1" in row

    # Save it, then open the shared link in a fresh page: the same answer, from the URL alone.
    page.fill("#whatif-save input[name=name]", "two more H100 nodes")
    page.click("#whatif-save button[type=submit]")
    page.wait_for_selector("#whatif-saved-note")
    assert page.locator("#whatif-saved a", has_text="two more H100 nodes").count() == 1
    link = page.locator("#whatif-share").get_attribute("href")
    other = site["browser"].new_context(viewport={"width": 1400, "height": 1000}).new_page()
    log_in(other, site["base"], "olivia", PASSWORD)
    other.goto(site["base"] + link)
    other.wait_for_selector("#whatif-result")
    assert page_verdicts(other) == shown
    assert other.input_value("#wi-changes") == "\n".join(CHANGES)

    # A line with an unknown node: the error names it and its line; nothing else is shown.
    page.fill("#wi-changes", "cordon small-00\nadd gpu-h100-99 2")
    page.click("#wi-run")
    page.wait_for_selector("#whatif-error")
    assert "unknown node 'gpu-h100-99'" in page.locator("#whatif-error").inner_text()
    assert page.locator("#whatif-error-line").inner_text() == "2"
    assert page.locator("#whatif-result").count() == 0
    shot(page, path=str(site["shots"] / "whatif-error.png"), full_page=True)
