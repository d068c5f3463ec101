"""What-if scenarios (dra/whatif.py) on generated fleets: the engine's verdicts before and after a
change, checked against counts worked out here from the fleet's numbers alone."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcluster import builders as b
from dra import Inventory
from dra.whatif import (
    LOSES_PLACE,
    NOW_SCHEDULABLE,
    STILL_BLOCKED,
    STILL_SCHEDULABLE,
    ScenarioError,
    Workload,
    apply,
    clone_slice,
    evaluate,
    parse_change,
    parse_changes,
    parse_shape,
)

H100 = b.DEFAULT_GPU_MODELS["h100"]
CLASS = "gpu.nvidia.com"


def build_fleet(gpus, allocated, wants, seed=0):
    """Nodes node-i with gpus[i] GPUs of which the first allocated[i] are held by (pod-less) claims,
    and one pending pod per entry of `wants` asking for that many GPUs on one node (a template)."""
    rng = random.Random(seed)
    objs = {
        "deviceclasses": [b.device_class(CLASS, f"device.driver == '{CLASS}'", None, rng)],
        "nodes": [],
        "resourceslices": [],
        "resourceclaims": [],
        "resourceclaimtemplates": [],
        "pods": [],
        "namespaces": [b.namespace_obj("ml", rng)],
    }
    for i, (count, held) in enumerate(zip(gpus, allocated, strict=True)):
        name = f"node-{i}"
        node = b.make_node(name, rng, H100)
        objs["nodes"].append(node)
        objs["resourceslices"].extend(b.gpu_slices(name, node["metadata"]["uid"], H100, count, rng))
        for minor in range(held):
            claim = b.make_claim(
                "ops", f"held-{i}-{minor}", b.claim_spec([{"name": "gpu", "deviceClassName": CLASS}]), rng
            )
            b.allocate(claim, name, [{"request": "gpu", "driver": CLASS, "pool": name, "device": f"gpu-{minor}"}])
            objs["resourceclaims"].append(claim)
    for j, n in enumerate(wants):
        spec = b.claim_spec([{"name": "gpu", "deviceClassName": CLASS, "count": n}])
        objs["resourceclaimtemplates"].append(b.make_template("ml", f"t-{j}", spec, rng))
        objs["pods"].append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p-{j}", "namespace": "ml"},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"t-{j}"}],
                },
                "status": {"phase": "Pending"},
            }
        )
    return objs


def pending_of(objs):
    return [Workload("pod", "ml", p["metadata"]["name"], p) for p in objs["pods"]]


def node_objects(objs):
    return {n["metadata"]["name"]: n for n in objs["nodes"]}


@st.composite
def fleets(draw):
    size = draw(st.integers(1, 5))
    gpus = draw(st.lists(st.integers(1, 8), min_size=size, max_size=size))
    allocated = [draw(st.integers(0, g)) for g in gpus]
    wants = draw(st.lists(st.integers(1, 9), min_size=1, max_size=8))
    return gpus, allocated, wants


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(fleets(), st.data())
def test_cloning_makes_exactly_the_expected_pods_schedulable(fleet, data):
    gpus, allocated, wants = fleet
    source = data.draw(st.integers(0, len(gpus) - 1))
    copies = data.draw(st.integers(1, 3))
    objs = build_fleet(gpus, allocated, wants)
    inv = Inventory.from_objects(objs)
    applied = apply(inv, parse_changes([f"add node-{source} {copies}"]), node_objects(objs))
    entries = {e["name"]: e for e in evaluate(inv, applied, pending_of(objs))}
    free = [g - a for g, a in zip(gpus, allocated, strict=True)]
    for j, n in enumerate(wants):
        fitted_before = any(f >= n for f in free)
        fits_clone = n <= gpus[source]  # the clone joins empty: all its GPUs are free
        expected = STILL_SCHEDULABLE if fitted_before else NOW_SCHEDULABLE if fits_clone else STILL_BLOCKED
        entry = entries[f"p-{j}"]
        assert entry["verdict"] == expected, (j, n, gpus, allocated, source, entry)
        assert entry["before"]["fits"] == sum(f >= n for f in free)
        assert entry["after"]["fits"] == sum(f >= n for f in free) + (copies if fits_clone else 0)
        assert len(entry["onNewNodes"]) == (copies if fits_clone else 0)


@SETTINGS
@given(fleets(), st.data())
def test_removing_or_cordoning_a_node_loses_exactly_the_pods_only_it_served(fleet, data):
    gpus, allocated, wants = fleet
    gone = data.draw(st.integers(0, len(gpus) - 1))
    how = data.draw(st.sampled_from(["remove", "cordon", "drain"]))
    objs = build_fleet(gpus, allocated, wants)
    inv = Inventory.from_objects(objs)
    applied = apply(inv, parse_changes([f"{how} node-{gone}"]), node_objects(objs))
    entries = {e["name"]: e for e in evaluate(inv, applied, pending_of(objs))}
    free = [g - a for g, a in zip(gpus, allocated, strict=True)]
    for j, n in enumerate(wants):
        before = sum(f >= n for f in free)
        after = sum(f >= n for i, f in enumerate(free) if i != gone)
        expected = STILL_SCHEDULABLE if after else LOSES_PLACE if before else STILL_BLOCKED
        assert entries[f"p-{j}"]["verdict"] == expected, (how, j, n, free, gone)
        assert entries[f"p-{j}"]["after"]["fits"] == after


@SETTINGS
@given(fleets(), st.data())
def test_releasing_a_claim_frees_its_device(fleet, data):
    gpus, allocated, wants = fleet
    held = [(i, m) for i, a in enumerate(allocated) for m in range(a)]
    if not held:
        return
    node, minor = data.draw(st.sampled_from(held))
    objs = build_fleet(gpus, allocated, wants)
    inv = Inventory.from_objects(objs)
    verb = data.draw(st.sampled_from(["release", "delete"]))
    applied = apply(inv, parse_changes([f"{verb} ops/held-{node}-{minor}"]), node_objects(objs))
    assert applied.affected == {f"node-{node}"}
    entries = {e["name"]: e for e in evaluate(inv, applied, pending_of(objs))}
    free = [g - a for g, a in zip(gpus, allocated, strict=True)]
    freed = list(free)
    freed[node] += 1
    for j, n in enumerate(wants):
        assert entries[f"p-{j}"]["after"]["fits"] == sum(f >= n for f in freed)
        assert entries[f"p-{j}"]["before"]["fits"] == sum(f >= n for f in free)


def test_a_class_selector_change_is_seen_on_every_node():
    objs = build_fleet([4, 4], [0, 0], [1, 2])
    inv = Inventory.from_objects(objs)
    applied = apply(
        inv,
        parse_changes([f"class {CLASS} device.attributes['resource.kubernetes.io'].pciBusID == '0000:18:00.0'"]),
        node_objects(objs),
    )
    entries = {e["name"]: e for e in evaluate(inv, applied, pending_of(objs))}
    assert entries["p-0"]["verdict"] == STILL_SCHEDULABLE
    assert entries["p-0"]["after"]["fits"] == 2
    assert entries["p-1"]["verdict"] == LOSES_PLACE  # one device per node matches now


def test_the_original_inventory_is_left_as_it_was():
    objs = build_fleet([2], [1], [2])
    inv = Inventory.from_objects(objs)
    names, claims = list(inv.node_names), dict(inv.claims)
    apply(inv, parse_changes(["add node-0 2", "release ops/held-0-0", "drain node-0"]), node_objects(objs))
    assert inv.node_names == names
    assert inv.claims == claims
    assert evaluate(inv, apply(inv, [], node_objects(objs)), pending_of(objs))[0]["verdict"] == STILL_BLOCKED


def test_a_clone_renames_pool_devices_and_unique_attributes():
    objs = build_fleet([2], [0], [1])
    raw = objs["resourceslices"][0]
    new = clone_slice(raw, "node-0", "node-0-whatif-1")
    assert new["spec"]["nodeName"] == "node-0-whatif-1"
    assert new["spec"]["pool"]["name"] == "node-0-whatif-1"
    assert new["metadata"]["name"] != raw["metadata"]["name"]
    old_uuids = {d["attributes"]["uuid"]["string"] for d in raw["spec"]["devices"]}
    new_uuids = {d["attributes"]["uuid"]["string"] for d in new["spec"]["devices"]}
    assert not old_uuids & new_uuids
    assert raw["spec"]["nodeName"] == "node-0"  # the source is not touched


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("grow node-0 2", "unknown change 'grow'"),
        ("add node-0", "expected `add NODE COUNT`"),
        ("add node-0 0", "COUNT must be a whole number from 1 to 100"),
        ("add node-0 101", "COUNT must be a whole number from 1 to 100"),
        ("add Node_0 1", "node 'Node_0' is not a valid object name"),
        ("release just-a-name", "expected `release NAMESPACE/NAME`"),
        ("taint gpu.nvidia.com k=v:Sometimes", "taint effect must be NoSchedule or NoExecute"),
        ("class gpu.nvidia.com device.driver ==", "CEL compile error at line 1, column"),
    ],
)
def test_bad_changes_say_what_and_where(text, says):
    with pytest.raises(ScenarioError) as err:
        parse_changes(["cordon node-0", text])
    assert err.value.index == 1
    assert says in str(err.value)
    assert str(err.value).startswith("change 2 (")


def test_unknown_objects_are_named():
    objs = build_fleet([1], [1], [1])
    inv = Inventory.from_objects(objs)
    for text, says in [
        ("add node-9 1", "unknown node 'node-9'"),
        ("release ops/nope", "unknown claim ops/nope"),
        ("class nope true", "unknown DeviceClass 'nope'"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            apply(inv, [parse_change(text)], node_objects(objs))


def test_shapes():
    assert parse_shape("8 x gpu.nvidia.com")[0] == "8 x gpu.nvidia.com"
    with pytest.raises(ScenarioError, match="expected `COUNT x CLASS`"):
        parse_shape("eight gpus")


@pytest.mark.parametrize("device", [None, "gpu-0"])
def test_a_draft_taint_rule_blocks_the_tainted_devices(device):
    from dra import Features

    objs = build_fleet([2, 2], [0, 0], [1, 2])
    inv = Inventory(
        device_classes=objs["deviceclasses"],
        resource_slices=objs["resourceslices"],
        nodes=objs["nodes"],
        resource_claim_templates=objs["resourceclaimtemplates"],
        pods=objs["pods"],
        features=Features(device_taint_rules=True),
    )
    where = f"{CLASS}/node-0" + (f"/{device}" if device else "")
    applied = apply(inv, parse_changes([f"taint {where} maintenance=soon:NoSchedule"]), node_objects(objs))
    assert applied.affected == {"node-0"} and not applied.notes
    entries = {e["name"]: e for e in evaluate(inv, applied, pending_of(objs))}
    assert entries["p-0"]["after"]["fits"] == (1 if device is None else 2)  # one untainted GPU is enough
    assert entries["p-0"]["verdict"] == STILL_SCHEDULABLE
    assert entries["p-1"]["after"]["nodes"] == ["node-1"]  # 2 GPUs: node-0 has at most one untainted
    # With the cluster's DeviceTaintRule feature off the rule taints nothing, and the answer says so.
    off = Inventory.from_objects(objs)
    applied = apply(off, parse_changes([f"taint {where} maintenance=soon"]), node_objects(objs))
    assert "DeviceTaintRule feature is off" in applied.notes[0]
    assert {e["after"]["fits"] for e in evaluate(off, applied, pending_of(objs))} == {2}


@pytest.mark.parametrize("where", [CLASS, f"{CLASS}/node-0", f"{CLASS}/node-0/gpu-1"])
def test_a_draft_taint_rule_leaves_the_live_inventory_untainted(where):
    """The copy shares its devices with the original, and rule taints are set on devices in place:
    the what-if's rule must taint the copy's devices only (a later preview on the live inventory
    would otherwise see the draft rule)."""
    from dra import Features, preview
    from dra.model import ClaimSpec

    objs = build_fleet([2], [0], [2])
    inv = Inventory.from_objects(objs, features=Features(device_taint_rules=True))
    spec = [ClaimSpec("ml", "two", b.claim_spec([{"name": "gpu", "deviceClassName": CLASS, "count": 2}]))]
    assert preview(inv, spec)["summary"]["fits"] == 1
    applied = apply(inv, parse_changes([f"taint {where} maintenance=soon"]), node_objects(objs))
    assert preview(applied.inventory, spec)["summary"]["fits"] == 0
    assert preview(inv, spec)["summary"]["fits"] == 1
    assert all(not d.taints for d in inv.devices_by_key.values())


def _source_capacity(inv, node, field):
    from dra import partitions

    keys = sorted(key for key, slices in inv.by_pool.items() if any(s.node_name == node for s in slices))
    groups = [g for pool in partitions.capacity(inv, keys).values() for g in pool.values()]
    profiles = {}
    for g in groups:
        for profile, count in g.profiles.items():
            profiles[profile] = profiles.get(profile, 0) + getattr(count, field)
    return groups, profiles


def test_capacity_of_a_cloned_mig_node_is_the_source_node_empty():
    """The clone joins empty: its whole GPUs are all free and every profile can be created as often as
    on the source with nothing in use (the source's `total`), counted by dra.partitions's own rules."""
    from devcluster.scenario import scenario_objects
    from dra.whatif import capacity_of

    objs = scenario_objects("demo")
    inv = Inventory.from_objects(objs)
    applied = apply(inv, parse_changes(["add gpu-a100-01 1"]), node_objects(objs))
    cap = capacity_of(inv, applied)
    groups, totals = _source_capacity(inv, "gpu-a100-01", "total")
    assert groups and totals, "the demo's A100 node publishes partitions"
    assert cap["nodes"] == applied.added
    assert cap["before"] == {"gpus": 0, "gpusFree": 0, "stranded": 0, "profiles": {}}
    gpus = sum(g.gpus for g in groups)
    assert cap["after"] == {"gpus": gpus, "gpusFree": gpus, "stranded": 0, "profiles": totals}


def test_capacity_of_a_removed_node_is_what_it_had_free():
    from devcluster.scenario import scenario_objects
    from dra.whatif import capacity_of

    objs = scenario_objects("demo")
    inv = Inventory.from_objects(objs)
    applied = apply(inv, parse_changes(["remove gpu-a100-01"]), node_objects(objs))
    cap = capacity_of(inv, applied)
    groups, free = _source_capacity(inv, "gpu-a100-01", "free")
    assert cap["before"]["profiles"] == free and cap["before"]["gpus"] == sum(g.gpus for g in groups)
    assert cap["before"]["stranded"] == sum(g.stranded for g in groups)
    assert cap["after"] == {"gpus": 0, "gpusFree": 0, "stranded": 0, "profiles": {}}
