"""Previews give the kube-scheduler's verdict: node filters before DRA in every preview and headroom,
the "0/N nodes are available" message, the demo scenario, and a property: no node a filter rejects
ever fits or counts in headroom. Pure engine (no database)."""

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcluster.scenario import scenario_objects
from dra import Inventory, headroom, load_documents, preview, resolve_claims
from dra.nodefilters import scheduling_pod

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
        "extendedResourceName": "example.com/gpu",
    },
}


def node(name, labels=None, taints=(), cordoned=False, cpu="4", memory="16Gi", pods="110", extra=None):
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": list(taints)},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}},
    }
    if cordoned:
        raw["spec"]["unschedulable"] = True
    return raw


def gpus(node_name, count=2):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(count)],
        },
    }


def bound_pod(name, node_name, cpu="0", memory="0", phase="Running", ports=()):
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "busy"},
        "spec": {"nodeName": node_name, "containers": [container]},
        "status": {"phase": phase},
    }


def pod_yaml(extra_spec="", requests="cpu: 500m\n          memory: 1Gi"):
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: trainer, namespace: ml}}
spec:
{extra_spec}
  containers:
  - name: main
    resources:
      requests:
          {requests}
          example.com/gpu: "1"
"""


def run(objects, text, **kw):
    inv = Inventory.from_objects(objects)
    docs = load_documents(text)
    claims, bound = resolve_claims(inv, docs)
    pod = scheduling_pod(docs, **kw)
    return inv, claims, pod, preview(inv, claims, bound=bound, pod=pod)


def worked_example():
    """scheduler-filters.md 4.1: five nodes, a pod with nodeSelector disk=ssd, 500m cpu and 1Gi."""
    nodes = [
        node("a", {"disk": "ssd"}, cordoned=True),
        node("b", {"disk": "ssd"}, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node("c", {}),
        node("d", {"disk": "ssd"}, cpu="1", memory="2Gi"),
        node("e", {"disk": "ssd"}, cpu="1", memory="4Gi"),
    ]
    pods = [
        bound_pod("d-load", "d", cpu="800m", memory="1948Mi"),
        bound_pod("e-load", "e", cpu="800m", memory="1Gi"),
        bound_pod("e-done", "e", cpu="1", memory="3Gi", phase="Succeeded"),
    ]  # a finished pod takes nothing
    return {
        "nodes": nodes,
        "resourceslices": [gpus(n["metadata"]["name"]) for n in nodes],
        "deviceclasses": [GPU_CLASS],
        "pods": pods,
    }


def test_the_worked_example_gives_the_schedulers_message():
    _, _, _, out = run(worked_example(), pod_yaml("  nodeSelector: {disk: ssd}"))
    summary = out["summary"]
    assert summary["fits"] == 0 and summary["filtered"] == 5
    assert summary["schedulerMessage"] == (
        "0/5 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu. "
        # The PostFilters: DynamicResources has no claim to deallocate; DefaultPreemption tries d and e
        # (rejected for resources: resolvable), but their pods have the pod's own priority (0), so there
        # is nobody to evict; the other three are not tried.
        "still not schedulable, preemption: 0/5 nodes are available: 2 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    d = next(e for e in out["nodes"] if e["node"] == "d")
    assert d["filters"][-1] == {
        "plugin": "NodeResourcesFit",
        "passed": False,
        "reason": "Insufficient cpu, Insufficient memory",
        "reasons": ["Insufficient cpu", "Insufficient memory"],
    }
    assert [f["plugin"] for f in d["filters"]] == [
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
    ]
    rejections = {r["plugin"]: r["exampleNodes"] for r in summary["nodeFilters"]["rejections"]}
    assert rejections == {
        "NodeUnschedulable": ["a"],
        "TaintToleration": ["b"],
        "NodeAffinity": ["c"],
        "NodeResourcesFit": ["d", "e"],
    }


def test_the_pods_tolerations_and_a_smaller_request_change_the_verdict():
    spec = "  nodeSelector: {disk: ssd}\n  tolerations: [{key: dedicated, operator: Exists}, {key: node.kubernetes.io/unschedulable, operator: Exists}]"
    inv, claims, pod, out = run(worked_example(), pod_yaml(spec, requests="cpu: 100m\n          memory: 100Mi"))
    fits = sorted(e["node"] for e in out["nodes"] if e["fits"])
    assert fits == ["a", "b", "d", "e"]
    room = headroom(inv, claims, pod=pod)
    # Each copy takes one of a node's two GPUs, 100m and 100Mi: d has 200m/100Mi left, so cpu is not the limit but memory is.
    assert room["byNode"] == {"a": 2, "b": 2, "d": 1, "e": 2} and room["filteredNodes"] == 1


def test_reasons_sort_as_strings_like_go():
    nodes = [node(f"n{i:02d}", cordoned=i < 10) for i in range(12)]
    objects = {
        "nodes": nodes,
        "resourceslices": [gpus(n["metadata"]["name"], 0) for n in nodes],
        "deviceclasses": [GPU_CLASS],
    }
    _, _, _, out = run(objects, pod_yaml())
    assert out["summary"]["schedulerMessage"] == (
        "0/12 nodes are available: 10 node(s) were unschedulable, 2 cannot allocate all claims. "
        "still not schedulable, preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling."
    )


def test_ports_and_pod_count():
    objects = {
        "nodes": [node("p1"), node("p2", pods="1")],
        "resourceslices": [gpus("p1"), gpus("p2")],
        "deviceclasses": [GPU_CLASS],
        "pods": [bound_pod("web", "p1", ports=[8080]), bound_pod("other", "p2")],
    }
    spec = "  hostNetwork: false"
    text = pod_yaml(spec).replace(
        "  - name: main\n", "  - name: main\n    ports: [{containerPort: 8080, hostPort: 8080}]\n"
    )
    _, _, _, out = run(objects, text)
    reasons = {e["node"]: e["reason"] for e in out["nodes"]}
    assert reasons == {
        "p1": "NodePorts: node(s) didn't have free ports for the requested pod ports",
        "p2": "NodeResourcesFit: Too many pods",
    }


def test_a_device_plugin_resource_is_checked_by_noderesourcesfit_and_left_out_of_the_dra_claim():
    """KEP 5004: where the node's allocatable has the extended resource, the device plugin serves it."""
    objects = {
        "nodes": [
            node("dra"),
            node("plugin", extra={"example.com/gpu": "4"}),
            node("plugin-full", extra={"example.com/gpu": "1"}),
        ],
        "resourceslices": [gpus("dra")],
        "deviceclasses": [GPU_CLASS],
        "pods": [bound_pod("user", "plugin-full")],
    }
    objects["pods"][0]["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    inv, claims, pod, out = run(objects, pod_yaml())
    by_node = {e["node"]: e for e in out["nodes"]}
    assert by_node["dra"]["fits"] and by_node["dra"]["results"][0]["device"] == "gpu-0"
    assert by_node["plugin"]["fits"] and by_node["plugin"]["results"] == []  # nothing for DRA to allocate there
    assert by_node["plugin-full"]["reason"] == "NodeResourcesFit: Insufficient example.com/gpu"
    assert headroom(inv, claims, pod=pod)["byNode"] == {"dra": 2, "plugin": 4}


def test_bare_claims_get_a_would_be_pod_and_the_filters_can_be_given_or_turned_off():
    objects = worked_example()
    objects["pods"] = []
    claim = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml}\nspec:\n  devices:\n    requests:\n"
        "    - name: gpu\n      exactly: {deviceClassName: gpu.example.com}\n"
    )
    _, _, _, out = run(objects, claim)
    assert sorted(e["node"] for e in out["nodes"] if e["fits"]) == ["c", "d", "e"]  # cordoned a, tainted b out
    _, _, _, out = run(
        objects, claim, tolerations=[{"key": "dedicated", "operator": "Exists"}], node_selector="disk=ssd"
    )
    assert sorted(e["node"] for e in out["nodes"] if e["fits"]) == ["b", "d", "e"]
    inv = Inventory.from_objects(objects)
    claims, _ = resolve_claims(inv, load_documents(claim))
    unfiltered = preview(inv, claims, node_filters=False)
    assert unfiltered["summary"]["fits"] == 5 and unfiltered["summary"]["nodeFilters"] == {"enabled": False}
    assert (
        headroom(inv, claims)["filteredNodes"] == 2 and headroom(inv, claims, node_filters=False)["filteredNodes"] == 0
    )


