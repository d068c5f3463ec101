"""Claim device status and pod device health on the pages (claim, pod, device, node) and in the API
(claim and pod serializers, /api/v1/device-status/, /api/v1/device-health/, the OpenAPI schema)."""

import html
import re

import pytest
from django.urls import reverse

from claims.models import ClaimDeviceStatus, PodResourceHealth
from mirror.sync.apply import apply_object
from tests.fleet_data import meta
from tests.ui_fixtures import DRIVER, claim, load_fleet, make_user, pod

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]

CDI_GPU1 = "k8s.gpu.nvidia.com/device=gpu-1"


def with_device_status():
    """The UI fleet; team-a/train-1 (gpu-0, gpu-1 on node-a) with the driver's status for both devices,
    and its pod's health reports: gpu-0 in the kubelet's fallback form, gpu-1 as a CDI device ID."""
    cluster = load_fleet()
    raw = claim(
        "team-a", "train-1", count=2, results=["gpu-0", "gpu-1"], node_name="node-a", reserved_for=["train-1-pod"]
    )
    raw["status"]["devices"] = [
        {
            "driver": DRIVER,
            "pool": "node-a",
            "device": "gpu-0",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "XidError",
                    "message": "XID 79 on GPU-gpu-0",
                    "lastTransitionTime": "2026-01-05T10:30:00Z",
                    "observedGeneration": 1,
                }
            ],
            "data": {"uuid": "GPU-gpu-0", "mig": {"enabled": False}},
            "networkData": {"interfaceName": "ib0", "ips": ["10.10.0.5/16"], "hardwareAddress": "00:11:22:33:44:55"},
        },
        {
            "driver": DRIVER,
            "pool": "node-a",
            "device": "gpu-1",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Prepared",
                    "message": "",
                    "lastTransitionTime": "2026-01-05T10:20:00Z",
                }
            ],
        },
    ]
    apply_object(cluster, "ResourceClaim", raw)
    p = pod("team-a", "train-1-pod", "train-1", node_name="node-a")
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu", "request": "gpus"}]}
    p["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "train-1"}]
    p["status"]["containerStatuses"] = [
        {
            "name": "main",
            "ready": True,
            "restartCount": 0,
            "image": "cuda",
            "imageID": "",
            "allocatedResourcesStatus": [
                {
                    "name": "claim:gpu/gpus",
                    "resources": [
                        {
                            "resourceID": f"{DRIVER}/node-a/gpu-0",
                            "health": "Unhealthy",
                            "message": "XID 79: GPU fell off the bus",
                        },
                        {"resourceID": CDI_GPU1, "health": "Healthy"},
                    ],
                }
            ],
        }
    ]
    p["metadata"] = meta("train-1-pod", "team-a")
    apply_object(cluster, "Pod", p)
    return cluster


@pytest.fixture
def alpha():
    return with_device_status()


@pytest.fixture
def viewer(client, alpha):
    client.force_login(make_user("alice"))
    return client


def text(response):
    assert response.status_code == 200
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


def test_the_rows_follow_the_objects(alpha):
    statuses = list(ClaimDeviceStatus.objects.filter(claim__name="train-1").order_by("device"))
    assert [(s.device, s.ready) for s in statuses] == [("gpu-0", False), ("gpu-1", True)]
    rows = PodResourceHealth.objects.filter(pod__name="train-1-pod").order_by("id").with_devices()
    assert [(r.health, r.device_key) for r in rows] == [
        ("Unhealthy", (DRIVER, "node-a", "gpu-0")),
        ("Healthy", (DRIVER, "node-a", "gpu-1")),  # the CDI ID, through the claim's allocation
    ]


def test_claim_page_shows_conditions_data_and_network_data(viewer, alpha):
    page = text(viewer.get(reverse("claims:claim-detail", args=["alpha", "team-a", "train-1"])))
    section = page[page.index('id="device-status"') :]
    assert "XidError" in section and "XID 79 on GPU-gpu-0" in section and "Prepared" in section
    assert '<time datetime="2026-01-05T10:30:00Z"' in section  # the condition's own time
    assert "uuid: GPU-gpu-0" in section and "enabled: false" in section  # data as YAML
    assert "ib0" in section and "10.10.0.5/16" in section and "00:11:22:33:44:55" in section
    assert 'class="badge s-unhealthy ready-false"' in section and 'class="badge ok ready-true"' in section
    # the kubelet's reports about the claim's devices, per pod
    assert 'id="claim-resource-health"' in page and "XID 79: GPU fell off the bus" in page


def test_pod_page_shows_health_per_container_request_and_resource(viewer, alpha):
    page = text(viewer.get(reverse("claims:pod-detail", args=["alpha", "team-a", "train-1-pod"])))
    table = page[page.index('id="pod-resource-health"') :]
    table = table[: table.index("</table>")]
    assert "main" in table and "gpus" in table and f"{DRIVER}/node-a/gpu-0" in table and CDI_GPU1 in table
    assert 'data-health="Unhealthy"' in table and "XID 79: GPU fell off the bus" in table
    gpu1 = reverse("inventory:device-detail", args=["alpha", DRIVER, "node-a", "gpu-1"])
    assert f'href="{gpu1}"' in table  # the CDI ID resolved to its device


def test_device_page_shows_the_status_entries_and_health_of_the_device(viewer, alpha):
    page = text(viewer.get(reverse("inventory:device-detail", args=["alpha", DRIVER, "node-a", "gpu-1"])))
    section = page[page.index('id="device-health"') :]
    assert "team-a/train-1" in section and "Prepared" in section
    assert "team-a/train-1-pod" in section and 'data-health="Healthy"' in section and CDI_GPU1 in section
    reports = section[section.index('id="device-resource-health"') :]
    assert "Unhealthy" not in reports[: reports.index("</table>")]  # gpu-0's report stays on gpu-0


def test_node_page_lists_each_devices_status_and_health_worst_first(viewer, alpha):
    page = text(viewer.get(reverse("inventory:node-detail", args=["alpha", "node-a"])))
    section = page[page.index('id="node-device-status"') :]
    section = section[: section.index("</table>")]
    assert section.index(f"{DRIVER}/node-a/gpu-0") < section.index(f"{DRIVER}/node-a/gpu-1")
    assert "XID 79: GPU fell off the bus" in section and "XidError" in section


def test_a_scoped_user_sees_no_status_of_other_namespaces(client, alpha):
    client.force_login(make_user("bob", namespaces=["team-b"]))
    page = text(client.get(reverse("inventory:device-detail", args=["alpha", DRIVER, "node-a", "gpu-1"])))
    section = page[page.index('id="device-health"') :]
    assert "train-1" not in section
    page = text(client.get(reverse("inventory:node-detail", args=["alpha", "node-a"])))
    assert "XID 79" not in page


def test_malformed_entries_show_their_error(viewer, alpha):
    raw = claim("team-a", "train-1", count=2, results=["gpu-0", "gpu-1"], node_name="node-a")
    raw["status"]["devices"] = [{"driver": DRIVER, "pool": "node-a", "device": "gpu-0", "conditions": "Ready"}]
    apply_object(alpha, "ResourceClaim", raw)
    page = text(viewer.get(reverse("claims:claim-detail", args=["alpha", "team-a", "train-1"])))
    assert "This entry could not be read in full: conditions is not a list" in page


def test_pages_in_chinese(viewer, alpha):
    page = text(
        viewer.get(reverse("claims:claim-detail", args=["alpha", "team-a", "train-1"]), HTTP_ACCEPT_LANGUAGE="zh-CN")
    )
    assert "设备状态" in page and "未就绪" in page and "驱动提供的数据" in page
    page = text(
        viewer.get(reverse("claims:pod-detail", args=["alpha", "team-a", "train-1-pod"]), HTTP_ACCEPT_LANGUAGE="zh-CN")
    )
    assert "设备健康" in page and "不健康" in page


# --- API --------------------------------------------------------------------------------------------


def test_claim_and_pod_serializers(viewer, alpha):
    claims = viewer.get("/api/v1/claims/", {"name": "train-1"}).json()["results"]
    statuses = claims[0]["device_statuses"]
    assert [s["device"] for s in statuses] == ["gpu-0", "gpu-1"]
    first = statuses[0]
    assert first["ready"] is False and first["conditions"][0]["reason"] == "XidError"
    assert first["network_data"] == {
        "interface_name": "ib0",
        "ips": ["10.10.0.5/16"],
        "hardware_address": "00:11:22:33:44:55",
    }
    assert first["data"] == {"uuid": "GPU-gpu-0", "mig": {"enabled": False}} and first["error"] == ""
    pods = viewer.get("/api/v1/pods/", {"name": "train-1-pod"}).json()["results"]
    health = pods[0]["resource_health"]
    assert [(h["container"], h["claim_name"], h["request"], h["resource_id"], h["health"]) for h in health] == [
        ("main", "gpu", "gpus", f"{DRIVER}/node-a/gpu-0", "Unhealthy"),
        ("main", "gpu", "gpus", CDI_GPU1, "Healthy"),
    ]
    assert health[0]["message"] == "XID 79: GPU fell off the bus"
    assert health[1]["device"] == {"driver": DRIVER, "pool": "node-a", "device": "gpu-1"}
    assert health[1]["resource_claim_name"] == "train-1"


def test_device_endpoints(viewer, alpha):
    rows = viewer.get("/api/v1/device-status/", {"driver": DRIVER, "pool": "node-a", "device": "gpu-0"}).json()[
        "results"
    ]
    assert [(r["claim"], r["namespace"], r["node"], r["ready"]) for r in rows] == [
        ("train-1", "team-a", "node-a", False)
    ]
    assert viewer.get("/api/v1/device-status/", {"ready": "true"}).json()["count"] == 1
    health = viewer.get("/api/v1/device-health/", {"device": "gpu-1"}).json()["results"]
    assert [(h["pod"], h["resource_id"], h["device"]["device"]) for h in health] == [("train-1-pod", CDI_GPU1, "gpu-1")]
    unhealthy = viewer.get("/api/v1/device-health/", {"health": "Unhealthy", "node": "node-a"}).json()["results"]
    assert [h["device"]["device"] for h in unhealthy] == ["gpu-0"]
    bad = viewer.get("/api/v1/device-health/", {"health": "Sick"})
    assert bad.status_code == 400
    assert viewer.get("/api/v1/device-status/", {"colour": "red"}).status_code == 400


def test_device_endpoints_are_namespace_scoped(client, alpha):
    client.force_login(make_user("bob", namespaces=["team-b"]))
    assert client.get("/api/v1/device-status/").json()["count"] == 0
    assert client.get("/api/v1/device-health/").json()["count"] == 0


def test_openapi_schema_describes_the_new_fields(viewer):
    schema = viewer.get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    claim_props = components["ResourceClaim"]["properties"]
    assert "device_statuses" in claim_props
    status = components["ClaimDeviceStatus"]["properties"]
    assert {"conditions", "data", "network_data", "ready", "error", "share_id"} <= set(status)
    assert {"interface_name", "ips", "hardware_address"} <= set(components["NetworkData"]["properties"])
    assert "resource_health" in components["Pod"]["properties"]
    health = components["ResourceHealth"]["properties"]
    assert {"resource_id", "health", "message", "device", "container", "request"} <= set(health)
    assert "/api/v1/device-status/" in schema["paths"] and "/api/v1/device-health/" in schema["paths"]
