"""The preview page in headless Chromium: the demo scenario in the database (written through the watchers'
apply path), daphne serving the UI, the real allocation engine.

An operator fills in a sample claim and sees the summary, the fitting nodes with the chosen devices ringed
and the headroom; pastes malformed YAML and sees line/column (and the editor jumps there); pastes an invalid
CEL selector and sees its position once; picks a pending claim and opens its reason groups. A viewer gets
an explanation instead of the form. Screenshots go to artifacts/screenshots/preview*.png.
"""

import pytest

from claims.models import ResourceClaim
from claims.preview import run_preview
from mirror import roles
from mirror.models import Cluster
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.fleet_data import load_scenario, make_user
from tests.preview_fixtures import BAD_CEL, MALFORMED

pytestmark = BROWSER_MARKS  # browser; transactional DB; skipped without chromium or Redis
PASSWORD = "browser-pass-123"


@pytest.fixture
def site(request, artifacts_dir):
    """The page with previews in production's `preview` Celery workers, or (a test parametrized with
    `backend`) in the embedded default's local pool of worker processes, started by the server itself."""
    shots = artifacts_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
    make_user("victor", role=roles.VIEWER, password=PASSWORD)
    backend = getattr(request, "param", "celery")
    server = browser_server(artifacts_dir / f"daphne-preview-{backend}.log")
    server.env["GPUDASH_PREVIEW_BACKEND"] = backend
    server.start()
    try:
        with chromium() as browser:
            yield {"cluster": cluster, "base": server.url, "shots": shots, "browser": browser}
    finally:
        server.stop()


def new_page(site, username, height=900):
    page = site["browser"].new_context(viewport={"width": 1400, "height": height}).new_page()
    return log_in(page, site["base"], username, PASSWORD)


def shoot(page, path, **kwargs):
    page.evaluate("window.scrollTo(0, 0)")  # else the sticky bar lands mid-page in a full-page shot
    shot(page, path=str(path), **kwargs)


def run(page, yaml_text):
    page.fill("#pv-yaml", yaml_text)
    page.click("#pv-run")
    page.wait_for_load_state("load")