def test_unsimulated_filters_are_named_on_fitting_nodes():
    spec = "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]"
    _, _, _, out = run(worked_example(), pod_yaml(spec, requests="cpu: 1m"))
    e = next(e for e in out["nodes"] if e["fits"])
    assert {"plugin": "PodTopologySpread", "passed": None} == {k: e["filters"][-2][k] for k in ("plugin", "passed")}
    assert e["filters"][-1]["plugin"] == "DynamicResources"
    assert out["summary"]["nodeFilters"]["notSimulated"][0]["plugin"] == "PodTopologySpread"


def test_node_affinity_prefilter_cuts_to_the_named_nodes():
    """scheduler-filters.md 3: matchFields metadata.name In [d] on five nodes, d short of cpu and memory."""
    spec = (
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n"
        "        - matchFields: [{key: metadata.name, operator: In, values: [d]}]"
    )
    _, _, _, out = run(worked_example(), pod_yaml(spec))
    assert out["summary"]["schedulerMessage"] == (
        "0/5 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 4 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "still not schedulable, preemption: 0/5 nodes are available: 1 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling."
    )
    assert next(e for e in out["nodes"] if e["node"] == "a")["filters"] == [
        {
            "plugin": "NodeAffinity",
            "passed": False,
            "reason": "node(s) didn't satisfy plugin(s) [NodeAffinity]",
            "reasons": ["node(s) didn't satisfy plugin(s) [NodeAffinity]"],
        }
    ]  # cordoned, but never filtered
    conflict = spec.replace(
        "[{key: metadata.name, operator: In, values: [d]}]",
        "[{key: metadata.name, operator: In, values: [d]}, {key: metadata.name, operator: In, values: [e]}]",
    )
    _, _, _, out = run(worked_example(), pod_yaml(conflict))
    # DynamicResources' PostFilter finds no state (its PreFilter never ran) and its error ends the PostFilters.
    assert out["summary"]["schedulerMessage"] == "0/5 nodes are available: pod affinity terms conflict. not found"
    assert out["summary"]["postFilter"]["message"] == "not found" and out["summary"]["postFilter"]["preemption"] is None
    assert out["summary"]["fits"] == 0


