"""The issue's rules beyond dra-cases.md: explanations, fleet summary, pods, features, headroom, bad input."""

import copy

import pytest

from dra import (
    AllocationError,
    Features,
    InputError,
    Inventory,
    allocate,
    headroom,
    load_documents,
    preview,
    resolve_claims,
)
from dra.search import ERROR, SUCCESS, UNSCHEDULABLE

from .allocator_fixtures import (
    allocated_claim,
    claim,
    dev,
    first,
    inventory,
    picked,
    req,
    slice_,
    sub,
    taintNoSchedule,
)

NV = "gpu.nvidia.com"
H100_CLASS = {"h100": [f'device.driver == "{NV}"']}
MEM80 = f'device.capacity["{NV}"].memory.compareTo(quantity("80Gi")) >= 0'


def gpus(n, domain=lambda i: "nvl-a", mem="80Gi"):
    return [dev(f"gpu-{i}", attrs={"nvlinkDomain": domain(i)}, capacity={"memory": mem}) for i in range(n)]


def gpu_node(node="node-1", n=8, **kw):
    return slice_(f"{node}-gpu", driver=NV, pool=node, node=node, devices=gpus(n, **kw))


def one_node(slices, **kw):
    return inventory(slices, classes=H100_CLASS, nodes={"node-1": {}}, **kw)


# ---- explanations (the examples)


def test_reason_counts_every_filter_stage():
    inv = one_node([gpu_node()], allocated=[f"{NV}/node-1/gpu-{i}" for i in range(3)])
    out = preview(inv, [claim("c", [req("gpu", cls="h100", count=8, selectors=[MEM80])])])
    (entry,) = out["nodes"]
    assert entry.pop("filters")[-1]["plugin"] == "DynamicResources"  # the node filters passed; DRA decided
    assert entry == {
        "node": "node-1",
        "fits": False,
        "results": [],
        "error": None,
        "reason": (
            f"request `gpu`: 8 devices match class `h100`, selector `{MEM80}` leaves 8, "
            "3 are already allocated to other claims (e.g. other/taken), 5 free < count 8"
        ),
    }


def test_reason_selector_leaves_fewer():
    inv = one_node(
        [slice_("s", driver=NV, pool="node-1", devices=gpus(4) + [dev("small", capacity={"memory": "40Gi"})])]
    )
    reason = preview(inv, [claim("c", [req("gpu", cls="h100", count=5, selectors=[MEM80])])])["nodes"][0]["reason"]
    assert reason == f"request `gpu`: 5 devices match class `h100`, selector `{MEM80}` leaves 4, 4 free < count 5"


def test_reason_taints_and_counters_named():
    slices = [
        slice_(
            "s",
            driver=NV,
            pool="node-1",
            count=2,
            devices=[
                dev("gpu-0", taints=[taintNoSchedule]),
                dev("gpu-1", consumes={"cs": {"memory": "8Gi"}}),
                dev("gpu-2", consumes={"cs": {"memory": "8Gi"}}),
            ],
        ),
        slice_("c", driver=NV, pool="node-1", count=2, counters={"cs": {"memory": "8Gi"}}),
    ]
    inv = one_node(slices, allocated=[f"{NV}/node-1/gpu-2"])
    reason = preview(inv, [claim("c", [req("gpu", cls="h100")])])["nodes"][0]["reason"]
    assert reason == (
        "request `gpu`: 3 devices match class `h100`, 1 is already allocated to other claims (e.g. other/taken), "
        "1 has an untolerated taint (taint-key=taint-value:NoSchedule), "
        "1 needs shared counters already used by allocated devices, 0 free < count 1"
    )


def test_reason_constraint_cannot_be_met():
    domains = lambda i: "nvl-a" if i < 3 else "nvl-b"  # noqa: E731  (3 + 3 free devices, need 4 alike)
    inv = one_node([gpu_node(n=6, domain=domains)])
    c = claim("c", [req("gpu", cls="h100", count=4)], constraints=[{"matchAttribute": f"{NV}/nvlinkDomain"}])
    out = preview(inv, [c])
    assert (
        out["nodes"][0]["reason"]
        == f"constraint matchAttribute `{NV}/nvlinkDomain` cannot be met by any 4 of the 6 free devices"
    )
    assert out["summary"]["mostCommonReason"]["code"] == "constraint"


