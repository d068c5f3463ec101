"""Device kinds (inventory/devicekinds.py): whole GPUs, partitions and other devices counted apart, on
the demo fleet (partitionable MIG A100s, H100s with RDMA NICs, L4s), against counts computed here from
the scenario's ResourceSlices: the summary, the overview, the nodes page and its "≥ N free GPUs of model
X" filter, the map, the API aggregates; and a driver outage that keeps the node's place."""

import re
from collections import Counter, defaultdict

import pytest
from django.urls import reverse

from devcluster.scenario import scenario_objects
from inventory import devicekinds, fleet
from inventory.models import Device, NodeDeviceSummary
from mirror.models import Cluster
from mirror.sync.apply import apply_object, delete_object
from tests.fleet_data import load_scenario, make_user

pytestmark = pytest.mark.django_db
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"


def expected_from_slices(objects):
    """Per node: physical GPUs per model (a MIG device belongs to the GPU whose uuid is its parentUUID),
    free ones (none of the GPU's devices allocated, admin access aside, or tainted; node Ready),
    partitions and other devices."""
    held = {
        (r["driver"], r["pool"], r["device"])
        for c in objects["resourceclaims"]
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if not r.get("adminAccess")
    }
    ready = {
        n["metadata"]["name"]
        for n in objects["nodes"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }
    gpus, free, partitions, other = Counter(), Counter(), Counter(), Counter()
    groups = defaultdict(list)
    for s in objects["resourceslices"]:
        spec = s["spec"]
        for dev in spec.get("devices", []):
            attrs, node = dev["attributes"], spec["nodeName"]
            key = (spec["driver"], spec["pool"]["name"], dev["name"])
            busy = key in held or any(t["effect"] in ("NoSchedule", "NoExecute") for t in dev.get("taints", []))
            kind = attrs.get("type", {}).get("string")
            if kind == "gpu":
                groups[(node, attrs["productName"]["string"], attrs["uuid"]["string"])].append(busy)
            elif kind == "mig":
                partitions[node] += 1
                groups[(node, attrs["productName"]["string"], attrs["parentUUID"]["string"])].append(busy)
            else:
                other[node] += 1
    for (node, model, _uuid), busy in groups.items():
        gpus[(node, model)] += 1
        free[(node, model)] += node in ready and not any(busy)
    return {"gpus": gpus, "free": free, "partitions": partitions, "other": other}


def per_node(counter):
    out = Counter()
    for (node, _model), n in counter.items():
        out[node] += n
    return out


@pytest.fixture
def demo():
    return load_scenario(Cluster.objects.create(name="demo")), scenario_objects("demo")


def test_classify_kinds_and_parents():
    devices = [
        {
            "name": "gpu-0",
            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-a"}},
            "consumesCounters": [{"counterSet": "gpu-0-cs"}],
        },
        {
            "name": "gpu-0-mig-1g10gb-19-0",
            "attributes": {"type": {"string": "mig"}},
            "consumesCounters": [{"counterSet": "gpu-0-cs"}],
        },
        {
            "name": "gpu-1-mig-1g10gb-19-0",
            "attributes": {"gpu.nvidia.com/type": {"string": "mig"}, "parentUUID": {"string": "GPU-b"}},
        },
        {"name": "slice-x", "attributes": {}, "consumesCounters": [{"counterSet": "gpu-0-cs"}]},
        {"name": "nic-0", "attributes": {"type": {"string": "rdma"}}},
    ]
    assert devicekinds.classify("gpu.nvidia.com", devices) == [
        ("gpu", "GPU-a"),
        ("partition", "GPU-a"),
        ("partition", "GPU-b"),
        ("partition", "GPU-a"),
        ("other", ""),
    ]
    # a driver publishing no type attribute: gpu.<vendor> devices are GPUs, others are not
    assert devicekinds.classify(
        "gpu.example.com", [{"name": "gpu-0", "attributes": {"model": {"string": "LATEST-GPU-MODEL"}}}]
    ) == [("gpu", "device:gpu-0")]
    assert devicekinds.classify("rdma.example.com", [{"name": "nic-0"}, "garbage"]) == [("other", ""), ("other", "")]


@pytest.mark.sqlite_default  # the embedded default counts the same
def test_whole_gpu_counts_equal_the_slices(demo, client):
    cluster, objects = demo
    want = expected_from_slices(objects)
    snap = fleet.FleetSnapshot([cluster.id])
    totals = snap.kind_totals()
    assert (totals["gpus"], totals["gpus_free"], totals["partitions"], totals["other"]) == (
        sum(want["gpus"].values()),
        sum(want["free"].values()),
        sum(want["partitions"].values()),
        sum(want["other"].values()),
    )
    assert totals["gpus"] + totals["partitions"] + totals["other"] > totals["gpus"] == 48  # 184 devices, 48 GPUs
    got = {
        n: (c["gpus"], c["gpus_free"], c["partitions"], c["other"]) for (_cid, n), c in snap.node_gpu_counts().items()
    }
    gpus, free = per_node(want["gpus"]), per_node(want["free"])
    assert got == {n: (gpus[n], free[n], want["partitions"][n], want["other"][n]) for n in gpus}
    # the fragmentation chart: per model, nodes by number of free whole GPUs
    hist = {m["model"]: {b["free"]: b["nodes"] for b in m["bars"] if b["nodes"]} for m in snap.free_gpu_histogram()}
    want_hist = defaultdict(Counter)
    for (node, model), n in want["gpus"].items():
        want_hist[model][want["free"][(node, model)]] += 1
    assert hist == {m: dict(c) for m, c in want_hist.items()}

    client.force_login(make_user("viewer-k", "viewer"))
    page = client.get(reverse("inventory:overview")).content.decode()
    for kind, n in (
        ("gpus", totals["gpus"]),
        ("gpus_free", totals["gpus_free"]),
        ("partitions", totals["partitions"]),
        ("other", totals["other"]),
    ):
        assert f'data-kind="{kind}" data-count="{n}"' in page
    # "nodes with ≥ N free GPUs of model X": page and API
    for n, model in ((1, H100), (3, ""), (4, A100), (0, A100), (8, H100)):
        wanted = sorted(
            node
            for (node, m), k in want["free"].items()
            if (not model or m == model) and k >= n and want["gpus"][(node, m)]
        )
        if not model:
            wanted = sorted(node for node in gpus if free[node] >= n)
        params = {"min_free_gpus": str(n), "gpu_model": model, "gpu_source": "dra"}
        body = client.get(reverse("inventory:node-list"), params).content.decode()
        shown = sorted(re.findall(r'href="/nodes/demo/([^/"]+)/"', body))
        assert shown == wanted, (n, model)
        api = client.get("/api/v1/nodes/", {k: v for k, v in params.items() if v != ""}).json()
        assert "results" in api, api
        assert sorted(r["name"] for r in api["results"]) == wanted
        map_rows = fleet.FleetMap(snap, gpu=fleet.gpu_filter(params)[0]).rows
        assert sorted(r["map_key"] for r in map_rows) == wanted
    assert (
        "must be a whole number" in client.get(reverse("inventory:node-list"), {"min_free_gpus": "x"}).content.decode()
    )
    # API aggregates
    agg = client.get("/api/v1/aggregates/gpus").json()
    assert {k: agg["kinds"][k] for k in ("gpus", "gpus_free", "partitions", "other")} == {
        k: totals[k] for k in ("gpus", "gpus_free", "partitions", "other")
    }
    assert agg["sources"]["dra"]["models"][H100]["gpus"] == sum(
        n for (_node, m), n in want["gpus"].items() if m == H100
    )
    by_kind = {
        r["kind"]: r["count"] for r in client.get("/api/v1/aggregates/devices", {"group_by": "kind"}).json()["results"]
    }
    assert by_kind == {"gpu": 48, "partition": totals["partitions"], "other": totals["other"]}
    nodes = {
        r["name"]: (r["gpus"], r["free_gpus"])
        for r in client.get("/api/v1/nodes/", {"page_size": 100}).json()["results"]
    }
    assert {n: v for n, v in nodes.items() if v[0]} == {n: (gpus[n], free[n]) for n in gpus}


def test_a_driver_outage_keeps_the_node_and_says_so(demo, client):
    cluster, objects = demo
    slices = [s for s in objects["resourceslices"] if s["spec"]["nodeName"] == "gpu-a100-01"]
    devices = sum(len(s["spec"].get("devices", [])) for s in slices)
    before = fleet.FleetSnapshot([cluster.id]).kind_totals()
    for s in slices:  # the kubelet plugin stopped: its slices are deleted
        delete_object(cluster, "ResourceSlice", dict(s, metadata=dict(s["metadata"], resourceVersion="99999")))
    snap = fleet.FleetSnapshot([cluster.id])
    assert snap.kind_totals()["gpus"] == before["gpus"] - 4
    gone = snap.unpublished()
    assert gone["devices"] == devices and list(gone["rows"]) == [(cluster.id, "gpu-a100-01")]
    rows = {r["node"]: r for r in fleet.FleetMap(snap).decide(list(fleet.FleetMap(snap).rows))}
    assert rows["gpu-a100-01"]["unpublished"] == devices and not rows["gpu-a100-01"]["devices"]
    client.force_login(make_user("viewer-o", "viewer"))
    body = client.get(reverse("inventory:fleet-map")).content.decode()
    assert body.count('class="cell unpublished"') == devices and "driver not publishing since" in body
    assert (
        f'data-kind="unpublished" data-count="{devices}"' in client.get(reverse("inventory:overview")).content.decode()
    )
    assert (
        "Driver not publishing since"
        in client.get(reverse("inventory:node-detail", args=["demo", "gpu-a100-01"])).content.decode()
    )
    assert [r["node"] for r in client.get("/api/v1/aggregates/gpus").json()["unpublished"]["nodes"]] == ["gpu-a100-01"]
    # the driver publishes again: back to normal, nothing "not published"
    for s in slices:
        apply_object(cluster, "ResourceSlice", dict(s, metadata=dict(s["metadata"], resourceVersion="100000")))
    snap = fleet.FleetSnapshot([cluster.id])
    assert snap.kind_totals()["gpus"] == before["gpus"] and snap.unpublished()["devices"] == 0
    assert not NodeDeviceSummary.objects.filter(n_unpublished__gt=0).exists()
    # a deleted node is gone, not in an outage
    for s in [s for s in objects["resourceslices"] if s["spec"]["nodeName"] == "gpu-l4-01"]:
        delete_object(cluster, "ResourceSlice", dict(s, metadata=dict(s["metadata"], resourceVersion="100001")))
    node = next(n for n in objects["nodes"] if n["metadata"]["name"] == "gpu-l4-01")
    delete_object(cluster, "Node", dict(node, metadata=dict(node["metadata"], resourceVersion="100002")))
    snap = fleet.FleetSnapshot([cluster.id])
    assert snap.unpublished()["devices"] == 0 and "gpu-l4-01" not in {r["map_key"] for r in fleet.FleetMap(snap).rows}
    assert Device.objects.filter(cluster=cluster, node_name="gpu-l4-01").count() == 0
