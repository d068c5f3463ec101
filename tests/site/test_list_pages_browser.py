"""The ResourceSlice and ResourceClaimTemplate lists in real Chromium against the demo: reached from
the navigation, filtered (the API's FilterSets), sorted by their headers, and updated live when the
API server gets a new object.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import copy

import pytest

from claims.models import ResourceClaimTemplate
from inventory.models import ResourceSlice
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_live
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
LIVE_MS = 10000  # the watchers' sync + publish + the page's fetch, on a loaded machine
PASSWORD = "lists-pass-123"


@pytest.fixture
def stack(tmp_path, artifacts_dir, browser):
    with demo_site(tmp_path, artifacts_dir, "daphne-lists.log") as site:
        make_user("vera", role=roles.VIEWER, password=PASSWORD)
        yield {**site, "page": new_page(browser, site["base"], "vera", PASSWORD)}


def _column(page, table, n):  # columns counted with the cluster selected (no cluster column)
    return page.locator(f"#{table} tbody tr td:nth-child({n})").all_inner_texts()


def test_slice_list_filters_sorts_and_follows_the_cluster(stack):
    api, cluster, base, page = stack["api"], stack["cluster"], stack["base"], stack["page"]
    page.goto(base + "/?cluster=demo")
    page.click("#mainnav >> text=Slices")
    assert page.url.startswith(base + "/slices/")
    assert page.locator("#mainnav a[aria-current=page]").inner_text() == "Slices"
    assert page.locator("#slice-table tbody tr").count() == ResourceSlice.objects.filter(cluster=cluster).count()

    # Filter by driver: only that driver's slices (the select submits itself).
    with page.expect_navigation():
        page.select_option("select[name=driver]", "rdma.example.com")
    drivers = set(_column(page, "slice-table", 2))
    assert drivers == {"rdma.example.com"}
    assert (
        page.locator("#slice-table tbody tr").count()
        == ResourceSlice.objects.filter(cluster=cluster, driver="rdma.example.com").count()
    )

    # Sort by devices, twice: ascending then descending, filters kept.
    page.goto(base + "/slices/")
    page.click("#slice-table thead >> text=Devices")
    counts = [int(c.replace(",", "")) for c in _column(page, "slice-table", 6)]
    assert counts == sorted(counts) and len(set(counts)) > 1
    page.click("#slice-table thead >> text=Devices")
    assert "ordering=-devices" in page.url
    counts = [int(c.replace(",", "")) for c in _column(page, "slice-table", 6)]
    assert counts == sorted(counts, reverse=True)

    # A driver publishes a new slice: the open list shows it without a reload.
    wait_live(page)
    new = copy.deepcopy(api.store.list("resourceslices")[0])
    new["metadata"] = {"name": "zz-new-slice-by-test"}
    api.store.create("resourceslices", new)
    page.locator("#slice-table tbody tr:has-text('zz-new-slice-by-test')").wait_for(timeout=LIVE_MS)
    shot(page, path=str(stack["shots"] / "slice-list.png"), full_page=True)


def test_template_list_filters_sorts_and_follows_the_cluster(stack):
    api, cluster, base, page = stack["api"], stack["cluster"], stack["base"], stack["page"]
    page.goto(base + "/?cluster=demo")
    page.click("#mainnav >> text=Templates")
    assert page.url.startswith(base + "/templates/")
    templates = ResourceClaimTemplate.objects.filter(cluster=cluster)
    assert page.locator("#template-table tbody tr").count() == templates.count() > 1

    # Filter by device class, as the API does.
    wanted = templates.order_by("name").first().device_classes[0]
    page.fill("input[name=device_class]", wanted)
    with page.expect_navigation():
        page.click("form.filters button[type=submit]")
    shown = _column(page, "template-table", 2)
    expected = sorted(t.name for t in templates if wanted in t.device_classes)
    assert sorted(shown) == expected and len(expected) < templates.count()

    # Sort by name, descending on the second click.
    page.goto(base + "/templates/")
    page.click("#template-table thead >> text=Template")
    page.click("#template-table thead >> text=Template")
    names = _column(page, "template-table", 2)
    assert names == sorted(names, reverse=True)

    # A new template in the API server appears live, linked to its page.
    wait_live(page)
    new = copy.deepcopy(api.store.list("resourceclaimtemplates")[0])
    new["metadata"] = {"name": "zz-new-template-by-test", "namespace": new["metadata"]["namespace"]}
    api.store.create("resourceclaimtemplates", new)
    row = page.locator("#template-table tbody tr:has-text('zz-new-template-by-test')")
    row.wait_for(timeout=LIVE_MS)
    row.locator("a:has-text('zz-new-template-by-test')").click()
    assert "zz-new-template-by-test" in page.locator("h1").inner_text()
    shot(page, path=str(stack["shots"] / "template-detail-from-list.png"))
