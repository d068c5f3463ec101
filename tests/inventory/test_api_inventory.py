"""REST API: clusters, nodes, device classes, resource slices, devices (filters, state, raw, paging)."""

import pytest

from inventory.models import Device
from mirror.models import Cluster
from tests.api_fixtures import H100, fleet, queries_for, viewer  # noqa: F401

pytestmark = pytest.mark.django_db


def names(response):
    assert response.status_code == 200, response.content
    return [r["name"] for r in response.json()["results"]]


def device_keys(response):
    assert response.status_code == 200, response.content
    return sorted(f"{r['cluster']}/{r['pool']}/{r['name']}" for r in response.json()["results"])


def test_clusters_show_connection_status_per_kind(fleet, viewer):
    body = viewer.get("/api/v1/clusters/").json()
    by_name = {c["name"]: c for c in body["results"]}
    assert by_name["alpha"]["connected"] is True
    assert [s["kind"] for s in by_name["alpha"]["sync"]] == ["Node", "ResourceClaim", "ResourceSlice"]
    assert by_name["beta"]["connected"] is False
    assert by_name["beta"]["sync"][0]["last_error"] == "connection refused"
    assert by_name["beta"]["writable"] is False


def test_cluster_detail_and_404(fleet, viewer):
    alpha, _ = fleet
    assert viewer.get(f"/api/v1/clusters/{alpha.pk}/").json()["name"] == "alpha"
    missing = viewer.get("/api/v1/clusters/999999/")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_nodes_count_their_devices_and_filter_by_cluster(fleet, viewer):
    body = viewer.get("/api/v1/nodes/?cluster=alpha").json()
    assert {n["name"]: n["device_count"] for n in body["results"]} == {"node-a": 8, "node-b": 3}
    assert names(viewer.get("/api/v1/nodes/?cluster=beta")) == ["node-z"]


def test_nodes_raw_only_when_asked(fleet, viewer):
    plain = viewer.get("/api/v1/nodes/?name=node-a").json()["results"][0]
    assert "raw" not in plain
    raw = viewer.get("/api/v1/nodes/?name=node-a&raw=1").json()["results"][0]
    assert raw["raw"]["kind"] == "Node" and raw["raw"]["metadata"]["name"] == "node-a"


def test_device_classes_list_selectors(fleet, viewer):
    from inventory.tasks import count_class_matches

    count_class_matches(Cluster.objects.get(name="alpha").id)  # what the background recount stores
    body = viewer.get("/api/v1/device-classes/").json()
    cls = body["results"][0]
    assert cls["name"] == "gpu.nvidia.com"
    assert cls["selectors"][0]["cel"]["expression"] == "device.driver == 'gpu.nvidia.com'"
    # The CEL engine counts alpha's 10 NVIDIA devices (not beta's, not the NIC).
    assert (cls["matching_devices"], cls["matching_error"], cls["matching_current"]) == (10, "", True)


def test_resource_slices_filter_and_count(fleet, viewer):
    body = viewer.get("/api/v1/resource-slices/?cluster=alpha&node=node-b&driver=gpu.nvidia.com").json()
    assert [(s["name"], s["device_count"], s["pool"]) for s in body["results"]] == [("node-b-gpu", 2, "node-b")]
    assert names(viewer.get("/api/v1/resource-slices/?pool=node-z")) == ["node-z-gpu"]


def test_device_states(fleet, viewer):
    body = viewer.get("/api/v1/devices/?cluster=alpha&page_size=1000").json()
    state = {f"{d['pool']}/{d['name']}": d["state"] for d in body["results"]}
    assert state["node-a/gpu-0"] == "allocated"
    assert state["node-a/gpu-1"] == "admin"  # admin access never blocks allocation
    assert state["node-a/gpu-7"] == "tainted"
    assert state["node-b/gpu-0"] == "allocated"
    assert state["node-b/nic-0"] == "shared"
    assert state["node-a/gpu-2"] == "free"


