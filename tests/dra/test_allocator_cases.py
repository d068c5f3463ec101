"""Every case of ../shared/dra-cases.md as data, run through one Allocate(node, claims) call each."""

import pytest

from dra import Features, allocate
from dra.results import allocation_result
from dra.search import ERROR, NODE_FAILURE, SUCCESS, UNSCHEDULABLE

from .allocator_fixtures import (
    V,
    claim,
    dev,
    devices,
    first,
    inventory,
    mem,
    picked,
    req,
    selector,
    slice_,
    sub,
    taintNoExecute,
    taintNone,
    taintNoSchedule,
    tolNoExecute,
)

A = "driver-a/pool-1/"
LOCAL1 = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
LOCAL2 = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]}
MULTI_CLASS = {"class-a": ['device.driver == "driver-a" && device.allowMultipleAllocations == true']}


def range_policy(value):
    return {
        "capacity-0": {
            "value": str(value),
            "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
        }
    }


STEP_POLICY = {"bw": {"value": "10G", "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}}}}


def one(c="claim-0", r="req-0", **kw):
    return claim(c, [req(r, **kw)])


CASES = [
    # ---- A. basics, ordering, pools
    dict(
        id="C01",
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        node_selector=LOCAL1,
    ),
    dict(
        id="C02",
        node="node-2",
        slices=[
            slice_("slice-1", driver="driver-b", devices=["device-1"]),
            slice_("slice-2", pool="pool-2", node="node-2", devices=["device-1"]),
        ],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", "driver-a/pool-2/device-1")],
        node_selector=LOCAL2,
    ),
    dict(
        id="C03",
        slices=[
            slice_(
                "slice-1",
                devices=[dev("device-2", capacity={"memory": "2Gi"}), dev("device-1", capacity={"memory": "1Gi"})],
            )
        ],
        claims=[claim("claim-0", [req("req-0", selectors=[mem("1Gi")]), req("req-1", selectors=[mem("2Gi")])])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-1", A + "device-2")],
        node_selector=LOCAL1,
    ),
    dict(
        id="C05",
        slices=[slice_("slice-1", devices=["device-1"]), slice_("slice-2", pool="pool-2", devices=["device-1"])],
        claims=[one(count=2)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-0", "driver-a/pool-2/device-1")],
    ),
    dict(
        id="C06",
        slices=[
            slice_("slice-1", pool="pool-3", devices=["device-1"]),
            slice_("slice-2", pool="pool-2", devices=["device-1"]),
            slice_("slice-3", pool="pool-1", devices=["device-1"]),
        ],
        claims=[one(count=2)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-0", "driver-a/pool-2/device-1")],
    ),
    dict(
        id="C07",
        slices=[
            slice_("slice-3", count=3, devices=["device-3"]),
            slice_("slice-2", count=3, devices=["device-2"]),
            slice_("slice-1", count=3, devices=["device-1"]),
        ],
        claims=[one(count=2)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-0", A + "device-2")],
    ),
    dict(
        id="C08",
        slices=[
            slice_("slice-1", devices=[dev("device-1", binding=["IsPrepare"], binding_fail=["BindingFailed"])]),
            slice_("slice-3", pool="pool-3", devices=["device-3"]),
            slice_("slice-2", pool="pool-2", devices=["device-2"]),
        ],
        claims=[one(count=2)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", "driver-a/pool-2/device-2"), ("claim-0", "req-0", "driver-a/pool-3/device-3")],
    ),
    dict(id="C10", slices=[slice_("slice-1", count=2, devices=["device-1"])], claims=[one()], expect=UNSCHEDULABLE),
    dict(
        id="C11-A",
        slices=[
            slice_("slice-1", count=2, devices=["device-1"]),
            slice_("slice-2", count=2, devices=["device-1"]),
            slice_("slice-3", pool="pool-2", devices=["device-2"]),
        ],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", "driver-a/pool-2/device-2")],
    ),
    dict(
        id="C11-B",
        slices=[
            slice_("slice-1", count=2, devices=["device-1"]),
            slice_("slice-2", count=2, devices=["device-1"]),
            slice_("slice-3", pool="pool-2", devices=["device-2"]),
        ],
        allocated=["driver-a/pool-2/device-2"],
        claims=[one()],
        expect=NODE_FAILURE,
        message="invalid resource pools were encountered",
    ),
    dict(
        id="C11-duplicate-slice",
        slices=[slice_("slice-1", count=2, devices=["device-1"]), slice_("slice-1b", count=2, devices=["device-1"])],
        claims=[one()],
        expect=NODE_FAILURE,
        message="invalid resource pools were encountered",
    ),
    dict(
        id="C12",
        slices=[
            slice_("slice-1", gen=1, count=2, devices=["device-1"]),
            slice_("slice-2", gen=2, count=2, node="node-2", devices=["device-2"]),
        ],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C13",
        slices=[
            slice_("slice-1a", count=2, devices=["device-1"]),
            slice_("slice-1b", count=2, devices=["device-2"]),
            slice_("slice-2a", gen=2, count=2, node="node-2", devices=["device-1"]),
            slice_("slice-2b", gen=2, count=2, node="node-2", devices=["device-2"]),
        ],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        node_selector=LOCAL1,
    ),
    dict(
        id="C15",
        slices=[
            slice_("slice-1", node_selector=selector(planet=["earth"]), devices=[dev("device-1", binds_to_node=True)])
        ],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        node_selector=LOCAL1,
    ),
    dict(
        id="C15-selector-merged",
        slices=[slice_("slice-1", node_selector=selector(planet=["earth"]), devices=["device-1"])],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        node_selector={
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "planet", "operator": "In", "values": ["earth"]}]}]
        },
    ),
    dict(id="C16", slices=[], claims=[claim("claim-0", [])], expect=SUCCESS, picks=[], node_selector=None, config=[]),
    # ---- B. hard errors vs unschedulable
    dict(
        id="C17",
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[one(cls="unknown-class")],
        expect=ERROR,
        message="could not retrieve device class unknown-class",
    ),
    dict(
        id="C17-no-classes",
        classes_only={},
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[one()],
        expect=ERROR,
        message="could not retrieve device class class-a",
    ),
    dict(
        id="C18",
        slices=[slice_("slice-1", devices=devices("device", 33))],
        claims=[claim("claim-0", [req("req-0", count=32), req("req-1")])],
        expect=ERROR,
        message="number of requested devices 33 exceeds the claim limit of 32",
    ),
    dict(
        id="C18-single-request",
        slices=[slice_("slice-1", devices=devices("device", 33))],
        claims=[one(count=33)],
        expect=ERROR,
        message="number of requested devices 33 exceeds the claim limit of 32",
    ),
    dict(
        id="C18-max-number-devices",
        slices=[slice_("slice-1", devices=devices("device", 32))],
        claims=[one(count=32)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + f"device-{i}") for i in range(32)],
    ),
    dict(
        id="C19",
        classes={"class-a": ['device.attributes["driver-a"].model == "x"']},
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[one()],
        expect=ERROR,
        message="class class-a: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="C20",
        classes={"class-a": ['"model" in device.attributes["driver-a"] && device.attributes["driver-a"].model == "x"']},
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C21",
        slices=[slice_("slice-1", count=2, devices=["device-1"])],
        claims=[one(mode="All")],
        expect=ERROR,
        message="claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
    ),
    dict(
        id="C22",
        slices=[slice_("slice-1", devices=[dev("device-1", attrs={"numa": 1}), dev("device-2", attrs={"numa": 2})])],
        claims=[claim("claim-0", [req("req-0", mode="All")], constraints=[{"matchAttribute": "driver-a/numa"}])],
        expect=ERROR,
        message="request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
    ),
    dict(
        id="C22-contrast",
        slices=[slice_("slice-1", devices=[dev("device-1", attrs={"numa": 1}), dev("device-2", attrs={"numa": 2})])],
        claims=[claim("claim-0", [req("req-0", count=2)], constraints=[{"matchAttribute": "driver-a/numa"}])],
        expect=UNSCHEDULABLE,
    ),
    # ---- C. in use, All, admin access
    dict(
        id="C23-A",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        allocated=[A + "device-1"],
        claims=[one(mode="All")],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C23-B",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        allocated=[A + "device-1"],
        claims=[one(mode="All", admin=True)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-0", A + "device-2")],
        admin=True,
    ),
    dict(
        id="C25-A",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        claims=[one(), one("claim-1", admin=True)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-1", "req-0", A + "device-1")],
    ),
    dict(
        id="C25-B",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        claims=[one(admin=True), one("claim-1", admin=True)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-1", "req-0", A + "device-1")],
    ),
    dict(
        id="C25-C",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        claims=[claim("claim-0", [req("req-0", admin=True), req("req-1", mode="All", admin=True)])],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C26-A",
        slices=[slice_("slice-1", devices=["device-1"])],
        allocated=[A + "device-1", A + "device-2"],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C26-B",
        slices=[slice_("slice-1", devices=["device-1"])],
        allocated=[A + "device-1", A + "device-2"],
        claims=[one(admin=True)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        admin=True,
    ),
    # ---- D. constraints and configuration
    dict(
        id="C27",
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev("device-1", attrs={"driverVersion": V("1.0.0"), "stringAttribute": "a"}),
                    dev("device-2", attrs={"driverVersion": V("2.0.0"), "stringAttribute": "b"}),
                    dev("device-3", attrs={"driverVersion": V("3.0.0"), "stringAttribute": "b"}),
                ],
            )
        ],
        claims=[
            claim(
                "claim-0",
                [req("req-0"), req("req-1")],
                constraints=[
                    {"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"},
                    {"matchAttribute": "driver-a/stringAttribute"},
                ],
            )
        ],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-2"), ("claim-0", "req-1", A + "device-3")],
    ),
    dict(
        id="C29-quirk",
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev("device-1", attrs={"numa": 0}),
                    dev("device-2", attrs={"numa": 1}),
                    dev("device-3", attrs={"numa": 0}),
                ],
            )
        ],
        claims=[claim("claim-0", [req("req-0", count=3)], constraints=[{"distinctAttribute": "driver-a/numa"}])],
        expect=SUCCESS,
        picks=[
            ("claim-0", "req-0", A + "device-1"),
            ("claim-0", "req-0", A + "device-2"),
            ("claim-0", "req-0", A + "device-3"),
        ],
    ),
    dict(
        id="C29-fixed",
        features={"quirk_distinct_per_request": False},
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev("device-1", attrs={"numa": 0}),
                    dev("device-2", attrs={"numa": 1}),
                    dev("device-3", attrs={"numa": 0}),
                ],
            )
        ],
        claims=[claim("claim-0", [req("req-0", count=3)], constraints=[{"distinctAttribute": "driver-a/numa"}])],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C30",
        classes={
            "class-a": {
                "selectors": ['device.driver == "driver-a"'],
                "config": [
                    {"opaque": {"driver": "driver-a", "parameters": {"classAttribute-A": "classAttribute-AValue"}}}
                ],
            },
            "class-b": {
                "selectors": ['device.driver == "driver-b"'],
                "config": [
                    {"opaque": {"driver": "driver-b", "parameters": {"classAttribute-B": "classAttribute-BValue"}}}
                ],
            },
        },
        slices=[
            slice_("slice-1", devices=["device-0", "device-1"]),
            slice_("slice-2", driver="driver-b", devices=["device-1"]),
        ],
        claims=[claim("claim-0", [req("req-0"), req("req-1"), req("req-2", cls="class-b")])],
        expect=SUCCESS,
        picks=[
            ("claim-0", "req-0", A + "device-0"),
            ("claim-0", "req-1", A + "device-1"),
            ("claim-0", "req-2", "driver-b/pool-1/device-1"),
        ],
        config=[
            {
                "source": "FromClass",
                "requests": ["req-0", "req-1"],
                "opaque": {"driver": "driver-a", "parameters": {"classAttribute-A": "classAttribute-AValue"}},
            },
            {
                "source": "FromClass",
                "requests": ["req-2"],
                "opaque": {"driver": "driver-b", "parameters": {"classAttribute-B": "classAttribute-BValue"}},
            },
        ],
    ),
    dict(
        id="C31-quirk",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        claims=[
            claim(
                "claim-0",
                [req("req-0"), req("req-1")],
                config=[{"requests": ["req-0", "req-1"], "opaque": {"driver": "driver-a", "parameters": {"x": "y"}}}],
            )
        ],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-1", A + "device-2")],
        config=[
            {
                "source": "FromClaim",
                "requests": ["req-0", "req-1"],
                "opaque": {"driver": "driver-a", "parameters": {"x": "y"}},
            }
        ]
        * 2,
    ),
    dict(
        id="C31-fixed",
        features={"quirk_config_duplicates": False},
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        claims=[
            claim(
                "claim-0",
                [req("req-0"), req("req-1")],
                config=[{"requests": ["req-0", "req-1"], "opaque": {"driver": "driver-a", "parameters": {"x": "y"}}}],
            )
        ],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-0", "req-1", A + "device-2")],
        config=[
            {
                "source": "FromClaim",
                "requests": ["req-0", "req-1"],
                "opaque": {"driver": "driver-a", "parameters": {"x": "y"}},
            }
        ],
    ),
    # ---- E. prioritized list
    dict(
        id="C32",
        slices=[slice_("slice-1", devices=["device-1"])],
        claims=[claim("claim-0", [first("req-0", sub("subReq-0", "class-b"), sub("subReq-1"))])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0/subReq-1", A + "device-1")],
    ),
    dict(
        id="C33",
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev("device-1", capacity={"memory": "2Gi"}),
                    dev("device-2", capacity={"memory": "2Gi"}),
                    dev("device-3", capacity={"memory": "1Gi"}),
                ],
            )
        ],
        claims=[
            claim(
                "claim-0",
                [
                    req("req-0", selectors=[mem("1Gi")]),
                    first(
                        "req-1",
                        sub("subReq-0", count=1, selectors=[mem("4Gi")]),
                        sub("subReq-1", count=2, selectors=[mem("2Gi")]),
                    ),
                ],
            )
        ],
        expect=SUCCESS,
        picks=[
            ("claim-0", "req-0", A + "device-3"),
            ("claim-0", "req-1/subReq-1", A + "device-1"),
            ("claim-0", "req-1/subReq-1", A + "device-2"),
        ],
    ),
    dict(
        id="C35",
        slices=[slice_("slice-1", devices=["device-1", "device-2"])],
        allocated=[A + "device-1"],
        claims=[claim("claim-0", [first("req-0", sub("subReq-0", mode="All"), sub("subReq-1", count=1))])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0/subReq-1", A + "device-2")],
    ),
    dict(
        id="C36",
        slices=[
            slice_("slice-1", devices=devices("device", 31)),
            slice_("slice-2", driver="driver-b", pool="pool-2", devices=["device-0", "device-1"]),
        ],
        claims=[
            claim(
                "claim-0",
                [
                    first("req-0", sub("subReq-0", mode="All"), sub("subReq-1", count=2)),
                    req("req-1", cls="class-b", count=2),
                ],
            )
        ],
        expect=SUCCESS,
        picks=[
            ("claim-0", "req-0/subReq-1", A + "device-0"),
            ("claim-0", "req-0/subReq-1", A + "device-1"),
            ("claim-0", "req-1", "driver-b/pool-2/device-0"),
            ("claim-0", "req-1", "driver-b/pool-2/device-1"),
        ],
    ),
    # ---- F. partitionable devices
    dict(
        id="C37",
        slices=[
            slice_(
                "slice-1",
                count=2,
                devices=[
                    dev(
                        "device-1",
                        consumes={
                            "counter-set-1": {"memory": "4Gi", "cpus": 6},
                            "counter-set-2": {"cpus": 4, "memory": "2Gi"},
                        },
                    ),
                    dev(
                        "device-2",
                        consumes={
                            "counter-set-1": {"memory": "6Gi", "cpus": 4},
                            "counter-set-2": {"cpus": 6, "memory": "6Gi"},
                        },
                    ),
                    dev(
                        "device-3",
                        consumes={
                            "counter-set-1": {"memory": "4Gi", "cpus": 4},
                            "counter-set-2": {"cpus": 4, "memory": "4Gi"},
                        },
                    ),
                ],
            ),
            slice_(
                "slice-2",
                count=2,
                counters={
                    "counter-set-1": {"cpus": 8, "memory": "18Gi"},
                    "counter-set-2": {"cpus": 12, "memory": "18Gi"},
                },
            ),
        ],
        claims=[claim("claim-0", [req("req-0"), req("req-1")])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-2"), ("claim-0", "req-1", A + "device-3")],
    ),
    dict(
        id="C39",
        slices=[
            slice_(
                "slice-1",
                count=2,
                devices=[
                    dev("device-1", consumes={"counter-set-1": {"memory": "4Gi"}}),
                    dev("device-2", consumes={"counter-set-1": {"memory": "16Gi"}}),
                ],
            ),
            slice_("slice-2", count=2, counters={"counter-set-1": {"memory": "18Gi"}}),
        ],
        allocated=[A + "device-2"],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C40",
        slices=[
            slice_("slice-1", count=2, devices=[dev("device-1", consumes={"counter-set-2": {"memory": "4Gi"}})]),
            slice_("slice-2", count=2, counters={"counter-set-1": {"memory": "8Gi"}}),
        ],
        claims=[one()],
        expect=NODE_FAILURE,
        message="invalid resource pools were encountered",
    ),
    dict(
        id="C41",
        slices=[
            slice_(
                "slice-1",
                count=2,
                per_device=True,
                devices=[
                    dev(
                        "device-1",
                        consumes={"counter-set-1": {"memory": "4Gi"}},
                        node_selector=selector(region=["region-1"]),
                    ),
                    dev("device-2", consumes={"counter-set-1": {"memory": "4Gi"}}, node_name="node-1"),
                    dev("device-3", consumes={"counter-set-1": {"memory": "4Gi"}}, all_nodes=True),
                ],
            ),
            slice_("slice-2", count=2, per_device=True, counters={"counter-set-1": {"memory": "18Gi"}}),
            slice_(
                "slice-3",
                driver="driver-b",
                pool="pool-2",
                count=2,
                devices=[dev(f"device-{i}", consumes={"counter-set-2": {"memory": "4Gi"}}) for i in (1, 2, 3)],
            ),
            slice_(
                "slice-4", driver="driver-b", pool="pool-2", count=2, counters={"counter-set-2": {"memory": "12Gi"}}
            ),
        ],
        claims=[claim("claim-0", [req("req-0", count=3), req("req-1", cls="class-b", count=3)])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + f"device-{i}") for i in (1, 2, 3)]
        + [("claim-0", "req-1", f"driver-b/pool-2/device-{i}") for i in (1, 2, 3)],
        node_selector=LOCAL1,
    ),
    # ---- G. taints
    dict(
        id="C42",
        slices=[
            slice_(
                "slice-1", devices=[dev("device-1", taints=[taintNoSchedule]), dev("device-2", taints=[taintNoExecute])]
            )
        ],
        claims=[one(tolerations=[tolNoExecute])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-2")],
        tolerations=[tolNoExecute],
    ),
    dict(
        id="C42-untolerated",
        slices=[
            slice_(
                "slice-1", devices=[dev("device-1", taints=[taintNoSchedule]), dev("device-2", taints=[taintNoExecute])]
            )
        ],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C42-prioritized",
        slices=[
            slice_(
                "slice-1", devices=[dev("device-1", taints=[taintNoSchedule]), dev("device-2", taints=[taintNoExecute])]
            )
        ],
        claims=[claim("claim-0", [first("req-0", sub("subReq-0"), sub("subReq-1", tolerations=[tolNoExecute]))])],
        expect=SUCCESS,
        picks=[("claim-0", "req-0/subReq-1", A + "device-2")],
        tolerations=[tolNoExecute],
    ),
    dict(
        id="C42-taints-off",
        features={"device_taints": False},
        slices=[slice_("slice-1", devices=[dev("device-1", taints=[taintNoSchedule])])],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
    ),
    dict(
        id="C43",
        slices=[slice_("slice-1", devices=[dev("device-1", taints=[taintNone])])],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        tolerations=None,
    ),
    # ---- H. binding conditions
    dict(
        id="C45-on",
        slices=[slice_("slice-1", devices=[dev("device-1", binding=["IsPrepare"], binding_fail=["BindingFailed"])])],
        claims=[one()],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        node_selector=LOCAL1,
        binding=(["IsPrepare"], ["BindingFailed"]),
    ),
    dict(
        id="C45-off",
        features={"binding_conditions": False},
        slices=[slice_("slice-1", devices=[dev("device-1", binding=["IsPrepare"], binding_fail=["BindingFailed"])])],
        claims=[one()],
        expect=UNSCHEDULABLE,
    ),
    # ---- I. consumable capacity
    dict(
        id="C46",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity=range_policy(4))])],
        claims=[one(capacity={"capacity-0": 1}), one("claim-1", capacity={"capacity-0": 1})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-1", "req-0", A + "device-1")],
        consumed=[{"capacity-0": "2"}, {"capacity-0": "2"}],
    ),
    dict(
        id="C48",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity=range_policy(10))])],
        claims=[one(capacity={"capacity-0": 6})],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C49",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity={"capacity-0": 2})])],
        claims=[one(), one("claim-1")],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C49-contrast",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True)])],
        claims=[one(), one("claim-1")],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1"), ("claim-1", "req-0", A + "device-1")],
        consumed=[None, None],
    ),
    dict(
        id="C50-A",
        classes={"class-a": ['device.driver == "driver-a" && device.allowMultipleAllocations == false']},
        slices=[slice_("slice-1", devices=[dev("device-1", capacity={"capacity-0": 1})])],
        claims=[one(capacity={"capacity-0": 1})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        consumed=[None],
    ),
    dict(
        id="C50-B",
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity={"capacity-1": 1})])],
        claims=[one(capacity={"capacity-0": 1})],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C51-A",
        classes=MULTI_CLASS,
        shared={A + "device-1": {"capacity-0": 2}},
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity=range_policy(4))])],
        claims=[one(capacity={"capacity-0": 2})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        consumed=[{"capacity-0": "2"}],
    ),
    dict(
        id="C51-B",
        classes=MULTI_CLASS,
        shared={A + "device-1": {"capacity-0": 2}},
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev("device-1", multi=True, capacity=range_policy(2)),
                    dev("device-2", multi=True, capacity=range_policy(2)),
                ],
            )
        ],
        claims=[one(capacity={"capacity-0": 2})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-2")],
        consumed=[{"capacity-0": "2"}],
    ),
    # Consumed amounts are written as upstream's calculateConsumedCapacity leaves them: a copied
    # quantity keeps its format, a step-rounded one is a new BinarySI quantity (differential run, 6 Dec).
    dict(
        id="C46-spelling-step",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity=STEP_POLICY)])],
        claims=[one(capacity={"bw": "3G"}), one("claim-1", capacity={"bw": "500M"}), one("claim-2")],
        expect=SUCCESS,
        picks=[
            ("claim-0", "req-0", A + "device-1"),
            ("claim-1", "req-0", A + "device-1"),
            ("claim-2", "req-0", A + "device-1"),
        ],
        consumed=[{"bw": "3000000000"}, {"bw": "1G"}, {"bw": "1G"}],
    ),
    dict(
        id="C46-spelling-values",
        classes=MULTI_CLASS,
        slices=[
            slice_(
                "slice-1",
                devices=[
                    dev(
                        "device-1",
                        multi=True,
                        capacity={
                            "bw": {"value": "10Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1G", "2Gi"]}}
                        },
                    )
                ],
            )
        ],
        claims=[one(capacity={"bw": "1500M"})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        consumed=[{"bw": "2Gi"}],
    ),
    dict(
        id="C46-spelling-plain",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity={"bw": "4096"})])],
        claims=[one(capacity={"bw": "1024"})],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-1")],
        consumed=[{"bw": "1024"}],
    ),
    # ---- L. quirks
    dict(
        id="C55-quirk",
        slices=[
            slice_(
                "slice-1",
                count=2,
                devices=[
                    dev(
                        "device-1",
                        consumes={"counter-set-1": {"memory": "4Gi"}},
                        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    ),
                    dev("device-2", consumes={"counter-set-1": {"memory": "4Gi"}}),
                    dev("device-3", consumes={"counter-set-1": {"memory": "4Gi"}}),
                ],
            ),
            slice_("slice-2", count=2, counters={"counter-set-1": {"memory": "8Gi"}}),
        ],
        claims=[one(count=2)],
        expect=UNSCHEDULABLE,
    ),
    dict(
        id="C55-fixed",
        features={"quirk_counter_leak": False},
        slices=[
            slice_(
                "slice-1",
                count=2,
                devices=[
                    dev(
                        "device-1",
                        consumes={"counter-set-1": {"memory": "4Gi"}},
                        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    ),
                    dev("device-2", consumes={"counter-set-1": {"memory": "4Gi"}}),
                    dev("device-3", consumes={"counter-set-1": {"memory": "4Gi"}}),
                ],
            ),
            slice_("slice-2", count=2, counters={"counter-set-1": {"memory": "8Gi"}}),
        ],
        claims=[one(count=2)],
        expect=SUCCESS,
        picks=[("claim-0", "req-0", A + "device-2"), ("claim-0", "req-0", A + "device-3")],
    ),
    dict(
        id="C56",
        classes=MULTI_CLASS,
        slices=[slice_("slice-1", devices=[dev("device-1", multi=True, capacity={"capacity-0": 2})])],
        claims=[one(capacity={"driver-a/capacity-0": 1})],
        expect=UNSCHEDULABLE,
    ),
]