@pytest.mark.parametrize("site", ["celery", "local"], indirect=True)
def test_operator_previews_yaml_errors_and_a_pending_claim(site):
    page, shots, cluster = new_page(site, "olivia"), site["shots"], site["cluster"]
    page.goto(site["base"] + "/preview/?cluster=demo")
    shoot(page, shots / "preview-form.png", full_page=True)

    # Quick-fill the sample claim and run it: summary, fitting nodes, chosen devices, headroom.
    page.click("button.pv-sample[data-sample=claim]")
    sample = page.input_value("#pv-yaml")
    assert "kind: ResourceClaim" in sample
    page.click("#pv-run")
    page.wait_for_selector("#preview-summary")
    engine = run_preview(cluster, yaml_text=sample, namespace="default", with_headroom=True)
    fits = engine["summary"]["fits"]
    assert 0 < fits < engine["summary"]["nodes"]
    tile = page.locator("#pv-fit-count")
    assert (tile.get_attribute("data-fits"), tile.get_attribute("data-nodes")) == (
        str(fits),
        str(engine["summary"]["nodes"]),
    )
    assert page.locator("#preview-fits tbody tr").count() == fits
    chosen = {(n["node"], r["device"]) for n in engine["nodes"] if n["fits"] for r in n["results"]}
    ringed = set(
        map(
            tuple,
            page.eval_on_selector_all(
                "#preview-fits .pv-chosen", "cells => cells.map(c => [c.closest('tr').dataset.node, c.dataset.device])"
            ),
        )
    )
    assert ringed == chosen
    assert page.inner_text("#pv-headroom-copies") == str(engine["headroom"]["copies"])
    reasons = page.locator("#pv-reasons tbody tr")
    assert reasons.count() == len(engine["summary"]["reasons"])
    shoot(page, shots / "preview.png", full_page=True)

    # Click a chosen device: its detail page.
    node, device = sorted(chosen)[0]
    page.locator(f"#preview-fits tr[data-node='{node}'] .pv-chosen[data-device='{device}']").click()
    page.wait_for_selector("text=Attributes")
    assert f"/{node}/{device}/" in page.url
    page.go_back()

    # Malformed YAML: the error names line and column, the editor jumps there, the page still works.
    page.goto(site["base"] + "/preview/?cluster=demo")
    run(page, MALFORMED)
    error = page.inner_text("#preview-error")
    assert "malformed YAML at line 4, column 5" in error
    assert page.locator("#preview-summary").count() == 0
    assert page.locator("#pending-table tbody tr").count() >= 1
    page.click("#preview-error .pv-goto")
    start = page.evaluate("document.getElementById('pv-yaml').selectionStart")
    assert start == len("\n".join(MALFORMED.split("\n")[:3])) + 1 + 4  # line 4, column 5
    shoot(page, shots / "preview-yaml-error.png", full_page=True)

    # An invalid CEL selector: one error box for every node, with the expression and a caret.
    run(page, BAD_CEL)
    page.wait_for_selector(".pv-harderror")
    assert page.locator(".pv-harderror").count() == 1
    box = page.inner_text(".pv-harderror")
    assert "Hard error on every node" in box and "line 1, column 51" in box and "YAML line 14" in box
    assert page.inner_text("pre.pv-caret").splitlines()[1] == " " * 50 + "^"
    assert page.locator("#preview-fits").count() == 0
    shoot(page, shots / "preview-cel-error.png", full_page=True)

    # Pick a pending claim from the list: its per-node reasons, grouped; open a group.
    page.locator("#pending-table tr", has_text="reserve-whole-a100").locator("a.pv-pick").click()
    page.wait_for_selector("#preview-summary")
    assert "research/reserve-whole-a100" in page.inner_text("#preview-summary h2")
    claim_row = ResourceClaim.objects.get(cluster=cluster, namespace="research", name="reserve-whole-a100")
    engine = run_preview(cluster, claim=claim_row, reason_codes=True)
    failing = [n for n in engine["nodes"] if not n["fits"]]
    assert failing
    groups = page.locator("details.pv-group")
    assert sum(int(groups.nth(i).get_attribute("data-count")) for i in range(groups.count())) == len(failing)
    first = groups.first
    assert not first.locator("table").is_visible()
    first.locator("summary").click()
    rows = first.locator("tbody tr")
    assert rows.first.is_visible()
    node = rows.first.get_attribute("data-node")
    expected = next(n for n in failing if n["node"] == node)
    assert (expected["reason"] or expected["error"]).replace(
        "`", ""
    ) in rows.first.inner_text()  # names render as <code>
    assert "name: reserve-whole-a100" in page.input_value("#pv-yaml")  # the claim is in the box, to tweak
    shoot(page, shots / "preview-pending.png", full_page=True)


def test_viewer_sees_why_there_is_no_form(site):
    page = new_page(site, "victor", height=500)
    page.goto(site["base"] + "/preview/?cluster=demo")
    assert page.locator("#preview-needs-operator").is_visible()
    assert "operator role" in page.inner_text("#preview-needs-operator")
    assert page.locator("#preview-form").count() == 0 and page.locator("#pv-run").count() == 0
    shoot(page, site["shots"] / "preview-viewer.png")


NOWHERE_POD = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-h100, namespace: ml-training}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: h100.nvidia.com}}]}}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: ml-training}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-9z}
  containers: [{name: main, image: trainer, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-h100}]
"""


def test_a_pod_that_fits_nowhere_shows_the_schedulers_whole_message(site):
    """The scheduler's message as kubectl describe would show it, PostFilter text included."""
    page, shots = new_page(site, "olivia"), site["shots"]
    page.goto(site["base"] + "/preview/?cluster=demo")
    run(page, NOWHERE_POD)
    from inventory.models import Node

    total = Node.objects.filter(cluster=site["cluster"]).count()
    message = page.inner_text(".pv-sched code")
    assert (
        message.startswith(f"0/{total} nodes are available: ")
        and "node(s) didn't match Pod's node affinity/selector" in message
    )
    # Every node is rejected without remedy (affinity, taints, cordons), so preemption cannot help anywhere.
    assert message.endswith(
        f". still not schedulable, preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    )
    shoot(page, shots / "preview-pod-nowhere.png", full_page=True)