@pytest.mark.parametrize(
    "state, expected",
    [
        ("allocated", ["alpha/node-a/gpu-0", "alpha/node-b/gpu-0"]),
        ("admin", ["alpha/node-a/gpu-1"]),
        ("tainted", ["alpha/node-a/gpu-7"]),
        ("shared", ["alpha/node-b/nic-0"]),
    ],
)
def test_device_state_filter(fleet, viewer, state, expected):
    assert device_keys(viewer.get(f"/api/v1/devices/?state={state}")) == expected


def test_device_state_free_filter(fleet, viewer):
    keys = device_keys(viewer.get("/api/v1/devices/?state=free&page_size=100"))
    assert keys == sorted(
        ["alpha/node-a/gpu-%d" % i for i in range(2, 7)] + ["alpha/node-b/gpu-1", "beta/node-z/gpu-0"]
    )


def test_device_identity_filters(fleet, viewer):
    assert device_keys(viewer.get("/api/v1/devices/?cluster=beta")) == ["beta/node-z/gpu-0"]
    assert device_keys(viewer.get("/api/v1/devices/?node=node-b&driver=net.example.com")) == ["alpha/node-b/nic-0"]
    assert len(device_keys(viewer.get("/api/v1/devices/?pool=node-a"))) == 8
    assert device_keys(viewer.get("/api/v1/devices/?tainted=true")) == ["alpha/node-a/gpu-7"]


def test_attribute_filter_qualified_and_bare(fleet, viewer):
    qualified = device_keys(
        viewer.get("/api/v1/devices/", {"attribute": f"gpu.nvidia.com/productName:{H100}", "page_size": 100})
    )
    bare = device_keys(viewer.get("/api/v1/devices/", {"attribute": f"productName:{H100}", "page_size": 100}))
    assert qualified == bare
    assert len(qualified) == 9  # 8 on node-a + beta's; not the NIC that names gpu.nvidia.com/productName itself


def test_attribute_filter_other_domain(fleet, viewer):
    # The NIC (driver net.example.com) publishes gpu.nvidia.com/productName as a foreign-domain attribute.
    assert device_keys(viewer.get("/api/v1/devices/", {"attribute": "gpu.nvidia.com/productName:not a gpu"})) == [
        "alpha/node-b/nic-0"
    ]
    assert device_keys(
        viewer.get("/api/v1/devices/", {"attribute": "resource.kubernetes.io/pcieRoot:pci0000:30", "cluster": "alpha"})
    ) == ["alpha/node-a/gpu-3"]


def test_attribute_filter_typed_values_and_repeat(fleet, viewer):
    keys = device_keys(
        viewer.get("/api/v1/devices/", {"attribute": ["index:1", f"productName:{H100}"], "cluster": "alpha"})
    )
    assert keys == ["alpha/node-a/gpu-1"]
    assert device_keys(viewer.get("/api/v1/devices/", {"attribute": "driverVersion:580.95.5", "node": "node-b"})) == [
        "alpha/node-b/gpu-0",
        "alpha/node-b/gpu-1",
    ]


@pytest.mark.parametrize(
    "expr, count",
    [
        ("gpu.nvidia.com/memory>=40Gi", 11),
        ("memory>=40Gi", 11),
        ("memory>40Gi", 9),
        ("memory<80Gi", 2),
        ("memory<=42949672960", 2),  # 40Gi in bytes: compared as numbers, not strings
        ("memory=80Gi", 9),
        ("memory==85899345920", 9),
        ("memory!=80Gi", 2),
        ("memory>=0.5Ti", 0),
        ("memory>=39.9Gi", 11),
        ("bandwidth>=400G", 1),
        ("net.example.com/bandwidth>400G", 0),
        ("multiprocessors>=132000m", 11),
    ],
)
def test_capacity_comparisons(fleet, viewer, expr, count):
    r = viewer.get("/api/v1/devices/", {"capacity": expr, "page_size": 100})
    assert r.status_code == 200, r.content
    assert r.json()["count"] == count