def build(case):
    classes = case.get("classes")
    if "classes_only" in case:
        from .allocator_fixtures import NODES, Inventory, node_obj
        from .allocator_fixtures import Features as F

        return Inventory(
            resource_slices=case["slices"], nodes=[node_obj(n, lbl) for n, lbl in NODES.items()], features=F()
        )
    feats = Features(**case.get("features", {}))
    return inventory(
        case["slices"],
        classes=classes,
        allocated=case.get("allocated", ()),
        shared=case.get("shared", {}),
        features=feats,
    )


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    inv = build(case)
    node = case.get("node", "node-1")
    outcome = allocate(inv, case["claims"], node)
    assert outcome.status == case["expect"], outcome.message
    if "message" in case:
        assert case["message"] in outcome.message
    if case["expect"] != SUCCESS:
        assert outcome.picks == []
        return
    assert picked(outcome) == case["picks"]
    results = [allocation_result(inv, c, picks, node) for c, picks in zip(case["claims"], outcome.picks)]
    if "node_selector" in case:
        assert results[0]["nodeSelector"] == case["node_selector"]
    if "config" in case:
        assert results[0]["devices"]["config"] == case["config"]
    entries = [r for res in results for r in res["devices"]["results"]]
    if case.get("admin"):
        assert all(r.get("adminAccess") is True for r in entries)
    if "tolerations" in case:
        assert [r.get("tolerations") for r in entries] == [case["tolerations"]] * len(entries)
    if "binding" in case:
        assert entries[0]["bindingConditions"] == case["binding"][0]
        assert entries[0]["bindingFailureConditions"] == case["binding"][1]
    if "consumed" in case:
        assert [r.get("consumedCapacity") for r in entries] == case["consumed"]
        for r, p in zip(entries, (p for picks in outcome.picks for p in picks)):
            assert ("shareID" in r) == p.device.multi


