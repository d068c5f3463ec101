"""Accessibility in real Chromium: axe-core (npm, node_modules/axe-core) scans every dashboard page and
finds no serious or critical violation, and at a phone's width (390 px) no page scrolls sideways; the
navigation collapses at that width; the skip link comes first and the fleet map is one Tab stop.

"Every page" is read from the URL configuration: each route served by a DashboardView (the pages of
every app, including ones added later) plus the sign-in page and the admin. A route with arguments
needs an entry in DETAIL_ARGS saying which object to show; a new page without one fails the test
with a message naming it, so the scan never silently skips a page.

axe is served to the page from its own origin by a Playwright route (the pages' Content-Security-Policy
allows scripts from 'self' only, so an inline copy would be refused) and injected with a <script src>.
"""

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from claims.models import AuditEntry, Pod, ResourceClaim, ResourceClaimTemplate
from inventory.models import Device, DeviceClass, Node, ResourceSlice
from mirror.views import DashboardView
from tests.api_fixtures import load_fleet
from tests.browser import BROWSER_MARKS, ROOT, browser_server, chromium, log_in

pytestmark = BROWSER_MARKS
PASSWORD = "a11y-pass-123"
AXE = Path(ROOT) / "node_modules" / "axe-core" / "axe.min.js"
AXE_URL = "/__test__/axe.min.js"  # answered by the route below, never by the server
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}


def _first(queryset):
    obj = queryset.first()
    assert obj is not None, f"the fixture fleet has no {queryset.model.__name__}"
    return obj


def _claim():
    c = _first(ResourceClaim.objects.filter(name="train").select_related("cluster"))
    return [c.cluster.name, c.namespace, c.name]


def _device():
    d = _first(Device.objects.filter(node_name="node-a").select_related("cluster").order_by("name"))
    return [d.cluster.name, d.driver, d.pool, d.name]


def _pending_pod():
    p = _first(Pod.objects.filter(phase="Pending").select_related("cluster"))
    return [p.cluster.name, p.namespace, p.name]


def _named(model, **filters):
    obj = _first(model.objects.filter(**filters).select_related("cluster").order_by("name"))
    return [obj.cluster.name, *([obj.namespace] if getattr(obj, "namespace", "") else []), obj.name]


# URL name -> the arguments of an object of the fixture fleet. Add an entry for a new detail page.
DETAIL_ARGS = {
    "inventory:node-detail": lambda: _named(Node, name="node-a"),
    "inventory:device-detail": _device,
    "inventory:class-detail": lambda: _named(DeviceClass),
    "inventory:slice-detail": lambda: _named(ResourceSlice, node_name="node-a"),
    "claims:claim-detail": _claim,
    "claims:pod-detail": lambda: _named(Pod, name="trainer"),
    "claims:template-detail": lambda: _named(ResourceClaimTemplate, name="tpl"),
    "ops:pending-pod": _pending_pod,
    "monitoring:namespace-history": lambda: ["team-a"],
}
DARK_PAGES = ["/", "/fleet/map/", "/claims/", "/stuck/", "/audit/"]
EXTRA_PAGES = [
    "/admin/",
    "/admin/mirror/cluster/",
    "/accounts/profile/",
]  # not DashboardViews, still ours to keep usable


NOT_PAGES = {"live-regions"}  # DashboardViews that serve only live fragments, never a page


def _dashboard_routes(resolver=None, prefix=""):
    """(url name, pattern) of every GET route served by a DashboardView, in URLconf order."""
    resolver = resolver or get_resolver()
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            ns = f"{prefix}{p.namespace}:" if p.namespace else prefix
            yield from _dashboard_routes(p, ns)
        elif isinstance(p, URLPattern):
            view = getattr(p.callback, "view_class", None)
            if (
                view
                and issubclass(view, DashboardView)
                and "get" in view.http_method_names
                and p.name
                and p.name not in NOT_PAGES
            ):
                yield f"{prefix}{p.name}", p


def every_page():
    paths, missing = [], []
    for name, pattern in _dashboard_routes():
        if pattern.pattern.converters:
            if name not in DETAIL_ARGS:
                missing.append(name)
                continue
            paths.append(reverse(name, args=DETAIL_ARGS[name]()))
        else:
            paths.append(reverse(name))
    assert not missing, f"pages without an object to scan: add them to DETAIL_ARGS in {__name__}: {missing}"
    return list(dict.fromkeys(paths)) + EXTRA_PAGES


