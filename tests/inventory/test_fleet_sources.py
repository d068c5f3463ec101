"""Three sources side by side (issue 14): DRA devices, device-plugin GPUs, HAMi vGPU shares, on the
devcluster "mixed" scenario (DRA only, device plugin only, both, HAMi), written through the watchers'
apply path. Expected totals are computed here from the scenario's objects."""

from collections import Counter, defaultdict

import pytest

from devcluster.scenario import scenario_objects
from inventory import accelerators, fleet
from inventory.models import NodeAccelerator
from mirror.models import Cluster
from mirror.sync.apply import apply_object, delete_object
from tests.fleet_data import load_scenario

pytestmark = pytest.mark.django_db


def qty(v):
    return int(str(v))


def hami_assigned(pod):
    """[(MiB, cores)] per vGPU from HAMi's allocation annotation ("UUID,TYPE,MEM,CORES:", ";" per
    container); None without one that can be read."""
    value = (pod["metadata"].get("annotations") or {}).get("hami.io/vgpu-devices-allocated")
    try:
        return (
            [(int(r.split(",")[2]), int(r.split(",")[3])) for chunk in value.split(";") for r in chunk.split(":") if r]
            if value
            else None
        )
    except (ValueError, IndexError):
        return None


def expected(objects):
    """Per source, from the raw Nodes and Pods: what the nodes offer and bound, running pods request
    (on a HAMi node: what HAMi assigned them, where it says so readably)."""
    requested = defaultdict(Counter)
    for pod in objects["pods"]:
        if pod["spec"].get("nodeName") and pod["status"]["phase"] not in ("Succeeded", "Failed"):
            assigned = hami_assigned(pod)
            if assigned is not None:
                node = pod["spec"]["nodeName"]
                requested[node]["nvidia.com/gpu"] += len(assigned)
                requested[node]["nvidia.com/gpumem"] += sum(m for m, _c in assigned)
                continue
            for c in pod["spec"]["containers"]:
                for name, v in (c.get("resources", {}).get("limits") or {}).items():
                    requested[pod["spec"]["nodeName"]][name] += qty(v)
    dp = {"gpus": 0, "free": 0, "partitions": 0, "nodes": set()}
    hami = {"gpus": 0, "shares": 0, "shares_used": 0, "memory": 0, "memory_used": 0, "nodes": set()}
    dra = {"gpus": 0, "partitions": 0, "nodes": set()}
    import json

    for node in objects["nodes"]:
        name, alloc = node["metadata"]["name"], node["status"]["allocatable"]
        register = (node["metadata"].get("annotations") or {}).get("hami.io/node-nvidia-register")
        if register:
            devices = json.loads(register)
            hami["gpus"] += len(devices)
            hami["shares"] += sum(d["count"] for d in devices)
            hami["shares_used"] += requested[name]["nvidia.com/gpu"]
            hami["memory"] += sum(d["devmem"] for d in devices)
            hami["memory_used"] += requested[name]["nvidia.com/gpumem"]
            hami["nodes"].add(name)
            continue
        for res, v in alloc.items():
            if res == "nvidia.com/gpu":
                dp["gpus"] += qty(v)
                dp["free"] += qty(v) - requested[name][res]
                dp["nodes"].add(name)
            elif res.startswith("nvidia.com/mig-"):
                dp["partitions"] += qty(v)
                dp["nodes"].add(name)
    parents = set()
    for s in objects["resourceslices"]:
        for d in s["spec"].get("devices", []):
            t = d["attributes"]["type"]["string"]
            if t == "gpu":
                parents.add((s["spec"]["nodeName"], d["attributes"]["uuid"]["string"]))
            elif t == "mig":
                dra["partitions"] += 1
            dra["nodes"].add(s["spec"]["nodeName"])
    dra["gpus"] = len(parents)
    return dra, dp, hami


@pytest.fixture
def mixed():
    cluster = load_scenario(Cluster.objects.create(name="mixed"), "mixed")
    return cluster, scenario_objects("mixed")


