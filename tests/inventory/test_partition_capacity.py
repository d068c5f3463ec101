"""Partition-aware capacity on the loaded demo fleet (partitionable MIG A100s, some placements held):
the stored summary, the overview, the fleet map, the nodes list, the node page, the pools page and the
API say per profile how many more partitions can be created, against an exhaustive count done here
from the scenario's raw slices and claims (every subset of each GPU's placements), and by hand for
one node."""

import itertools
import re
from collections import Counter, defaultdict

import pytest
from django.urls import reverse

from devcluster.scenario import scenario_objects
from dra.quantity import parse_quantity
from inventory import fleet
from inventory.models import NodeDeviceSummary
from mirror.models import Cluster
from mirror.sync.apply import apply_object
from tests.fleet_data import load_scenario, make_user, meta

pytestmark = pytest.mark.django_db


def _amounts(counters):
    return {name: parse_quantity(v["value"]) for name, v in counters.items()}


def expected(objects):
    """{node: ({profile: creatable now}, stranded GPUs)} by brute force over each counter set."""
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
    totals, devices = {}, defaultdict(list)  # (node, set) -> counters; (node, set) -> [(name, profile, need)]
    for s in objects["resourceslices"]:
        spec = s["spec"]
        node = spec["nodeName"]
        for cs in spec.get("sharedCounters", []):
            totals[(node, cs["name"])] = _amounts(cs["counters"])
        for dev in spec.get("devices", []):
            for use in dev.get("consumesCounters", []):
                key = (spec["driver"], spec["pool"]["name"], dev["name"])
                profile = dev["attributes"].get("profile", {}).get("string")
                blocked = any(t["effect"] in ("NoSchedule", "NoExecute") for t in dev.get("taints", []))
                devices[(node, use["counterSet"])].append((key in held, blocked, profile, _amounts(use["counters"])))
    out = defaultdict(lambda: (Counter(), [0]))
    for (node, cset), devs in devices.items():
        left = dict(totals[(node, cset)])
        for is_held, _blocked, _profile, need in devs:
            if is_held:
                for k, v in need.items():
                    left[k] -= v
        profiles, stranded = out[node]
        creatable_any = False
        for profile in {p for _h, _b, p, _n in devs if p}:
            options = [n for h, b, p, n in devs if p == profile and not h and not b]
            best = 0
            for size in range(len(options), 0, -1):
                if any(
                    all(sum(n.get(k, 0) for n in combo) <= left[k] for k in left)
                    for combo in itertools.combinations(options, size)
                ):
                    best = size
                    break
            profiles[profile] += best if node in ready else 0
            creatable_any = creatable_any or best > 0
        whole_used = any(h for h, _b, p, _n in devs if p)  # a partition of this GPU is held
        whole_held = any(h for h, _b, p, _n in devs if not p)
        if whole_used and not whole_held and creatable_any and node in ready:
            stranded[0] += 1
    return {node: (dict(p), s[0]) for node, (p, s) in out.items()}


@pytest.fixture
def demo():
    return load_scenario(Cluster.objects.create(name="demo")), scenario_objects("demo")


def _node_figures(snap):
    return {
        node: ({p: c["free"] for p, c in cap["profiles"].items()}, cap["stranded"])
        for (_cid, node), cap in snap.partition_capacity("cluster_id", "node_name").items()
    }