# --- the demo scenario -------------------------------------------------------------------------

DEMO_POD = """
apiVersion: v1
kind: Pod
metadata: {name: one-gpu, namespace: ml-training}
spec:
  containers:
  - name: main
    resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}}
"""


def demo_objects():
    objects = copy.deepcopy(scenario_objects("demo"))
    for n in objects["nodes"]:  # a GPU pool taint as real clusters carry it
        if n["metadata"]["name"] == "gpu-l4-02":
            n["spec"].setdefault("taints", []).append(
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
            )
    return objects


def test_demo_pod_preview_never_fits_notready_cordoned_or_tainted_nodes():
    inv, claims, pod, out = run(demo_objects(), DEMO_POD)
    entries = {e["node"]: e for e in out["nodes"]}
    assert (
        entries["gpu-h100-04"]["reason"] == "TaintToleration: node(s) had untolerated taint(s)"
    )  # NotReady: unreachable taints
    assert entries["gpu-l4-03"]["reason"] == "NodeUnschedulable: node(s) were unschedulable"  # cordoned
    assert entries["gpu-l4-02"]["reason"] == "TaintToleration: node(s) had untolerated taint(s)"
    fits = {n for n, e in entries.items() if e["fits"]}
    assert fits and not fits & {"gpu-h100-04", "gpu-l4-03", "gpu-l4-02"}
    room = headroom(inv, claims, pod=pod)
    assert room["copies"] > 0 and not set(room["byNode"]) & {"gpu-h100-04", "gpu-l4-03", "gpu-l4-02"}
    # The same pod tolerating the GPU taint may use gpu-l4-02 again; NotReady stays out (its NoSchedule twin).
    tolerant = DEMO_POD.replace("spec:\n", "spec:\n  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n")
    _, _, _, out = run(demo_objects(), tolerant)
    assert {e["node"]: e["fits"] for e in out["nodes"]}["gpu-l4-02"] is True
    assert {e["node"]: e["fits"] for e in out["nodes"]}["gpu-h100-04"] is False


def test_demo_bare_claim_no_longer_fits_the_notready_node():
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: two, namespace: ml-training}\nspec:\n  devices:\n"
        "    requests:\n    - name: gpu\n      exactly: {deviceClassName: h100.nvidia.com, count: 2, selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')\"}}]}\n"
    )
    inv, claims, _, out = run(demo_objects(), text)
    assert not next(e for e in out["nodes"] if e["node"] == "gpu-h100-04")["fits"]
    assert "gpu-h100-04" not in headroom(inv, claims)["byNode"]
    assert next(e for e in preview(inv, claims, node_filters=False)["nodes"] if e["node"] == "gpu-h100-04")[
        "fits"
    ]  # devices alone: yes


# --- property: a node a filter rejects never fits nor counts in headroom --------------------------

