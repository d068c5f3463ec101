"""Device health in real Chromium on the demo site, the sync running: the driver taints two devices and
the kubelet reports a held device Unknown; the fleet map marks them beside their state colour (with a
legend), and the device page shows the state, the reasons and the timeline.

Needs Debian's chromium (/usr/bin/chromium) and REDIS_URL; skipped otherwise.
"""

import pytest

from claims.models import AllocationResult, PodClaimRef
from health.models import DeviceHealth
from mirror import roles
from tests.browser import BROWSER_MARKS, demo_site, new_page, shot, wait_until
from tests.ui_fixtures import make_user

pytestmark = BROWSER_MARKS
PASSWORD = "health-pass-123"
SYNC_BOUND = 60  # the watchers' sync of a few changes on a loaded machine; a bound, not a figure
NODE, DRIVER = "gpu-h100-01", "gpu.nvidia.com"


@pytest.fixture
def stack(tmp_path, artifacts_dir, browser):
    with demo_site(tmp_path, artifacts_dir, "daphne-health.log") as site:
        make_user("hana", role=roles.VIEWER, password=PASSWORD)
        yield {**site, "page": new_page(browser, site["base"], "hana", PASSWORD)}


def make_trouble(api, cluster):
    [slc] = [
        s
        for s in api.store.list("resourceslices", field_selector=f"spec.nodeName={NODE}")
        if s["spec"]["driver"] == DRIVER
    ]
    by_name = {d["name"]: d for d in slc["spec"]["devices"]}
    by_name["gpu-5"]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    by_name["gpu-6"]["taints"] = [{"key": "gpu.nvidia.com/ecc", "value": "corrected", "effect": "None"}]
    api.store.update("resourceslices", slc)
    # The pod holding gpu-7: its kubelet lost the driver's health stream.
    result = AllocationResult.objects.filter(cluster=cluster, pool=NODE, device="gpu-7").select_related("claim").first()
    ref = PodClaimRef.objects.filter(
        cluster=cluster, namespace=result.claim.namespace, claim_name=result.claim.name
    ).select_related("pod")[0]
    pod = api.store.get("pods", ref.namespace, ref.pod.name)
    container = pod["spec"]["containers"][0]["name"]
    pod["status"]["containerStatuses"] = [
        {
            "name": container,
            "ready": True,
            "restartCount": 0,
            "image": "cuda",
            "imageID": "",
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            "allocatedResourcesStatus": [
                {
                    "name": f"claim:{ref.pod_claim_name}/{result.request}",
                    "resources": [{"resourceID": f"{DRIVER}/{NODE}/gpu-7", "health": "Unknown"}],
                }
            ],
        }
    ]
    api.store.update("pods", pod, subresource="status")
    return f"{ref.namespace}/{ref.pod.name}"


def test_fleet_map_markers_and_device_page(stack):
    api, base, page, cluster = stack["api"], stack["base"], stack["page"], stack["cluster"]
    pod = make_trouble(api, cluster)
    states = DeviceHealth.objects.filter(cluster=cluster, pool=NODE, device__in=("gpu-5", "gpu-6", "gpu-7"))
    wait_until(lambda: states.count() == 3, SYNC_BOUND, "three devices of troubled health")

    assert page.goto(f"{base}/fleet/map/?q={NODE}").status == 200
    row = page.locator(f"#maprow-demo-{NODE}, .maprow[data-node='{NODE}']").first
    marked = {
        cell.get_attribute("href").rstrip("/").rsplit("/", 1)[-1]: cell.get_attribute("class")
        for cell in row.locator("a.cell[class*=' h-']").all()
    }
    assert {k: v.rsplit(" h-", 1)[1].split()[0] for k, v in marked.items()} == {
        "gpu-5": "unhealthy",
        "gpu-6": "degraded",
        "gpu-7": "unknown",
    }
    # The marker is drawn (a pseudo-element of its own shape), and the legend counts them.
    marker = row.locator("a.cell.h-unhealthy").first.evaluate(
        "el => getComputedStyle(el, '::after').getPropertyValue('background-color')"
    )
    assert marker not in ("", "rgba(0, 0, 0, 0)", "transparent")
    legend = page.locator("#map-health-legend")
    fleet_wide = DeviceHealth.objects.filter(cluster=cluster, state="unhealthy").count()  # the demo taints others too
    assert legend.locator("[data-health=unhealthy]").get_attribute("data-count") == str(fleet_wide)
    assert "health: unknown" in row.locator("a.cell.h-unknown").first.get_attribute("title")
    row.scroll_into_view_if_needed()
    shot(page, path=str(stack["shots"] / "health-fleet-map.png"), full_page=False)
    row.evaluate("el => { el.style.zoom = '3'; }")  # the row enlarged, to look at the markers
    shot(row, path=str(stack["shots"] / "health-fleet-map-row.png"))

    assert page.goto(f"{base}/devices/demo/{DRIVER}/{NODE}/gpu-7/").status == 200
    health = page.locator("#device-health-state")
    assert health.locator("h2 [data-health]").inner_text() == "health unknown"
    assert f"pod {pod} (container" in health.inner_text() and "reports it Unknown" in health.inner_text()
    first = health.locator("#device-health-timeline tbody tr").first
    assert first.get_attribute("data-to") == "unknown" and pod in first.inner_text()
    health.scroll_into_view_if_needed()
    shot(health, path=str(stack["shots"] / "health-device-page.png"))
