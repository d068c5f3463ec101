"""The first hour's small fixes in real Chromium on the demo: "/" puts the cursor in the search box (also
from a phone's closed menu), the preview's Namespace field follows the pasted YAML until typed in, no
page asks for a missing favicon, the API docs lead back, the audit log's claims are links; screenshots
of the pages changed at 1440 and 390 px, in English and Chinese (artifacts/screenshots/).

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from claims.models import AuditEntry, ResourceClaim
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "first-hour-pass-123"
PAGES = ("/audit/", "/pods/", "/fleet/map/", "/nodes/", "/readiness/", "/api/docs/")


@pytest.fixture
def stack(tmp_path, artifacts_dir, browser):
    with demo_site(tmp_path, artifacts_dir, "daphne-first-hour.log") as site:
        make_user("hour", role=roles.ADMIN, password=PASSWORD)
        claim = ResourceClaim.objects.filter(cluster=site["cluster"], allocated=True).order_by("name").first()
        AuditEntry.objects.create(
            cluster=site["cluster"],
            cluster_name="demo",
            username="hour",
            namespace=claim.namespace,
            claim_name=claim.name,
            action="deallocate",
            outcome="dry-run",
            dry_run=True,
        )
        yield {**site, "browser": browser, "claim": claim}


def test_shortcut_preview_namespace_favicon_and_screenshots(stack):
    base, shots = stack["base"], stack["shots"]
    page = new_page(stack["browser"], base, "hour", PASSWORD, viewport={"width": 1440, "height": 900})
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)

    page.goto(base + "/nodes/")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.id") == "global-search"
    page.keyboard.type("gpu-h100-02")
    assert page.locator("#global-search").input_value() == "gpu-h100-02"  # the "/" itself is not typed

    page.goto(base + "/preview/")
    yaml = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: x\n  namespace: ml-training\n"
    page.fill("#pv-yaml", yaml)
    assert page.locator("input[name=namespace]").input_value() == "ml-training"
    page.fill("input[name=namespace]", "research")  # typed by the user: the YAML no longer moves it
    page.fill("#pv-yaml", yaml.replace("ml-training", "inference"))
    assert page.locator("input[name=namespace]").input_value() == "research"
    page.keyboard.press("/")  # typing in a field: "/" is a character, not the shortcut
    assert page.evaluate("() => document.activeElement.id") == "pv-yaml"

    page.goto(base + "/audit/")
    claim = stack["claim"]
    link = page.locator(f"#audit-log a.audit-claim[href='/claims/demo/{claim.namespace}/{claim.name}/']")
    assert link.count() == 1
    assert page.locator("#audit-log td[data-action=deallocate]").inner_text().startswith("Deallocate")

    page.goto(base + "/api/docs/")
    page.click("#api-docs-back a:has-text('Back to the dashboard')")
    page.wait_for_url(base + "/")
    assert not [u for u in missing if "favicon" in u], missing

    phone = new_page(stack["browser"], base, "hour", PASSWORD, viewport={"width": 390, "height": 844})
    phone.goto(base + "/pods/")
    phone.keyboard.press("/")  # the search sits in the closed menu: it opens
    assert phone.evaluate("() => document.activeElement.id") == "global-search"

    for lang in ("en", "zh-hans"):
        for width, height in ((1440, 900), (390, 844)):
            viewer = new_page(stack["browser"], base, "hour", PASSWORD, viewport={"width": width, "height": height})
            viewer.context.add_cookies([{"name": "gpudash_language", "value": lang, "url": base}])
            for path in PAGES:
                assert viewer.goto(base + path).status == 200, path
                name = path.strip("/").replace("/", "-") or "overview"
                shot(viewer, path=str(shots / f"first-hour-{name}-{width}-{lang}.png"), full_page=width == 1440)
            viewer.context.close()