def test_reason_no_complete_pool():
    inv = inventory([gpu_node("node-2")], classes=H100_CLASS, nodes={"node-1": {}, "node-2": {}})
    out = preview(inv, [claim("c", [req("gpu", cls="h100")])])
    assert out["nodes"][0]["reason"] == f"request `gpu`: no complete pool of driver `{NV}` on this node"
    assert out["nodes"][1]["fits"] is True
    incomplete = one_node([slice_("s", driver=NV, pool="node-1", count=2, devices=gpus(2))])
    reason = preview(incomplete, [claim("c", [req("gpu", cls="h100")])])["nodes"][0]["reason"]
    assert (
        reason
        == f"request `gpu`: no complete pool of driver `{NV}` on this node (pool node-1 is incomplete (1 of 2 slices))"
    )


def test_reason_for_prioritized_list_and_several_claims():
    inv = one_node([gpu_node(n=2)])
    c = claim("c", [first("gpu", sub("big", cls="h100", count=4), sub("mid", cls="h100", count=3))])
    reason = preview(inv, [c])["nodes"][0]["reason"]
    assert reason == (
        "request `gpu`: no subrequest fits (`gpu/big`: 2 devices match class `h100`, 2 free < count 4; "
        "`gpu/mid`: 2 devices match class `h100`, 2 free < count 3)"
    )
    two = [claim("a", [req("gpu", cls="h100", count=2)]), claim("b", [req("gpu", cls="h100")])]
    assert (
        preview(inv, two)["nodes"][0]["reason"]
        == "requests `gpu`, `gpu` need 3 devices together but only 2 distinct devices are free"
    )


def test_summary_counts_fits_and_most_common_reason():
    nodes = {f"node-{i}": {} for i in range(1, 5)}
    slices = [gpu_node(n, n=2) for n in nodes]
    allocated = [f"{NV}/node-2/gpu-0", f"{NV}/node-3/gpu-0", f"{NV}/node-3/gpu-1"]
    inv = inventory(slices, classes=H100_CLASS, nodes=nodes, allocated=allocated)
    s = preview(inv, [claim("c", [req("gpu", cls="h100", count=2)])])["summary"]
    assert (s["nodes"], s["fits"], s["errors"]) == (4, 2, 0)
    assert s["mostCommonReason"]["code"] == "allocated" and s["mostCommonReason"]["nodes"] == 2
    assert s["schedulerMessage"] is None


# ---- hard errors: the same on every node, never a crash


@pytest.mark.parametrize(
    "request_, message",
    [
        (req("gpu", cls="nope"), "claim default/c, request gpu: could not retrieve device class nope"),
        (req("gpu", cls="h100", count=10000), "number of requested devices 10000 exceeds the claim limit of 32"),
        (
            req("gpu", cls="h100", selectors=['device.attributes["x"].y ==']),
            "claim default/c: selector #0: CEL compile error at line 1, column",
        ),
        (req("gpu", cls="h100", selectors=["device.drivr == 'x'"]), "CEL compile error at line 1, column 7"),
        (req("gpu", cls="h100", mode="Some"), "unsupported count mode Some"),
    ],
)
def test_hard_errors_are_reported_per_node(request_, message):
    inv = inventory([gpu_node("node-1"), gpu_node("node-2")], classes=H100_CLASS)
    out = preview(inv, [claim("c", [request_])])
    errors = {e["error"] for e in out["nodes"]}
    assert len(errors) == 1 and message in errors.pop()
    assert all(not e["fits"] and e["reason"] is None for e in out["nodes"])
    assert out["summary"]["errors"] == 2


def test_cel_runtime_error_only_where_reached():
    # The missing attribute is only read on node-1's devices; node-2's devices have it.
    slices = [
        slice_("a", driver=NV, pool="node-1", devices=["gpu-0"]),
        slice_("b", driver=NV, pool="node-2", node="node-2", devices=[dev("gpu-0", attrs={"model": "x"})]),
    ]
    inv = inventory(slices, classes={"m": [f'device.attributes["{NV}"].model == "x"']})
    out = preview(inv, [claim("c", [req("gpu", cls="m")])])
    assert "CEL runtime error: no such key: model" in out["nodes"][0]["error"]
    assert out["nodes"][1]["fits"] is True
    # An allocated device is skipped before its selectors run: no error (upstream order, brief 2.5).
    inv2 = inventory(
        slices, classes={"m": [f'device.attributes["{NV}"].model == "x"']}, allocated=[f"{NV}/node-1/gpu-0"]
    )
    assert preview(inv2, [claim("c", [req("gpu", cls="m")])])["nodes"][0]["error"] is None