# ---- K. scheduler-side derivations


def test_C53_extended_resources_become_one_claim():
    from dra import resolve_claims

    from .allocator_fixtures import device_class

    inv = inventory([slice_("slice-1", devices=["device-1"])])
    inv.classes.clear()
    for raw in (
        dict(
            device_class("fpga-class", ['device.driver == "driver-a"']),
            spec={"extendedResourceName": "example.com/fpga", "selectors": []},
        ),
        dict(
            device_class("gpu-class", ['device.driver == "driver-a"']),
            spec={"extendedResourceName": "example.com/gpu", "selectors": []},
        ),
    ):
        from dra.model import DeviceClassInfo

        inv.classes[raw["metadata"]["name"]] = DeviceClassInfo(raw)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"requests": {"example.com/fpga": "2"}}}],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}],
        },
    }
    claims, bound = resolve_claims(inv, [pod])
    assert bound == []
    (ext,) = claims
    assert ext.name == "<extended-resources>"
    got = [(r.name, r.variants[0].class_name, r.variants[0].mode, r.variants[0].count) for r in ext.requests]
    assert got == [
        ("container-0-request-0", "fpga-class", "ExactCount", 2),
        ("container-1-request-1", "gpu-class", "ExactCount", 1),
    ]


def test_C54_outcome_aggregation_across_nodes():
    from dra import preview

    nodes = {"node-1": {}, "node-2": {}, "node-3": {}}
    slices = [
        slice_("s1", pool="p1", node="node-1", devices=["d"]),
        slice_("s2", pool="p2", node="node-2", devices=["d"]),
        slice_("s3a", pool="p3", node="node-3", count=2, devices=["d"]),
        slice_("s3b", pool="p3", node="node-3", count=2, devices=["d"]),  # duplicate device name: invalid pool
    ]
    inv = inventory(slices, nodes=nodes, allocated=["driver-a/p1/d", "driver-a/p2/d"])
    out = preview(inv, [one()])
    assert [e["fits"] for e in out["nodes"]] == [False, False, False]
    assert (
        out["summary"]["schedulerMessage"]
        == "0/3 nodes are available: 1 invalid resource pools were encountered, 2 cannot allocate all claims."
    )
    assert out["nodes"][2]["reason"].startswith(
        "invalid resource pools were encountered (pool driver-a/p3: duplicate device name d)"
    )


def test_C54_cel_runtime_error_is_a_scheduler_error():
    from dra import preview

    inv = inventory(
        [slice_("slice-1", devices=["device-1"])], classes={"class-a": ['device.attributes["driver-a"].model == "x"']}
    )
    out = preview(inv, [one()])
    assert out["summary"]["schedulerMessage"] == (
        'running "DynamicResources" filter plugin: class class-a: selector #0: CEL runtime error: no such key: model'
    )