@pytest.mark.sqlite_default  # the embedded default counts the same
def test_totals_per_source_equal_the_objects(mixed):
    cluster, objects = mixed
    dra, dp, hami = expected(objects)
    got = fleet.source_totals([cluster.id])
    assert (got["dra"]["gpus"], got["dra"]["partitions"], got["dra"]["nodes"]) == (
        dra["gpus"],
        dra["partitions"],
        len(dra["nodes"]),
    )
    assert (
        got["device-plugin"]["gpus"],
        got["device-plugin"]["free"],
        got["device-plugin"]["partitions"],
        got["device-plugin"]["nodes"],
    ) == (dp["gpus"], dp["free"], dp["partitions"], len(dp["nodes"]))
    assert {k: got["hami"][k] for k in ("gpus", "shares", "shares_used", "memory", "memory_used")} == {
        k: v for k, v in hami.items() if k != "nodes"
    }
    assert got["hami"]["nodes"] == len(hami["nodes"])
    # never adding partitions (DRA MIG devices, nvidia.com/mig-* resources) or vGPU slots to whole GPUs
    assert got["device-plugin"]["models"]["NVIDIA A100 80GB PCIe"]["gpus"] == 0
    assert sum(m["gpus"] for m in got["dra"]["models"].values()) == dra["gpus"]


def test_sources_follow_node_and_pod_changes(mixed):
    cluster, objects = mixed
    node = next(n for n in objects["nodes"] if n["metadata"]["name"] == "dp-only-01")
    pod = next(p for p in objects["pods"] if p["metadata"]["name"] == "dp-job-0")
    delete_object(cluster, "Pod", dict(pod, metadata=dict(pod["metadata"], resourceVersion="999999")))
    assert fleet.source_totals([cluster.id])["device-plugin"]["free"] == expected(objects)[1]["free"] + 2
    node = dict(
        node,
        metadata=dict(node["metadata"], resourceVersion="999999"),
        status=dict(
            node["status"],
            allocatable={k: v for k, v in node["status"]["allocatable"].items() if k != "nvidia.com/gpu"},
        ),
    )
    apply_object(cluster, "Node", node)
    # the device plugin is gone: no GPUs offered, the pod still bound there keeps asking for one
    assert list(
        NodeAccelerator.objects.filter(cluster=cluster, node_name="dp-only-01").values_list(
            "resource", "allocatable", "requested"
        )
    ) == [("nvidia.com/gpu", 0, 1)]
    assert fleet.source_totals([cluster.id])["device-plugin"]["gpus"] == expected(objects)[1]["gpus"] - 8
    delete_object(cluster, "Node", next(n for n in objects["nodes"] if n["metadata"]["name"] == "hami-01") | {})
    assert fleet.source_totals([cluster.id])["hami"]["gpus"] == 0


def test_hami_register_both_formats():
    new = accelerators.hami_devices(
        '[{"id":"GPU-a","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","health":true},{"id":"GPU-b","index":1,"count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3"}]'
    )
    old = accelerators.hami_devices(
        "GPU-00552014-x,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-2,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,false,1,hami-core:"
    )
    assert [(d["id"], d["count"], d["devmem"], d["health"]) for d in new] == [
        ("GPU-a", 10, 81559, True),
        ("GPU-b", 10, 81559, False),
    ]
    assert [(d["id"], d["type"], d["health"]) for d in old] == [
        ("GPU-00552014-x", "NVIDIA-Tesla V100-PCIE-32GB", True),
        ("GPU-2", "NVIDIA-Tesla V100-PCIE-32GB", False),
    ]
    assert accelerators.hami_devices("not json [") == [] and accelerators.hami_devices("[1, {}]") == []


def test_the_demo_shows_every_source():
    """`manage.py demo` serves demo-mixed: demo.yaml plus device-plugin and HAMi nodes (an include)."""
    demo, mixed = scenario_objects("demo"), scenario_objects("demo-mixed")
    assert {n["metadata"]["name"] for n in demo["nodes"]} < {n["metadata"]["name"] for n in mixed["nodes"]}
    cluster = load_scenario(Cluster.objects.create(name="demo-mixed"), "demo-mixed")
    got = fleet.source_totals([cluster.id])
    dra, dp, hami = expected(mixed)
    assert (
        (
            got["dra"]["gpus"],
            got["device-plugin"]["gpus"],
            got["device-plugin"]["partitions"],
            got["hami"]["gpus"],
            got["hami"]["shares_used"],
        )
        == (dra["gpus"], dp["gpus"], dp["partitions"], hami["gpus"], hami["shares_used"])
        == (48, 8, 7, 4, 2)
    )