AXE_RUN = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  window.__axeRules = result.violations.length + result.passes.length;
  return result.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
    `${v.impact} ${v.id}: ${v.help} -- ${v.nodes.slice(0, 3).map(n => n.target.join(" ") + " " + (n.failureSummary || "").split("\\n").slice(1, 2).join("")).join(" | ")}`);
}"""
# The page's width, and (to say what to fix) the outermost elements sticking out on the right.
SIDEWAYS = r"""() => {
  const width = document.documentElement.clientWidth, out = [];
  for (const el of document.querySelectorAll("body *")) {
    if (el.getBoundingClientRect().right > width + 1 && !(el.parentElement && el.parentElement.getBoundingClientRect().right > width + 1)) {
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined ? "." + el.className.trim().split(/\s+/).join(".") : ""));
    }
  }
  return { scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 5) };
}"""


@pytest.fixture
def server(artifacts_dir):
    load_fleet()
    User.objects.create_superuser("ada", password=PASSWORD)
    AuditEntry.objects.create(
        username="ada",
        cluster_name="alpha",
        namespace="team-b",
        claim_name="stuck",
        action="remove-finalizers",
        dry_run=True,
        outcome="dry-run",
        reason="dry run",
        request={"method": "PATCH", "path": "/apis/resource.k8s.io/v1/x"},
    )
    server = browser_server(artifacts_dir / "daphne-a11y.log")
    server.start()
    yield server
    server.stop()


def _with_axe(page):
    page.route("**" + AXE_URL, lambda route: route.fulfill(path=str(AXE), content_type="text/javascript"))
    return page


def test_every_page_passes_axe_and_fits_a_phone(server):
    assert AXE.exists(), "npm ci installs axe-core (package.json)"
    base = server.url
    pages = every_page()
    problems, sideways, failed = {}, {}, {}
    with chromium() as browser:
        wide = _with_axe(log_in(browser.new_page(viewport=DESKTOP), base, "ada", PASSWORD))
        wide.goto(base + "/?cluster=alpha")  # the preview and readiness need one cluster selected
        for path in pages:
            response = wide.goto(base + path)
            if response.status != 200:
                failed[path] = response.status
                continue
            wide.add_script_tag(url=AXE_URL)
            found = wide.evaluate(AXE_RUN)
            assert wide.evaluate("() => window.__axeRules") > 10, f"axe did not run on {path}"
            if found:
                problems[path] = found
            wide.set_viewport_size(PHONE)  # the same page laid out again at a phone's width
            size = wide.evaluate(SIDEWAYS)
            wide.set_viewport_size(DESKTOP)
            if size["scroll"] > size["width"]:
                sideways[path] = size
        # Dark mode (prefers-color-scheme) has colours of its own: the pages with the most of them.
        wide.emulate_media(color_scheme="dark")
        for path in DARK_PAGES:
            wide.goto(base + path)
            wide.add_script_tag(url=AXE_URL)
            found = wide.evaluate(AXE_RUN)
            if found:
                problems[f"{path} (dark)"] = found
        wide.emulate_media(color_scheme="light")
        # The sign-in page, signed out.
        anonymous = _with_axe(browser.new_page(viewport=DESKTOP))
        anonymous.goto(base + "/accounts/login/")
        anonymous.add_script_tag(url=AXE_URL)
        found = anonymous.evaluate(AXE_RUN)
        if found:
            problems["/accounts/login/"] = found

        # The collapsed navigation opens from its button at phone width.
        narrow = wide
        narrow.set_viewport_size(PHONE)
        narrow.goto(base + "/claims/")
        assert not narrow.locator("#mainnav").is_visible()
        narrow.click(".navtoggle")
        assert narrow.locator("#mainnav").is_visible() and narrow.get_attribute(".navtoggle", "aria-expanded") == "true"
        assert narrow.locator("#mainnav a[aria-current=page]").inner_text() == "Claims"

        # Keyboard: the skip link comes first; the fleet map is one Tab stop with arrow keys inside.
        page = wide
        page.set_viewport_size(DESKTOP)
        page.goto(base + "/fleet/map/")
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.className") == "skiplink"
        links = page.locator(".fleetmap a[href]")
        assert links.count() > 2
        assert page.locator(".fleetmap a[tabindex='0']").count() == 1
        assert page.locator(".fleetmap a[tabindex='-1']").count() == links.count() - 1
        page.locator(".fleetmap a[tabindex='0']").focus()
        before = page.evaluate("() => document.activeElement.getAttribute('href')")
        page.keyboard.press("ArrowRight")
        assert page.evaluate("() => document.activeElement.getAttribute('href')") != before
        assert page.evaluate("() => document.activeElement.getAttribute('tabindex')") == "0"
        assert page.locator(".fleetmap a[tabindex='0']").count() == 1
        page.keyboard.press("Tab")
        assert page.evaluate("() => !document.activeElement.closest('.fleetmap')"), "Tab leaves the map"
    assert len(pages) >= 15, pages
    assert not problems, "\n".join(f"{p}:\n  " + "\n  ".join(v) for p, v in problems.items())
    assert not sideways, f"pages wider than {PHONE['width']} px: {sideways}"
    assert not failed, f"pages that did not answer 200: {failed}"
