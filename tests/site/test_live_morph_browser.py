"""Live updates keep the user's work, in real Chromium: the demo scenario in the built-in API server,
the watchers syncing it into the test database and publishing to Redis, daphne serving the pages.

On /stuck/ two findings are ticked, on /claims/ a link is focused and a filter typed into, on a claim
page its <details> toggled; then churn changes what those regions show (a pod deleted and the detector
run, demo churn creating claims, the claim relabelled). Ticks, focus, typed text and the <details>
survive -- the very same DOM nodes, not look-alikes -- and the changes arrive: held behind an
"N updates — show" notice while the user works in the region, merged in place otherwise.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from claims import stuck
from claims.models import Finding, Pod, ResourceClaim
from devcluster.churn import CHURN_NAMESPACE, Churn
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_live, wait_until
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
LIVE_MS = 10000  # the watchers' sync + publish + the page's fetch, on a loaded CI machine
PASSWORD = "morph-pass-123"

# Marks a DOM node so the test can tell, later, that the page still has that very node.
MARK = "(el) => { el.__kept = true; }"
KEPT = "(el) => el.__kept === true"
# Records the bulk form's busy state (aria-busy, the button's text) as it appears.
RECORD_BUSY = """() => {
  const form = document.getElementById("bulk-form");
  new MutationObserver(() => {
    if (form.getAttribute("aria-busy") === "true") sessionStorage.setItem("busy", document.getElementById("bulk-dry-run").textContent);
  }).observe(form, { attributes: true, subtree: true, childList: true, characterData: true });
}"""


@pytest.fixture
def stack(tmp_path, artifacts_dir, settings, browser):
    settings.GPUDASH_STUCK = {**settings.GPUDASH_STUCK, **{k: 0 for k in stuck.DEFAULTS if k.endswith("GRACE")}}
    with demo_site(tmp_path, artifacts_dir, "daphne-morph.log") as site:
        make_user("olivia", role=roles.OPERATOR, password=PASSWORD)
        yield {**site, "page": new_page(browser, site["base"], "olivia", PASSWORD)}


def held_notice(page, region):
    return page.locator(f'[data-held-for="{region}"] button')


def test_live_updates_keep_ticks_focus_typed_text_and_open_details(stack):
    api, cluster, base, page = stack["api"], stack["cluster"], stack["base"], stack["page"]

    # --- /stuck/: tick two findings, a new finding arrives, the ticks stay and the bulk dry run gets both.
    stuck.detect(cluster)
    assert Finding.objects.active().filter(cluster=cluster).exclude(remedy="").count() >= 2, "the demo's problem cases"
    page.goto(base + "/stuck/?cluster=demo")
    wait_live(page)
    boxes = page.locator("#findings-table input[name=ids]")
    ticked = [boxes.nth(i).get_attribute("value") for i in range(2)]
    for value in ticked:
        box = page.locator(f"#findings-table input[name=ids][value='{value}']")
        box.check()
        box.evaluate(MARK)
    rows_before = page.locator("#findings-table tbody tr").count()

    victim = ResourceClaim.objects.get(cluster=cluster, namespace="inference", consumers__name="llm-serve-2")
    api.store.delete("pods", "inference", "llm-serve-2")  # leaves the claim reserved for a gone pod
    wait_until(
        lambda: not Pod.objects.filter(cluster=cluster, namespace="inference", name="llm-serve-2").exists(),
        10,
        "the pod's deletion to sync",
    )
    stuck.detect(cluster)  # a new stale-reservation finding, published as a Finding change
    new_finding = Finding.objects.active().get(cluster=cluster, claim_uid=victim.uid, rule=stuck.STALE_RESERVATION)

    # The user is working in the region (boxes ticked): the update waits behind the notice.
    held_notice(page, "findings").wait_for(timeout=LIVE_MS)
    assert "show" in held_notice(page, "findings").inner_text()
    # Screen readers hear it from the region's own status message; the region itself is not a live region.
    page.wait_for_function(
        "() => (document.querySelector('[data-status-for=findings][role=status]') || {}).textContent?.includes('updates held')",
        timeout=LIVE_MS,
    )
    assert page.locator("[data-region][aria-live]").count() == 0
    assert page.locator(f"#finding-{new_finding.id}").count() == 0
    assert page.locator("#findings-table tbody tr").count() == rows_before
    held_notice(page, "findings").click()
    page.locator(f"#finding-{new_finding.id}").wait_for(timeout=LIVE_MS)
    for value in ticked:
        box = page.locator(f"#findings-table input[name=ids][value='{value}']")
        assert box.is_checked() and box.evaluate(KEPT), f"finding {value}: still ticked, the same checkbox"
    # No check that the notice is gone now: the boxes are still ticked, so a later change (the detector
    # publishes more than one) is rightly held behind a fresh notice.
    shot(page, path=str(stack["shots"] / "stuck-held-merged.png"), full_page=True)
    # A slow answer (held here until the busy state has shown) marks the form busy after 300 ms.
    # What the page shows while waiting is kept in sessionStorage, which outlives the navigation.
    held_requests = []
    page.route("**/stuck/release/", lambda route: held_requests.append(route))
    page.evaluate(RECORD_BUSY)
    with page.expect_navigation():
        page.click("#bulk-dry-run", no_wait_after=True)
        page.wait_for_timeout(1200)  # a slow server: the route holds the request this long
        assert len(held_requests) == 1
        held_requests[0].continue_()
    page.unroute("**/stuck/release/")
    assert page.evaluate("() => sessionStorage.getItem('busy')") == "Working\u2026"
    assert "Select at least one" not in page.content()
    assert sorted(page.locator("[data-result]").evaluate_all("(els) => els.map(e => e.dataset.result)")) == sorted(
        ticked
    )

    # --- /claims/: a typed filter and a focused link survive demo churn creating claims.
    page.goto(base + "/claims/?cluster=demo")
    wait_live(page)
    page.fill("form.filters input[name=q]", "typed, not sent")
    link = page.locator("#claim-table tbody a").first
    link.focus()
    link.evaluate(MARK)
    focused_name = link.inner_text()
    churn = Churn(api.store, seed=11)
    churn.step()  # the first step always creates a claim (and its pod)
    wait_until(
        lambda: ResourceClaim.objects.filter(cluster=cluster, namespace=CHURN_NAMESPACE).exists(),
        10,
        "the churn claim to sync",
    )
    held_notice(page, "claims").wait_for(timeout=LIVE_MS)
    assert page.evaluate("() => document.activeElement.__kept === true"), "focus stayed on the same link"
    held_notice(page, "claims").click()
    page.wait_for_selector(f"#claim-table >> text={CHURN_NAMESPACE}", timeout=LIVE_MS)
    # The merge is summarised for screen readers by what it changed (at least the churn claim's row added).
    page.wait_for_function(
        "() => /updated: [1-9][0-9]* added, [0-9]+ removed, [0-9]+ changed/.test(document.querySelector('[data-status-for=claims]').textContent)",
        timeout=LIVE_MS,
    )
    assert page.evaluate("() => document.activeElement.__kept === true"), "after 'show', focus is back on that link"
    assert page.evaluate("() => document.activeElement.textContent") == focused_name
    assert page.input_value("form.filters input[name=q]") == "typed, not sent"

    # Not working in the region any more: the next changes merge at once, without a notice.
    page.evaluate("() => document.activeElement.blur()")
    refreshes = int(page.evaluate("() => document.body.dataset.liveRefreshes || '0'"))
    for _ in range(3):
        churn.step()
    # The churn may release or cancel as well as create: step on until the API server holds two of its claims.
    for _ in range(20):
        if len(api.store.list("resourceclaims", CHURN_NAMESPACE)) >= 2:
            break
        churn.step()
    page.wait_for_function(
        "([n]) => Number(document.body.dataset.liveRefreshes || 0) > n", arg=[refreshes], timeout=LIVE_MS
    )
    wait_until(
        lambda: ResourceClaim.objects.filter(cluster=cluster, namespace=CHURN_NAMESPACE).count() >= 2,
        10,
        "more churn claims to sync",
    )
    newest = ResourceClaim.objects.filter(cluster=cluster, namespace=CHURN_NAMESPACE).order_by("-id").first()
    page.wait_for_selector(f"#claim-table >> text={newest.name}", timeout=LIVE_MS)
    assert held_notice(page, "claims").count() == 0
    assert page.locator("#claim-table tbody").get_by_role("link", name=focused_name, exact=True).evaluate(KEPT), (
        "rows keep their nodes"
    )

    # --- a claim page: the user's <details> choice survives the claim changing.
    page.goto(base + f"/claims/demo/inference/{victim.name}/")
    wait_live(page)
    details = page.locator("[data-region=claim] details#timeline-details")
    was_open = details.evaluate("(d) => d.open")
    details.locator("summary").click()
    assert details.evaluate("(d) => d.open") is (not was_open)
    details.evaluate(MARK)
    page.evaluate("() => document.activeElement.blur()")  # done with the region: its updates merge at once
    refreshes = int(page.evaluate("() => document.body.dataset.liveRefreshes || '0'"))
    api.store.patch(
        "resourceclaims",
        "inference",
        victim.name,
        {"metadata": {"labels": {"morph-test": "relabelled"}}},
        "application/merge-patch+json",
    )
    page.wait_for_function(
        "([n]) => Number(document.body.dataset.liveRefreshes || 0) > n", arg=[refreshes], timeout=LIVE_MS
    )
    page.wait_for_function(
        "() => document.querySelector('[data-region=claim]').textContent.includes('relabelled')", timeout=LIVE_MS
    )
    details = page.locator("[data-region=claim] details#timeline-details")
    assert details.evaluate(KEPT) and details.evaluate("(d) => d.open") is (not was_open)