TAINTS = st.sampled_from(
    [
        {"key": "dedicated", "value": "a", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "b", "effect": "NoExecute"},
        {"key": "gpu", "effect": "PreferNoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
)
TOLERATIONS = st.sampled_from(
    [
        {"key": "dedicated", "operator": "Exists"},
        {"key": "dedicated", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
    ]
)


@st.composite
def fleets(draw):
    n = draw(st.integers(1, 6))
    nodes, slices, pods = [], [], []
    for i in range(n):
        name = f"n{i}"
        nodes.append(
            node(
                name,
                {"pool": draw(st.sampled_from(["a", "b"]))},
                taints=draw(st.lists(TAINTS, max_size=2)),
                cordoned=draw(st.booleans()),
                cpu=str(draw(st.integers(0, 4))),
                pods=str(draw(st.integers(0, 3))),
            )
        )
        slices.append(gpus(name, draw(st.integers(0, 3))))
        for j in range(draw(st.integers(0, 2))):
            pods.append(
                bound_pod(
                    f"{name}-p{j}", name, cpu=f"{draw(st.integers(0, 3000))}m", ports=draw(st.sampled_from([(), (80,)]))
                )
            )
    tolerations = draw(st.lists(TOLERATIONS, max_size=2))
    selector = draw(st.sampled_from([None, {"pool": "a"}]))
    cpu = draw(st.sampled_from(["0", "500m", "2"]))
    port = draw(st.booleans())
    return (
        {"nodes": nodes, "resourceslices": slices, "deviceclasses": [GPU_CLASS], "pods": pods},
        tolerations,
        selector,
        cpu,
        port,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_no_node_a_filter_rejects_ever_fits_or_counts_in_headroom(case):
    objects, tolerations, selector, cpu, port = case
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "example.com/gpu": "1"}}}],
        "tolerations": tolerations,
    }
    if selector:
        spec["nodeSelector"] = selector
    if port:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    raw_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    inv = Inventory.from_objects(objects)
    claims, bound = resolve_claims(inv, [raw_pod])
    pod = scheduling_pod([raw_pod])
    out = preview(inv, claims, bound=bound, pod=pod)
    rejected = {
        e["node"]
        for e in out["nodes"]
        if any(f["passed"] is False and f["plugin"] != "DynamicResources" for f in e["filters"])
    }
    assert not rejected & {e["node"] for e in out["nodes"] if e["fits"]}
    assert out["summary"]["filtered"] == len(rejected)
    room = headroom(inv, claims, pod=pod)
    assert not rejected & set(room["byNode"])
    # Every copy headroom places must still pass the filters with the copies before it: never more than the pod count allows.
    for name, copies in room["byNode"].items():
        facts, usage = inv.node_facts[name], inv.usage_of(name)
        assert usage.pods + copies <= facts.allocatable["pods"]
        if port:
            assert copies == 1


def test_repeated_filter_verdicts_are_one_shared_entry_that_nothing_changes():
    """A fleet preview's per-node filter entries repeat a few verdicts: each distinct verdict is one dict
    (nodefilters.filter_entry), and a second preview, the summary and the page report leave them as
    they were (they are shared by every later preview too)."""
    from dra.nodefilters import _FILTER_ENTRIES
    from ops.preview_page import PreviewReport

    objects = worked_example()
    objects["nodes"] += [node(f"ok-{i}", {"disk": "ssd"}) for i in range(6)]
    objects["resourceslices"] += [gpus(f"ok-{i}") for i in range(6)]
    _, _, _, out = run(objects, pod_yaml("  nodeSelector: {disk: ssd}"))
    fitting = [e for e in out["nodes"] if e["fits"]]
    assert len(fitting) == 6
    for position in range(len(fitting[0]["filters"])):
        assert len({id(e["filters"][position]) for e in fitting}) == 1  # one object per verdict
    assert fitting[0]["filters"][0] == {"plugin": "NodeUnschedulable", "passed": True, "reason": None, "reasons": []}
    assert fitting[0]["filters"][-1] == {"plugin": "DynamicResources", "passed": True, "reason": None, "reasons": []}
    PreviewReport(out, cluster=None, yaml_text="x", claim_spec=None, show="").groups  # noqa: B018 (the page's grouping reads them)
    run(objects, pod_yaml("  nodeSelector: {disk: ssd}", requests="cpu: 100m\n          memory: 100Mi"))
    for (plugin, passed, reason, reasons), entry in _FILTER_ENTRIES.items():
        assert entry == {"plugin": plugin, "passed": passed, "reason": reason, "reasons": list(reasons)}