def test_a_cel_runtime_error_on_one_node_fails_the_attempt_although_another_node_fits():
    # Checked against the real v1.36 scheduler: it filters every node of a small fleet, and the
    # first Filter error ends the attempt (no node is chosen), so kubectl describe shows the error.
    slices = [
        slice_("a", driver=NV, pool="node-1", devices=["gpu-0"]),
        slice_("b", driver=NV, pool="node-2", node="node-2", devices=[dev("gpu-0", attrs={"model": "x"})]),
    ]
    inv = inventory(slices, classes={"m": [f'device.attributes["{NV}"].model == "x"']})
    s = preview(inv, [claim("c", [req("gpu", cls="m")])])["summary"]
    assert (s["fits"], s["errors"]) == (1, 1)
    assert (
        s["schedulerMessage"]
        == 'running "DynamicResources" filter plugin: class m: selector #0: CEL runtime error: no such key: model'
    )


# ---- pods and templates


def test_pod_with_claim_and_template_from_same_documents():
    inv = inventory([gpu_node(n=3)], classes=H100_CLASS, nodes={"node-1": {}})
    docs = load_documents("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: h100}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: ml}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: h100, count: 2}}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  resourceClaims:
  - {name: mine, resourceClaimTemplateName: one-gpu}
  - {name: both, resourceClaimName: shared}
  containers: [{name: c, image: x}]
""")
    claims, bound = resolve_claims(inv, docs)
    assert [c.ref for c in claims] == ["ml/trainer-mine", "ml/shared"] and bound == []
    out = preview(inv, claims, bound=bound)
    assert [(r["claim"], r["device"]) for r in out["nodes"][0]["results"]] == [
        ("ml/trainer-mine", "gpu-0"),
        ("ml/shared", "gpu-1"),
        ("ml/shared", "gpu-2"),
    ]


def test_pod_with_allocated_claim_is_bound_to_its_node():
    taken = allocated_claim("pinned", [f"{NV}/node-2/gpu-0"], ns="ml")
    taken["status"]["allocation"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]
    }
    inv = inventory([gpu_node("node-1"), gpu_node("node-2")], classes=H100_CLASS, claims=[taken])
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "x", "resourceClaimName": "pinned"}]},
    }
    claims, bound = resolve_claims(inv, [pod])
    assert claims == [] and bound[0][0] == "ml/pinned"
    out = preview(inv, claims, bound=bound)
    assert [e["fits"] for e in out["nodes"]] == [False, True]
    assert "resourceclaim not available on the node" in out["nodes"][0]["reason"]


@pytest.mark.parametrize(
    "docs, message",
    [
        (
            [
                {
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"resourceClaims": [{"name": "x", "resourceClaimName": "gone"}]},
                }
            ],
            'could not find ResourceClaim "default/gone"',
        ),
        (
            [
                {
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"resourceClaims": [{"name": "x", "resourceClaimTemplateName": "gone"}]},
                }
            ],
            'could not find ResourceClaimTemplate "default/gone"',
        ),
        ([{"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}], "nothing to place"),
        ([{"kind": "Pod", "metadata": {"name": "a"}}, {"kind": "Pod", "metadata": {"name": "b"}}], "2 Pods given"),
        ([{"kind": "ConfigMap", "metadata": {"name": "c"}}], "unsupported kind 'ConfigMap'"),
        (
            [{"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1beta1", "metadata": {"name": "c"}}],
            "apiVersion resource.k8s.io/v1beta1 is not supported",
        ),
        (
            [{"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "r"}]}}}],
            "exactly one of `exactly` and `firstAvailable`",
        ),
        (
            [
                {
                    "kind": "ResourceClaim",
                    "metadata": {"name": "c"},
                    "spec": {
                        "devices": {
                            "requests": [{"name": "r", "exactly": {"deviceClassName": "h100", "count": "many"}}]
                        }
                    },
                }
            ],
            "count: must be an integer",
        ),
    ],
)
def test_bad_documents(docs, message):
    inv = inventory([gpu_node()], classes=H100_CLASS)
    with pytest.raises(InputError, match=message):
        resolve_claims(inv, docs)


def test_malformed_yaml_names_the_position():
    with pytest.raises(InputError, match=r"malformed YAML at line 4, column 1: expected .,. or .\]."):
        load_documents("kind: ResourceClaim\nmetadata:\n  name: [x\n")


# ---- feature gates, admin access namespace label, taint rules


def test_features_off_behave_like_the_scheduler():
    s = [
        slice_("s", count=2, devices=[dev("d", consumes={"cs": {"m": 1}})]),
        slice_("c", count=2, counters={"cs": {"m": 1}}),
    ]
    assert allocate(inventory(s), [claim("c", [req("r")])], "node-1").status == SUCCESS
    assert (
        allocate(
            inventory(s, features=Features(partitionable_devices=False)), [claim("c", [req("r")])], "node-1"
        ).status
        == UNSCHEDULABLE
    )
    plain = [slice_("s", devices=["d"])]
    off = Features(prioritized_list=False, admin_access=False, consumable_capacity=False)
    for c, msg in (
        (claim("c", [first("r", sub("a"))]), "DRAPrioritizedList feature is disabled"),
        (claim("c", [req("r", admin=True)]), "admin access is requested, but the feature is disabled"),
        (claim("c", [req("r", capacity={"m": 1})]), "DRAConsumableCapacity feature is disabled"),
    ):
        out = allocate(inventory(plain, features=off), [c], "node-1")
        assert out.status == ERROR and msg in out.message
    # distinctAttribute is no gated feature of the allocator: honoured (d has no attribute x: no fit).
    c = claim("c", [req("r")], constraints=[{"distinctAttribute": "driver-a/x"}])
    assert allocate(inventory(plain, features=off), [c], "node-1").status == UNSCHEDULABLE


def test_admin_access_needs_the_namespace_label():
    ns = [
        {"kind": "Namespace", "metadata": {"name": "ops", "labels": {"resource.kubernetes.io/admin-access": "true"}}},
        {"kind": "Namespace", "metadata": {"name": "dev"}},
    ]
    inv = inventory([slice_("s", devices=["d"])], namespaces=ns)
    assert allocate(inv, [claim("c", [req("r", admin=True)], ns="ops")], "node-1").status == SUCCESS
    out = allocate(inv, [claim("c", [req("r", admin=True)], ns="dev")], "node-1")
    assert out.status == ERROR and "namespace dev to have label resource.kubernetes.io/admin-access=true" in out.message


def test_device_taint_rules_apply_when_enabled():
    rule = {
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain"},
        "spec": {
            "deviceSelector": {"driver": "driver-a", "device": "d1"},
            "taint": {"key": "maint", "effect": "NoSchedule"},
        },
    }
    s = [slice_("s", devices=["d1", "d2"])]
    off = inventory(s, device_taint_rules=[rule])
    on = inventory(s, device_taint_rules=[rule], features=Features(device_taint_rules=True))
    c = [claim("c", [req("r")])]
    assert picked(allocate(off, c, "node-1")) == [("c", "r", "driver-a/pool-1/d1")]
    assert picked(allocate(on, c, "node-1")) == [("c", "r", "driver-a/pool-1/d2")]
    tolerating = [claim("c", [req("r", tolerations=[{"key": "maint", "operator": "Exists"}])])]
    assert picked(allocate(on, tolerating, "node-1")) == [("c", "r", "driver-a/pool-1/d1")]


def test_unknown_feature_setting_is_an_error():
    with pytest.raises(ValueError, match="unknown DRA feature setting"):
        Features.from_dict({"prioritised_list": True})


# ---- headroom


def test_headroom_places_copies_one_after_another():
    nodes = {"n1": {"gpudash.io/node-pool": "big"}, "n2": {"gpudash.io/node-pool": "big"}, "n3": {}}
    slices = [
        slice_(
            "a",
            driver=NV,
            pool="n1",
            node="n1",
            devices=[dev(f"g{i}", attrs={"productName": "H100"}) for i in range(4)],
        ),
        slice_(
            "b",
            driver=NV,
            pool="n2",
            node="n2",
            devices=[dev(f"g{i}", attrs={"productName": "H100"}) for i in range(3)],
        ),
        slice_(
            "c", driver=NV, pool="n3", node="n3", devices=[dev(f"g{i}", attrs={"productName": "L4"}) for i in range(2)]
        ),
    ]
    inv = inventory(slices, classes=H100_CLASS, nodes=nodes, allocated=[f"{NV}/n2/g0"])
    room = headroom(inv, [claim("c", [req("gpu", cls="h100", count=2)])])
    assert room["copies"] == 4  # n1: 2, n2: 1 (2 free), n3: 1
    assert room["byNode"] == {"n1": 2, "n2": 1, "n3": 1}
    assert room["byNodePool"] == {"(no node pool label)": 1, "big": 3}
    assert room["byDeviceModel"] == {"H100": 3, "L4": 1}
    # The inventory is untouched: a preview afterwards still sees every free device.
    assert preview(inv, [claim("c", [req("gpu", cls="h100", count=4)])])["nodes"][0]["fits"] is True


def test_headroom_counts_shared_counters_and_capacity():
    slices = [
        slice_("s", count=2, devices=[dev(f"p{i}", consumes={"cs": {"mem": "10Gi"}}) for i in range(4)]),
        slice_("c", count=2, counters={"cs": {"mem": "25Gi"}}),
        slice_(
            "m",
            pool="pool-2",
            devices=[
                dev(
                    "shared",
                    multi=True,
                    capacity={
                        "mem": {"value": "10Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}}}
                    },
                )
            ],
        ),
    ]
    inv = inventory(slices, nodes={"node-1": {}})
    assert (
        headroom(inv, [claim("c", [req("r", selectors=["device.allowMultipleAllocations == false"])])])["copies"] == 2
    )
    room = headroom(
        inv, [claim("c", [req("r", selectors=["device.allowMultipleAllocations"], capacity={"mem": "3Gi"})])]
    )
    assert room["copies"] == 3  # 3 x 3Gi of 10Gi


def test_headroom_of_a_broken_claim_raises():
    with pytest.raises(AllocationError, match="could not retrieve device class"):
        headroom(inventory([slice_("s", devices=["d"])]), [claim("c", [req("r", cls="nope")])])


def test_unknown_node_is_an_input_error():
    with pytest.raises(InputError, match="unknown node"):
        preview(inventory([slice_("s", devices=["d"])]), [claim("c", [req("r")])], nodes=["node-9"])


def test_invalid_pools_seen_through_counters_are_summarised():
    # Counter slices are relevant to every node (brief 2.2), so another node's broken pool counts here too.
    slices = [slice_("mine", devices=["d"])]
    for i in range(5):
        slices.append(
            slice_(
                f"x{i}",
                pool=f"far-{i}",
                node="node-2",
                count=2,
                devices=[dev("p", consumes={"cs": {"m": 1}}), dev("p2", consumes={"nope": {"m": 1}})],
            )
        )
        slices.append(slice_(f"x{i}c", pool=f"far-{i}", node="node-2", count=2, counters={"cs": {"m": 1}}))
    inv = inventory(slices, allocated=["driver-a/pool-1/d"])
    reason = preview(inv, [claim("c", [req("r")])], nodes=["node-1"])["nodes"][0]["reason"]
    assert reason.startswith(
        "invalid resource pools were encountered (pool driver-a/far-0: device p2 consumes unknown counter set nope;"
    )
    assert "and 2 more invalid pools seen through their shared counters" in reason


def test_bare_claim_spec_is_previewed_as_a_claim():
    inv = inventory([gpu_node()], classes=H100_CLASS, nodes={"node-1": {}})
    claims, _ = resolve_claims(
        inv,
        load_documents("devices:\n  requests:\n  - {name: gpu, exactly: {deviceClassName: h100}}\n"),
        namespace="ml",
    )
    assert [c.ref for c in claims] == ["ml/preview"]
    assert preview(inv, claims)["nodes"][0]["results"][0]["device"] == "gpu-0"
    with pytest.raises(InputError, match="object 1 has no `kind`"):
        load_documents("foo: bar\n")


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("attributes", [{"model": "H100"}], "device gpu-0: attributes must be a map, not list"),
        ("attributes", {"model": "H100"}, "device gpu-0: attributes['model'] must be an object, not str"),
        ("capacity", ["80Gi"], "device gpu-0: capacity must be a map, not list"),
        ("taints", {"key": "x"}, "device gpu-0: taints must be a list, not dict"),
    ],
)
def test_a_device_of_the_wrong_json_type_is_a_problem_not_a_crash(field, value, why):
    """A slice no API server would accept (a garbage answer, a hand-edited dump) is left out and named;
    the preview still runs on the rest of the fleet instead of failing inside CEL or a search."""
    bad = gpu_node("node-1", n=1)
    bad["spec"]["devices"][0][field] = value
    inv = inventory([bad, gpu_node("node-2", n=1)], classes=H100_CLASS, nodes={"node-1": {}, "node-2": {}})
    assert inv.problems == [f"ResourceSlice node-1-gpu: {why}"]
    out = preview(inv, [claim("c", [req("gpu", cls="h100", selectors=[MEM80])])])
    assert [n["fits"] for n in out["nodes"]] == [False, True]
    assert out["summary"]["problems"] == inv.problems
    # The live inventory's path: the rows' values shared, plain devices marked (their maps are then
    # not walked again); a device with a bad map is never marked, and lists are always checked, so
    # its slice is still the one problem.
    from claims.live_inventory import share_device_values

    slices = [bad, gpu_node("node-2", n=1)]
    plain = set()
    share_device_values(slices, {}, plain)
    assert (id(bad["spec"]["devices"][0]) in plain) is (field == "taints")
    assert id(slices[1]["spec"]["devices"][0]) in plain
    live = Inventory(resource_slices=slices, plain_devices=plain)
    assert live.problems == inv.problems


ALLOCATABLE = {"cpu": "8", "memory": "64Gi", "pods": "110"}  # a Pod preview counts a node without it as full


def _bad_node(field, value):
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {}},
        "spec": {},
        "status": {"allocatable": dict(ALLOCATABLE)},
    }
    part, _, key = field.partition(".")
    if key:
        node[part][key] = value
    else:
        node[part] = value
    return node


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("spec", "x", "Node node-1: spec: must be an object, not a string 'x'"),
        ("spec.taints", {"key": "k"}, "Node node-1: spec.taints: must be a list, not an object {'key': 'k'}"),
        ("status.conditions", 3, "Node node-1: status.conditions: must be a list, not an integer 3"),
        ("metadata.labels", ["a"], "Node node-1: metadata.labels: must be an object, not a list ['a']"),
    ],
)
def test_a_mirrored_object_of_the_wrong_json_type_is_left_out_and_named(field, value, why):
    """A Node (or any mirrored object) whose fields no API server would hand out, as a garbage answer
    or a hand-edited row can leave them, used to fail every preview of its cluster inside the node
    filters (AttributeError on `'str'.get`). Now it is left out of the inventory with the field named,
    and the rest of the fleet is previewed; updating it in place (the live inventory) does the same,
    and a good version later clears the problem."""
    good_node2 = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-2", "labels": {}},
        "status": {"allocatable": dict(ALLOCATABLE)},
    }
    inv = inventory([gpu_node("node-1", n=1), gpu_node("node-2", n=1)], classes=H100_CLASS, nodes={})
    inv = inv.with_changes({"nodes": [_bad_node("spec", {}), good_node2]})
    docs = load_documents(
        """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: i, resources: {claims: [{name: g}]}}]
  resourceClaims: [{name: g, resourceClaimName: c1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c1, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: h100}}]