def test_attribute_and_capacity_together(fleet, viewer):
    r = viewer.get(
        "/api/v1/devices/",
        {
            "attribute": f"gpu.nvidia.com/productName:{H100}",
            "capacity": "gpu.nvidia.com/memory>=40Gi",
            "state": "free",
            "cluster": "alpha",
        },
    )
    assert device_keys(r) == ["alpha/node-a/gpu-%d" % i for i in range(2, 7)]


def test_device_detail_lists_its_allocations(fleet, viewer):
    dev = Device.objects.get(pool="node-a", name="gpu-0")
    body = viewer.get(f"/api/v1/devices/{dev.pk}/").json()
    assert body["state"] == "allocated"
    assert [(a["namespace"], a["claim"], a["request"]) for a in body["allocations"]] == [("team-a", "train", "gpu")]
    assert body["capacity"] == {"memory": "80Gi", "multiprocessors": "132"}
    assert "raw" not in body
    assert viewer.get(f"/api/v1/devices/{dev.pk}/?raw=true").json()["raw"]["name"] == "gpu-0"


def test_device_ordering_and_stable_pages(fleet, viewer):
    ordered = viewer.get("/api/v1/devices/?ordering=-name&cluster=alpha&page_size=100").json()["results"]
    assert [d["name"] for d in ordered][:2] == ["nic-0", "gpu-7"]
    # Walking pages of 3 yields every device exactly once, in the same order as one big page.
    seen, url = [], "/api/v1/devices/?page_size=3&ordering=node"
    while url:
        body = viewer.get(url).json()
        seen += [d["id"] for d in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen)) == 12
    assert seen == [d["id"] for d in viewer.get("/api/v1/devices/?page_size=100&ordering=node").json()["results"]]


def test_device_list_query_count_does_not_grow_with_page_size(fleet, viewer):
    # token, role, cluster lookup, capacity-name check, NotReady nodes (for the state filter and for
    # the state field), page ids + total, page rows: the same for 1 row or all.
    url = "/api/v1/devices/?cluster=alpha&capacity=memory>=1Gi&state=free"
    one, small = queries_for(viewer, url + "&page_size=1")
    many, large = queries_for(viewer, url + "&page_size=1000")
    assert len(small.json()["results"]) == 1 and len(large.json()["results"]) == 6
    assert one == many <= 8


@pytest.mark.parametrize("url", ["/api/v1/nodes/", "/api/v1/resource-slices/", "/api/v1/clusters/"])
def test_other_lists_query_count_does_not_grow_with_page_size(fleet, viewer, url):
    one, small = queries_for(viewer, url + "?page_size=1")
    many, large = queries_for(viewer, url + "?page_size=1000")
    assert len(large.json()["results"]) > 1
    assert one == many <= 5


def test_device_aggregates_by_model_and_state(fleet, viewer):
    body = viewer.get("/api/v1/aggregates/devices?group_by=model&group_by=state&cluster=alpha").json()
    counts = {(r["model"], r["state"]): r["count"] for r in body["results"]}
    assert counts[(H100, "free")] == 5
    assert counts[(H100, "allocated")] == 1 and counts[(H100, "admin")] == 1 and counts[(H100, "tainted")] == 1
    assert counts[("NVIDIA A100 80GB PCIe", "allocated")] == 1
    assert counts[("cx7", "shared")] == 1  # the NIC has no productName of its own driver: its model attribute
    assert body["total"] == 11


def test_device_aggregates_per_node_with_filters(fleet, viewer):
    body = viewer.get(
        "/api/v1/aggregates/devices", {"group_by": ["cluster", "node"], "capacity": "memory>=40Gi"}
    ).json()
    assert body["results"] == [
        {"cluster": "alpha", "node": "node-a", "count": 8},
        {"cluster": "alpha", "node": "node-b", "count": 2},
        {"cluster": "beta", "node": "node-z", "count": 1},
    ]


def test_device_aggregates_reject_bad_grouping(fleet, viewer):
    r = viewer.get("/api/v1/aggregates/devices?group_by=colour")
    assert r.status_code == 400 and r.json()["error"]["field"] == "group_by"