@pytest.mark.sqlite_default
def test_demo_fleet_counts_what_can_be_created(demo, client):
    cluster, objects = demo
    want = expected(objects)
    snap = fleet.FleetSnapshot([cluster.id])
    assert _node_figures(snap) == want
    # By hand, gpu-a100-01 (4 x A100 80GB, profiles 1g.10gb x7, 2g.20gb at 0/2/4, 3g.40gb at 0/4, 7g.80gb):
    # gpu-0 holds 1g.10gb at slices 0 and 1 (28 of 98 SMs): 5 x 1g, 2 x 2g (at 2, 4), 1 x 3g (at 4), no 7g;
    # the other three GPUs 7, 3, 2, 1 each. The 52 published placements (50 of them "free") give at most
    # 26 x 1g.10gb, or 11 x 2g.20gb, or 7 x 3g.40gb, or 3 x 7g.80gb; gpu-0 is stranded.
    held = {
        r["device"]
        for c in objects["resourceclaims"]
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if r["pool"] == "gpu-a100-01"
    }
    assert held == {"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1"}
    assert want["gpu-a100-01"] == ({"1g.10gb": 26, "2g.20gb": 11, "3g.40gb": 7, "7g.80gb": 3}, 1)
    kinds = snap.kind_totals()
    sums = Counter()
    for profiles, _s in want.values():
        sums.update(profiles)
    assert {p: c["free"] for p, c in kinds["partition_profiles"].items()} == dict(sums)
    assert kinds["gpus_stranded"] == sum(s for _p, s in want.values()) > 0
    # With nothing allocated: 4 GPUs x (7, 3, 2, 1) per A100 node.
    a100_nodes = sum(1 for n in want)
    assert {p: c["total"] for p, c in kinds["partition_profiles"].items()} == {
        "1g.10gb": 28 * a100_nodes,
        "2g.20gb": 12 * a100_nodes,
        "3g.40gb": 8 * a100_nodes,
        "7g.80gb": 4 * a100_nodes,
    }

    client.force_login(make_user("viewer-p", "viewer"))
    overview = client.get(reverse("inventory:overview")).content.decode()
    shown = dict(re.findall(r'data-profile="([^"]+)" data-free="(\d+)" data-total="\d+"', overview))
    assert {p: int(n) for p, n in shown.items()} == dict(sums)
    assert f'data-kind="gpus_stranded" data-count="{kinds["gpus_stranded"]}"' in overview
    assert "Partitions that can still be created" in overview and "overlapping: not a capacity" in overview

    fleet_map = client.get(reverse("inventory:fleet-map")).content.decode()
    assert 'id="map-partition-capacity"' in fleet_map
    assert f'data-profile="1g.10gb" data-free="{sums["1g.10gb"]}"' in fleet_map
    map_row = re.search(r'<div class="maprow[^"]*" id="maprow-demo-gpu-a100-02".*?</div>', fleet_map, re.S).group(0)
    assert dict(re.findall(r'data-profile="([^"]+)" data-free="(\d+)"', map_row)) == {
        p: str(n) for p, n in want["gpu-a100-02"][0].items()
    }
    assert f'data-stranded="{want["gpu-a100-02"][1]}"' in map_row and "GPUs stranded" in map_row

    nodes_page = client.get(reverse("inventory:node-list")).content.decode()
    row = re.search(r'<tr id="node-demo-gpu-a100-01">.*?</tr>', nodes_page, re.S).group(0)
    assert dict(re.findall(r'data-profile="([^"]+)" data-free="(\d+)"', row)) == {
        p: str(n) for p, n in want["gpu-a100-01"][0].items()
    }
    assert 'data-stranded="1"' in row

    node_page = client.get(reverse("inventory:node-detail", args=["demo", "gpu-a100-01"])).content.decode()
    part = re.search(r'<span id="node-partition-capacity">.*?</span></span>', node_page, re.S).group(0)
    assert 'data-profile="3g.40gb" data-free="7" data-total="8"' in part
    assert "1 GPU stranded" in part

    pools_page = client.get(reverse("inventory:pool-list")).content.decode()
    assert 'data-profile="2g.20gb" data-free="11"' in pools_page

    agg = client.get("/api/v1/aggregates/gpus").json()
    assert agg["kinds"]["partition_profiles"] == kinds["partition_profiles"]
    assert agg["kinds"]["gpus_stranded"] == kinds["gpus_stranded"]
    by_node = {r["node"]: r for r in agg["partitions_by_node"]}
    assert {n: ({p: c["free"] for p, c in r["profiles"].items()}, r["stranded"]) for n, r in by_node.items()} == want
    api_nodes = {r["name"]: r for r in client.get("/api/v1/nodes/", {"page_size": 100}).json()["results"]}
    assert api_nodes["gpu-a100-01"]["partitions"]["profiles"]["1g.10gb"] == {"free": 26, "total": 28}
    assert all(r["partitions"] is None for n, r in api_nodes.items() if n not in want)
    one = client.get(f"/api/v1/nodes/{api_nodes['gpu-a100-01']['id']}/").json()
    assert one["partitions"]["stranded"] == 1


def test_figures_follow_allocations_and_readiness(demo, client):
    cluster, objects = demo
    snap = fleet.FleetSnapshot([cluster.id])
    before = _node_figures(snap)["gpu-a100-01"]
    # A 3g.40gb at 4 on gpu-1 (slices 4-7, 42 SMs): gpu-1 keeps 4 x 1g, 2 x 2g, 1 x 3g, no 7g.
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta("extra-mig", "default"),
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "mig",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-a100-01",
                            "device": "gpu-1-mig-3g40gb-9-4",
                        }
                    ]
                }
            }
        },
    }
    apply_object(cluster, "ResourceClaim", claim)
    after = _node_figures(fleet.FleetSnapshot([cluster.id]))["gpu-a100-01"]
    assert after[0] == {
        "1g.10gb": before[0]["1g.10gb"] - 3,
        "2g.20gb": before[0]["2g.20gb"] - 1,
        "3g.40gb": before[0]["3g.40gb"] - 1,
        "7g.80gb": before[0]["7g.80gb"] - 1,
    }
    assert after[1] == before[1] + 1
    row = NodeDeviceSummary.objects.get(cluster=cluster, node_name="gpu-a100-01", kind="partition")
    assert row.partition_free["3g.40gb"] == [after[0]["3g.40gb"], 8]

    node = next(n for n in objects["nodes"] if n["metadata"]["name"] == "gpu-a100-01")
    node = {**node, "metadata": {**node["metadata"], "resourceVersion": "999999"}}
    node["status"] = {
        **node["status"],
        "conditions": [{**c, "status": "False"} if c["type"] == "Ready" else c for c in node["status"]["conditions"]],
    }
    apply_object(cluster, "Node", node)
    cap = fleet.FleetSnapshot([cluster.id]).partition_capacity("cluster_id", "node_name")[(cluster.id, "gpu-a100-01")]
    assert all(c["free"] == 0 for c in cap["profiles"].values()) and cap["stranded"] == 0
    assert cap["profiles"]["1g.10gb"]["total"] == 28


def test_history_keeps_the_smallest_profile_and_stranded_gpus(demo, client):
    from monitoring import history

    cluster, objects = demo
    want = expected(objects)
    history.sample()
    client.force_login(make_user("viewer-h", "viewer"))
    body = client.get(
        "/api/v1/history/devices", {"series": "partition_slots_free,partition_slots,gpus_stranded", "hours": 1}
    ).json()
    last = {s["name"]: [v for v in s["values"] if v is not None][-1] for s in body["series"]}
    # The A100s' smallest profile is 1g.10gb (7 placements per GPU): its free counts add up across nodes.
    assert last == {
        "partition_slots_free": sum(p["1g.10gb"] for p, _s in want.values()),
        "partition_slots": 28 * len(want),
        "gpus_stranded": sum(s for _p, s in want.values()),
    }
    overview = client.get(reverse("inventory:overview")).content.decode()
    assert "series=partition_slots_free%2Cgpus_stranded" in overview or "partition_slots_free,gpus_stranded" in overview