""",
        "YAML",
    )
    from dra.nodefilters import scheduling_pod

    def verdicts(inv):
        claims, bound = resolve_claims(inv, docs)
        out = preview(inv, claims, bound=bound, pod=scheduling_pod(docs))
        return {n["node"]: n["fits"] for n in out["nodes"]}, out["summary"]["problems"]

    assert verdicts(inv) == ({"node-1": True, "node-2": True}, [])
    broken = inv.with_changes({"nodes": [_bad_node(field, value)]})
    fits, problems = verdicts(broken)
    assert problems == [why]
    assert fits.get("node-2") is True and fits.get("node-1") is not True  # previewed without the bad Node
    fresh = Inventory(
        device_classes=[c.raw for c in inv.classes.values()],
        resource_slices=[s.raw for s in inv.slices],
        nodes=[_bad_node(field, value), good_node2],
    )
    assert fresh.problems == [why] and "node-1" not in fresh.nodes  # the constructor does the same
    mended = broken.with_changes({"nodes": [_bad_node("spec", {})]})
    assert verdicts(mended) == ({"node-1": True, "node-2": True}, [])


@pytest.mark.parametrize(
    "kind, raw, why",
    [
        (
            "resource_claims",
            {"metadata": "x"},
            "ResourceClaim (no name): metadata: must be an object, not a string 'x'",
        ),
        (
            "pods",
            {"metadata": {"name": "p", "namespace": "ns"}, "spec": "x"},
            "Pod ns/p: spec: must be an object, not a string 'x'",
        ),
        (
            "device_classes",
            {"metadata": {"name": "c"}, "spec": {"selectors": "x"}},
            "DeviceClass c: spec.selectors: must be a list, not a string 'x'",
        ),
        (
            "device_taint_rules",
            {"metadata": {"name": "r"}, "spec": {"taint": []}},
            "DeviceTaintRule r: spec.taint: must be an object, not a list []",
        ),
    ],
)
def test_other_mirrored_kinds_of_the_wrong_json_type_are_named(kind, raw, why):
    inv = Inventory(**{kind: [raw]})
    assert inv.problems == [why]


def test_the_written_out_claim_check_agrees_with_check_shape():
    """shapes._base_ok (the fast path for claims and templates) says what check_shape says."""
    from dra.shapes import _MIRRORED_BASE, _base_ok, check_shape

    good = {"metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b", "n": None}}, "spec": {}, "status": {}}
    variants = [good, {}, {"metadata": None}]
    for path in (
        ("metadata",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "labels"),
        ("metadata", "labels", "a"),
        ("spec",),
        ("status",),
    ):
        for value in ("x", 3, [], {}, None, True, {"k": 1}):
            obj = copy.deepcopy(good)
            target = obj
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            variants.append(obj)
    for obj in variants:
        try:
            check_shape(obj, _MIRRORED_BASE, "x")
            expected = True
        except InputError:
            expected = False
        assert _base_ok(obj) is expected, obj


def test_under_the_counter_leak_the_search_tries_every_device_however_few_are_left():
    # Checked against the real v1.36 scheduler (one node, four MIG slices that together use the
    # whole counter set; models a, a, b, a; matchAttribute model). Upstream tries every device for
    # each pick of the 3-device subrequest, and each one the constraint turns away keeps its counters
    # (kubernetes#140436): the counters run out before the `All` subrequest reaches the model-b
    # device, so the node just does not fit. Skipping devices that cannot complete the count charged
    # less and reached the constraint error that `All` raises instead.
    counters = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n-counters"},
        "spec": {
            "driver": NV,
            "nodeName": "node-1",
            "pool": {"name": "part", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": "80Gi"}}}],
        },
    }
    devices = [
        {
            "name": f"mig-{i}",
            "attributes": {"model": {"string": m}},
            "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "20Gi"}}}],
        }
        for i, m in enumerate("aaba")
    ]
    migs = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n-devs"},
        "spec": {
            "driver": NV,
            "nodeName": "node-1",
            "pool": {"name": "part", "generation": 1, "resourceSliceCount": 2},
            "devices": devices,
        },
    }
    classes = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NV}"'}}]},
        }
    ]
    inv = Inventory.from_objects(
        {
            "resourceslices": [counters, migs],
            "deviceclasses": classes,
            "nodes": [
                {
                    "metadata": {"name": "node-1"},
                    "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}},
                }
            ],
        }
    )
    docs = load_documents(f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: c, namespace: ml}}
spec:
  devices:
    requests:
    - {{name: r0, exactly: {{deviceClassName: gpu}}}}
    - name: r1
      firstAvailable:
      - {{name: s0, deviceClassName: gpu, count: 3, selectors: [{{cel: {{expression: 'device.attributes["{NV}"].model == "a"'}}}}]}}
      - {{name: s1, deviceClassName: gpu, allocationMode: All}}
    constraints: [{{matchAttribute: {NV}/model}}]
""")
    claims, bound = resolve_claims(inv, docs)
    (entry,) = preview(inv, claims, bound=bound)["nodes"]
    assert entry["error"] is None and entry["fits"] is False
