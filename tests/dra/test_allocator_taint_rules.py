"""DeviceTaintRules: the v1.36 fields (driver/pool/device) and the v1alpha3 deviceClassName / CEL
selectors of 1.33-1.34 (tombstoned in 1.35), applied as the scheduler's ResourceSlice tracker did."""

from dra import Features, allocate, preview
from dra.search import SUCCESS, UNSCHEDULABLE

from .allocator_fixtures import claim, dev, inventory, req, slice_

ON = Features(device_taint_rules=True)
CLASSES = {"big": ['device.driver == "driver-a" && device.attributes["driver-a"].mem >= 80']}
DEVICES = [
    dev("d0", attrs={"mem": 40}),
    dev("d1", attrs={"mem": 80}),
    dev("d2", attrs={"model": "x"}),
    dev("d3", attrs={"mem": 80}, multi=True),
]


def rule(name, selector, effect="NoSchedule"):
    return {
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": "maint", "value": name, "effect": effect}},
    }


def tainted(inv):
    return sorted(d.name for d in inv.devices_by_key.values() if any(t.get("rule") for t in d.taints))


def build(*rules, features=ON):
    return inventory([slice_("s", devices=DEVICES)], classes=CLASSES, device_taint_rules=list(rules), features=features)


def test_driver_pool_device_fields():
    assert tainted(build(rule("r", {"driver": "driver-a", "pool": "pool-1", "device": "d1"}))) == ["d1"]
    assert tainted(build(rule("r", {"driver": "driver-b"}))) == []
    assert tainted(build(rule("r", {}))) == ["d0", "d1", "d2", "d3"]  # no selector: every device


def test_device_class_selects_what_the_class_matches():
    # d2 lacks `mem`: the class's selector raises there, which means "not selected", not an error.
    assert tainted(build(rule("r", {"deviceClassName": "big"}))) == ["d1", "d3"]
    assert tainted(build(rule("r", {"deviceClassName": "no-such-class"}))) == []  # the rule does not apply


def test_cel_selectors_all_must_hold_and_runtime_errors_do_not_select():
    inv = build(
        rule(
            "r",
            {"driver": "driver-a", "selectors": [{"cel": {"expression": 'device.attributes["driver-a"].mem == 80'}}]},
        )
    )
    assert tainted(inv) == ["d1", "d3"]
    (problem,) = [p for p in inv.problems if p.startswith("DeviceTaintRule r")]
    assert "CEL runtime error on device driver-a/pool-1/d2" in problem and "no such key: mem" in problem
    both = build(
        rule(
            "r",
            {
                "deviceClassName": "big",
                "selectors": [
                    {"cel": {"expression": 'device.attributes["driver-a"].mem < 100'}},
                    {"cel": {"expression": '"mem" in device.attributes["driver-a"]'}},
                ],
            },
        )
    )
    assert tainted(both) == ["d1", "d3"]


def test_tracker_view_has_no_allow_multiple_allocations():
    inv = build(rule("r", {"selectors": [{"cel": {"expression": "device.allowMultipleAllocations == true"}}]}))
    assert tainted(inv) == []  # d3 allows it, but the tracker evaluates without that field


def test_compile_error_taints_nothing_and_is_reported():
    inv = build(rule("bad", {"selectors": [{"cel": {"expression": "device.attributes["}}]}))
    assert tainted(inv) == []
    assert any(p.startswith("DeviceTaintRule bad: selector #0: CEL compile error") for p in inv.problems)


def test_rules_off_by_default_as_in_1_36():
    assert tainted(build(rule("r", {"deviceClassName": "big"}), features=Features())) == []


def test_class_selected_taint_blocks_allocation_and_explains_itself():
    inv = build(rule("drain", {"deviceClassName": "big"}))
    has_80 = '"mem" in device.attributes["driver-a"] && device.attributes["driver-a"].mem == 80'
    wants_80 = claim("c", [req("r", selectors=[has_80])])
    assert allocate(inv, [wants_80], "node-1").status == UNSCHEDULABLE
    reason = preview(inv, [wants_80], nodes=["node-1"])["nodes"][0]["reason"]
    assert "untolerated taint (maint=drain:NoSchedule)" in reason
    tolerant = claim("c", [req("r", selectors=[has_80], tolerations=[{"key": "maint", "operator": "Exists"}])])
    assert allocate(inv, [tolerant], "node-1").status == SUCCESS
