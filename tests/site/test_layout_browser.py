"""Tables keep their rows visible, in real Chromium on the demo at a phone's width (390 px) and a
desktop's (1440 px), on every list and detail page (every GET route served by a DashboardView).

Measured, not eyeballed: at rest no header cell's box overlaps a row's box and the first row is what
the browser finds at its centre (nothing drawn over it); scrolled, the header is still what is found
at its centre (not hidden behind the top bar, not scrolled away): on a desktop the page scrolls and
the header sits under the top bar, on a phone a long table scrolls in its own box. The phone's top
bar stays compact while its menu is closed. Screenshots of both widths go to artifacts/.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest
from django.urls import reverse

from claims.models import Pod, ResourceClaim, ResourceClaimTemplate
from inventory.models import Device, DeviceClass, Node, ResourceSlice
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot
from tests.site.test_a11y_browser import _dashboard_routes
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "layout-pass-123"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
PHONE_BAR_MAX = 60  # px: brand, menu button and live state on one line


def _args(obj, *fields):
    return [obj.cluster.name, *(getattr(obj, f) for f in fields)]


# URL name -> the arguments of a demo object. A new detail page needs an entry (the test says so).
DETAIL_ARGS = {
    "inventory:node-detail": lambda: _args(Node.objects.get(name="gpu-h100-02"), "name"),
    "inventory:device-detail": lambda: _args(
        Device.objects.filter(node_name="gpu-h100-02").order_by("name").first(), "driver", "pool", "name"
    ),
    "inventory:class-detail": lambda: _args(DeviceClass.objects.order_by("name").first(), "name"),
    "inventory:slice-detail": lambda: _args(
        ResourceSlice.objects.filter(node_name="gpu-h100-02").order_by("name").first(), "name"
    ),
    "claims:claim-detail": lambda: _args(
        ResourceClaim.objects.filter(allocated=True).order_by("namespace", "name").first(), "namespace", "name"
    ),
    "claims:pod-detail": lambda: _args(
        Pod.objects.exclude(node_name="").order_by("namespace", "name").first(), "namespace", "name"
    ),
    "claims:template-detail": lambda: _args(
        ResourceClaimTemplate.objects.order_by("namespace", "name").first(), "namespace", "name"
    ),
    "ops:pending-pod": lambda: _args(
        Pod.objects.filter(phase="Pending").order_by("namespace", "name").first(), "namespace", "name"
    ),
    "monitoring:namespace-history": lambda: ["inference"],
}


def every_page():
    paths, missing = [], []
    for name, pattern in _dashboard_routes():
        if not pattern.pattern.converters:
            paths.append(reverse(name))
        elif name in DETAIL_ARGS:
            paths.append(reverse(name, args=DETAIL_ARGS[name]()))
        else:
            missing.append(name)
    assert not missing, f"add these pages to DETAIL_ARGS in {__name__}: {missing}"
    return list(dict.fromkeys(paths))


# Every visible table with a header and rows, measured at rest and scrolled; returns what is wrong.
GEOMETRY = r"""() => {
  const problems = [], checked = [];
  const bar = () => document.querySelector(".topbar").getBoundingClientRect().bottom;
  const shown = (el) => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0;
  const overlap = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) * Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  const centre = (el) => { const r = el.getBoundingClientRect(); return [(Math.max(r.left, 0) + Math.min(r.right, innerWidth)) / 2, (r.top + r.bottom) / 2]; };
  const hits = (el) => { const [x, y] = centre(el); const hit = document.elementFromPoint(x, y); return hit !== null && el.contains(hit); };
  const tables = [...document.querySelectorAll("main table")].filter(t => shown(t) && t.querySelector("thead th") && t.querySelector("tbody tr"));
  tables.forEach((t, i) => {
    const name = t.id || (t.closest("[id]") || {}).id || "table " + i;
    const heads = [...t.querySelectorAll("thead th")].filter(shown);
    const rows = [...t.querySelectorAll("tbody tr")].filter(shown);
    if (!heads.length || !rows.length) return;
    checked.push(name);
    // At rest: the table just under the top bar, its own box scrolled to the top.
    t.scrollTop = 0;
    window.scrollTo(0, t.getBoundingClientRect().top + window.scrollY - bar() - 8);
    for (const row of rows.slice(0, 5)) for (const th of heads)
      if (overlap(th.getBoundingClientRect(), row.getBoundingClientRect()) > 1) { problems.push(`${name}: header "${th.textContent.trim()}" over row ${rows.indexOf(row) + 1}`); return; }
    const first = rows[0].cells[0] || rows[0];
    if (!hits(first)) problems.push(`${name}: first row hidden under ${(document.elementFromPoint(...centre(first)) || {}).tagName}`);
    // Scrolled: the header stays in view.
    const headH = t.querySelector("thead").getBoundingClientRect().height;
    const style = getComputedStyle(t);
    const ownBox = /auto|scroll/.test(style.overflowY) && t.scrollHeight > t.clientHeight + 1;
    if (ownBox) {
      t.scrollTop = Math.min(200, t.scrollHeight - t.clientHeight);
    } else if (/auto|scroll/.test(style.overflowY)) {
      return;  // a box of its own that the whole table fits: its header goes where the table goes
    } else {
      const by = Math.min(200, t.getBoundingClientRect().height - 3 * headH);
      if (by < 40 || document.documentElement.scrollHeight - innerHeight - window.scrollY < by) return;  // too short to scroll past
      window.scrollBy(0, by);
    }
    const th = heads[0];
    if (th.getBoundingClientRect().top < bar() - 0.5 || !hits(th)) {
      const hit = document.elementFromPoint(...centre(th));
      problems.push(`${name}: header hidden when ${ownBox ? "its box" : "the page"} scrolls (header top ${Math.round(th.getBoundingClientRect().top)}, bar ${Math.round(bar())}, drawn there: ${hit && hit.outerHTML.slice(0, 80)})`);
    }
    t.scrollTop = 0;
  });
  window.scrollTo(0, 0);
  return { problems, checked };
}"""


@pytest.fixture
def site(tmp_path, artifacts_dir):
    with demo_site(tmp_path, artifacts_dir, "daphne-layout.log") as site:
        make_user("ada", role="admin", password=PASSWORD)
        yield site


def test_tables_keep_rows_visible_at_phone_and_desktop_widths(site, browser):
    base, shots = site["base"], site["shots"]
    pages = every_page()
    problems, measured = {}, set()
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = new_page(browser, base, "ada", PASSWORD, viewport=viewport)
        page.goto(base + "/?cluster=demo")
        if label == "phone":
            assert page.locator(".topbar").bounding_box()["height"] <= PHONE_BAR_MAX
            assert not page.locator("#global-search").is_visible(), "the search opens with the menu"
            page.click(".navtoggle")
            assert page.locator("#global-search").is_visible() and page.locator("#mainnav").is_visible()
            page.click(".navtoggle")
        for path in pages:
            response = page.goto(base + path)
            assert response.status == 200, (path, response.status)
            page.wait_for_load_state("load")
            found = page.evaluate(GEOMETRY)
            measured.update((path, t) for t in found["checked"])
            if found["problems"]:
                problems[f"{label} {path}"] = found["problems"]
            slug = path.strip("/").replace("/", "_") or "overview"
            shot(page, path=str(shots / f"layout-{label}-{slug}.png"), full_page=label == "phone")
        # A long list part-way down, to look at: the header under the top bar (desktop), in the table's box (phone).
        page.goto(base + "/devices/")
        page.evaluate(
            "() => { window.scrollTo(0, 700); const t = document.querySelector('#device-table'); t.scrollTop = 400; }"
        )
        shot(page, path=str(shots / f"layout-{label}-devices-scrolled.png"))
        page.context.close()
    assert not problems, problems
    measured_paths = {p for p, _ in measured}
    for path in (
        "/devices/",
        "/claims/",
        "/nodes/",
        reverse("claims:claim-detail", args=DETAIL_ARGS["claims:claim-detail"]()),
    ):
        assert path in measured_paths, f"{path}: no table measured"
