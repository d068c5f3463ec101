"""Differences found by comparing the engine with the real v1.36 allocator, kept as data.

Each case is raw Kubernetes JSON (classes, slices, claims to place, allocated claims, features) and
what the vendored upstream allocator (k8s.io/dynamic-resource-allocation/structured, v1.36,
incubating) answered on `node-1`: status, picks and, for errors, the message. They were found by a
differential run on random fleets (admin access, selectors raising CEL errors, All, firstAvailable,
per-device node selection, constraints, feature gates) and checked one by one against that
allocator; the engine got each of them wrong before the fix named in `why`.
"""

GPU = "gpu.example.com"
NIC = "nic.example.com"
GPU_CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}
NIC_CLASS = {"metadata": {"name": "nic"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NIC}"'}}]}}
ANY_CLASS = {"metadata": {"name": "any"}, "spec": {}}
CLASSES = [GPU_CLASS, NIC_CLASS, ANY_CLASS]
READS_GPU_MODEL = f'device.attributes["{GPU}"].model == "a"'  # "no such key: model" on NICs
NODES = [
    {"metadata": {"name": "node-1", "labels": {"zone": "z1"}}},
    {"metadata": {"name": "node-2", "labels": {"zone": "z2"}}},
]


def device(name, **attrs):
    d = {"name": name}
    if attrs:
        d["attributes"] = {k: ({"string": v} if isinstance(v, str) else {"int": v}) for k, v in attrs.items()}
    return d


def slice_(name, driver, pool, devices, node="node-1", count=1, **spec):
    s = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}, **spec}
    if node and "perDeviceNodeSelection" not in spec and "sharedCounters" not in spec:
        s["nodeName"] = node
    if devices is not None:
        s["devices"] = devices
    return {"metadata": {"name": name}, "spec": s}


def exactly(cls, count=1, mode="ExactCount", selectors=(), admin=False):
    e = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        e["count"] = count
    if selectors:
        e["selectors"] = [{"cel": {"expression": x}} for x in selectors]
    if admin:
        e["adminAccess"] = True
    return e


def request(name, cls, **kw):
    return {"name": name, "exactly": exactly(cls, **kw)}


def first_available(name, *subs):
    return {"name": name, "firstAvailable": [dict(exactly(cls, **kw), name=sub) for sub, cls, kw in subs]}


def claim(name, *requests, constraints=None):
    devices = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def allocated(name, *device_ids, admin=False):
    results = []
    for did in device_ids:
        driver, pool, dev = did.split("/")
        r = {"request": "r", "driver": driver, "pool": pool, "device": dev}
        if admin:
            r["adminAccess"] = True
        results.append(r)
    return {
        "metadata": {"name": name, "namespace": "other"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


TWO_GPUS = [slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a"), device("gpu-1", model="a")])]
ONE_GPU_ONE_NIC = [
    slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a")]),
    slice_("node-1-nic", NIC, "node-1-nic", [device("nic-0", speed=100)]),
]
ALL_FEATURES = dict(
    admin_access=True,
    prioritized_list=True,
    partitionable_devices=True,
    device_taints=True,
    binding_conditions=True,
    consumable_capacity=True,
)

CASES = [
    # ---- 1. admin access: a device picked with adminAccess is "allocating" and blocks later non-admin requests
    dict(
        id="admin-then-plain-same-claim",
        why="admin picks were not marked in use",
        slices=TWO_GPUS,
        claims=[claim("c", request("admin", "gpu", admin=True), request("plain", "gpu"))],
        expect="success",
        picks=[
            ("default/c", "admin", f"{GPU}/node-1-gpu/gpu-0", True),
            ("default/c", "plain", f"{GPU}/node-1-gpu/gpu-1", False),
        ],
    ),
    dict(
        id="admin-then-plain-other-claim",
        why="admin picks were not marked in use",
        slices=TWO_GPUS,
        claims=[claim("a", request("admin", "gpu", admin=True)), claim("b", request("plain", "gpu"))],
        expect="success",
        picks=[
            ("default/a", "admin", f"{GPU}/node-1-gpu/gpu-0", True),
            ("default/b", "plain", f"{GPU}/node-1-gpu/gpu-1", False),
        ],
    ),
    dict(
        id="admin-then-plain-one-device",
        why="admin picks were not marked in use",
        slices=TWO_GPUS[:0] + [slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a")])],
        claims=[claim("c", request("admin", "gpu", admin=True), request("plain", "gpu"))],
        expect="unschedulable",
    ),
    dict(
        id="plain-then-admin-other-claim-reuses",
        why="(kept as is) an admin request of a later claim may take a device picked by an earlier claim",
        slices=[slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a")])],
        claims=[claim("a", request("plain", "gpu")), claim("b", request("admin", "gpu", admin=True))],
        expect="success",
        picks=[
            ("default/a", "plain", f"{GPU}/node-1-gpu/gpu-0", False),
            ("default/b", "admin", f"{GPU}/node-1-gpu/gpu-0", True),
        ],
    ),
    dict(
        id="admin-twice-same-claim",
        why="(kept as is) one claim never gets a device twice",
        slices=TWO_GPUS,
        claims=[claim("c", request("a1", "gpu", admin=True), request("a2", "gpu", admin=True))],
        expect="success",
        picks=[
            ("default/c", "a1", f"{GPU}/node-1-gpu/gpu-0", True),
            ("default/c", "a2", f"{GPU}/node-1-gpu/gpu-1", True),
        ],
    ),
    dict(
        id="admin-then-plain-errors-on-reached-device",
        why="the plain request skipped the admin device, then reached the NIC",
        slices=ONE_GPU_ONE_NIC,
        claims=[claim("c", request("admin", "gpu", admin=True), request("plain", "any", selectors=[READS_GPU_MODEL]))],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: no such key: model",
    ),
    # ---- 2. CEL runtime errors on devices upstream reaches are errors, never "does not fit"
    dict(
        id="nic-request-reads-gpu-attribute",
        why="(kept as is) the issue's example in its plain form: the NIC is reached, its selector raises",
        slices=ONE_GPU_ONE_NIC,
        claims=[claim("c", request("gpu", "gpu"), request("nic", "nic", selectors=[READS_GPU_MODEL]))],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="first-available-raises-before-hopeless-request",
        why="the no-solution shortcut skipped past a firstAvailable request that raises",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim(
                "c",
                first_available("any", ("s0", "any", dict(selectors=[READS_GPU_MODEL]))),
                request("gpus", "gpu", count=2),
            )
        ],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="admin-request-raises-before-hopeless-request",
        why="the no-solution shortcut skipped past an admin request that raises",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim(
                "c", request("watch", "any", admin=True, selectors=[READS_GPU_MODEL]), request("gpus", "gpu", count=2)
            )
        ],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="per-device-node-selection-other-node-raises",
        why="devices of a perDeviceNodeSelection slice on other nodes are evaluated before their node check",
        slices=[
            slice_(
                "shared-gpu",
                GPU,
                "shared-gpu",
                [dict(device("gpu-0"), nodeName="node-2"), dict(device("gpu-1", model="a"), nodeName="node-1")],
                node=None,
                perDeviceNodeSelection=True,
            )
        ],
        claims=[claim("c", request("gpu", "gpu", selectors=[READS_GPU_MODEL]))],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="allocated-device-is-never-evaluated",
        why="(kept as is) in-use devices are skipped before their selectors",
        slices=ONE_GPU_ONE_NIC,
        allocated=[allocated("taken", f"{NIC}/node-1-nic/nic-0")],
        claims=[claim("c", request("x", "any", selectors=[READS_GPU_MODEL]))],
        expect="success",
        picks=[("default/c", "x", f"{GPU}/node-1-gpu/gpu-0", False)],
    ),
    dict(
        id="all-with-constraint-before-hopeless-request",
        why="an All request whose device breaks a constraint is an error; the shortcut skipped it",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim(
                "c",
                request("every", "any", mode="All"),
                request("gpus", "gpu", count=2),
                constraints=[{"matchAttribute": f"{GPU}/model"}],
            )
        ],
        expect="error",
        message=f"claim default/c, request every: cannot add device {NIC}/node-1-nic/nic-0 because a claim constraint would not be satisfied",
    ),
    # ---- up-front checks interleave with All lists (which evaluate selectors) in upstream order
    dict(
        id="all-list-error-before-missing-class",
        why="a later claim's missing class was reported first",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim("a", request("every", "any", mode="All", selectors=[READS_GPU_MODEL])),
            claim("b", request("x", "no-such-class")),
        ],
        expect="error",
        message="claim default/a: selector #0: CEL runtime error: no such key: model",
    ),
    dict(
        id="missing-class-before-all-list",
        why="(kept as is) the first claim's check comes first",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim("a", request("x", "no-such-class")),
            claim("b", request("every", "any", mode="All", selectors=[READS_GPU_MODEL])),
        ],
        expect="error",
        message_start="claim default/a, request x: could not retrieve device class no-such-class",
    ),
    # ---- feature gates
    dict(
        id="partitionable-off-ignores-counter-slices",
        why="an incomplete counter-only pool made an All request fail",
        features=dict(ALL_FEATURES, partitionable_devices=False),
        slices=ONE_GPU_ONE_NIC
        + [
            slice_(
                "node-2-gpu-counters",
                GPU,
                "node-2-gpu",
                None,
                node=None,
                count=2,
                sharedCounters=[{"name": "cs", "counters": {"mem": {"value": "4"}}}],
            )
        ],
        claims=[claim("c", request("every", "gpu", mode="All"))],
        expect="success",
        picks=[("default/c", "every", f"{GPU}/node-1-gpu/gpu-0", False)],
    ),
    dict(
        id="admin-access-gate-wording",
        why="message wording",
        features=dict(ALL_FEATURES, admin_access=False),
        slices=TWO_GPUS,
        claims=[claim("c", request("w", "gpu", admin=True))],
        expect="error",
        message="claim default/c, request w: admin access is requested, but the feature is disabled",
    ),
    # ---- CEL runtime error wording is cel-go's
    dict(
        id="cel-division-by-zero-wording",
        why="the engine's CEL says 'divide by zero', cel-go 'division by zero'",
        slices=ONE_GPU_ONE_NIC,
        claims=[claim("c", request("nic", "nic", selectors=[f'device.attributes["{NIC}"].speed / 0 == 1']))],
        expect="error",
        message="claim default/c: selector #0: CEL runtime error: division by zero",
    ),
    # ---- errors name a subrequest by its own name (upstream formats them with the subrequest's name())
    dict(
        id="subrequest-all-incomplete-pool-wording",
        why="the engine said `request r/s0`",
        slices=[slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a")], count=2)],
        claims=[claim("c", first_available("r", ("s0", "gpu", dict(mode="All"))))],
        expect="error",
        message=f"claim default/c, request s0: asks for all devices, but resource pool {GPU}/node-1-gpu is currently being updated",
    ),
    dict(
        id="subrequest-all-constraint-wording",
        why="the engine said `request r/s0`",
        slices=ONE_GPU_ONE_NIC,
        claims=[
            claim(
                "c",
                first_available("r", ("s0", "any", dict(mode="All"))),
                constraints=[{"matchAttribute": f"{GPU}/model"}],
            )
        ],
        expect="error",
        message=f"claim default/c, request s0: cannot add device {NIC}/node-1-nic/nic-0 because a claim constraint would not be satisfied",
    ),
    # ---- consumable capacity: an All list leaves out a shareable device its persisted shares have filled
    dict(
        id="all-skips-shared-device-without-room",
        why="the All list checked capacity only for requests with capacity requests",
        slices=[
            slice_(
                "node-1-gpu",
                GPU,
                "node-1-gpu",
                [
                    dict(
                        device("gpu-0", model="a"),
                        allowMultipleAllocations=True,
                        capacity={"memory": {"value": "80Gi"}},
                    ),
                    device("gpu-1", model="a"),
                ],
            )
        ],
        allocated=[
            {
                "metadata": {"name": "taken", "namespace": "other"},
                "spec": {"devices": {"requests": []}},
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "r",
                                    "driver": GPU,
                                    "pool": "node-1-gpu",
                                    "device": "gpu-0",
                                    "shareID": "00000000-0000-0000-0000-000000000001",
                                    "consumedCapacity": {"memory": "10Gi"},
                                }
                            ]
                        }
                    }
                },
            }
        ],
        claims=[claim("c", request("every", "gpu", mode="All"))],
        expect="success",
        picks=[("default/c", "every", f"{GPU}/node-1-gpu/gpu-1", False)],
    ),
    # ---- consumable capacity + counters: a shareable device's counters are charged by its first share only
    dict(
        id="second-share-of-capacityless-device-skips-counters",
        why="a share of a device without capacities was not recorded, so its counters were charged twice",
        slices=[
            slice_(
                "node-1-counters",
                GPU,
                "node-1-gpu",
                None,
                node=None,
                count=2,
                sharedCounters=[{"name": "cs", "counters": {"sm": {"value": "7"}}}],
            ),
            slice_(
                "node-1-gpu",
                GPU,
                "node-1-gpu",
                [
                    dict(
                        device("gpu-0", model="a"),
                        allowMultipleAllocations=True,
                        consumesCounters=[{"counterSet": "cs", "counters": {"sm": {"value": "4"}}}],
                    )
                ],
                count=2,
            ),
        ],
        claims=[claim("c", request("a", "gpu"), request("b", "gpu"))],
        expect="success",
        picks=[
            ("default/c", "a", f"{GPU}/node-1-gpu/gpu-0", False),
            ("default/c", "b", f"{GPU}/node-1-gpu/gpu-0", False),
        ],
    ),
    # ---- consumable capacity: a request above every validValues entry violates the policy
    dict(
        id="capacity-request-above-valid-values",
        why="the engine consumed the request as it was",
        slices=[
            slice_(
                "node-1-nic",
                NIC,
                "node-1-nic",
                [
                    dict(
                        device("nic-0", speed=100),
                        allowMultipleAllocations=True,
                        capacity={
                            "bandwidth": {
                                "value": "100G",
                                "requestPolicy": {"default": "10G", "validValues": ["10G", "25G", "50G"]},
                            }
                        },
                    )
                ],
            )
        ],
        claims=[
            claim("c", {"name": "r", "exactly": dict(exactly("nic"), capacity={"requests": {"bandwidth": "60G"}})})
        ],
        expect="unschedulable",
    ),
    # ---- distinctAttribute is honoured whatever the gates (the allocator does not look at DRAConsumableCapacity for it)
    dict(
        id="distinct-attribute-with-consumable-capacity-off",
        why="the engine called it an empty constraint",
        features=dict(ALL_FEATURES, consumable_capacity=False),
        slices=TWO_GPUS,
        claims=[claim("c", request("gpus", "gpu", count=2), constraints=[{"distinctAttribute": f"{GPU}/model"}])],
        expect="unschedulable",
    ),
    dict(
        id="distinct-attribute-with-consumable-capacity-off-fits",
        why="the engine called it an empty constraint",
        features=dict(ALL_FEATURES, consumable_capacity=False),
        slices=[slice_("node-1-gpu", GPU, "node-1-gpu", [device("gpu-0", model="a"), device("gpu-1", model="b")])],
        claims=[claim("c", request("gpus", "gpu", count=2), constraints=[{"distinctAttribute": f"{GPU}/model"}])],
        expect="success",
        picks=[
            ("default/c", "gpus", f"{GPU}/node-1-gpu/gpu-0", False),
            ("default/c", "gpus", f"{GPU}/node-1-gpu/gpu-1", False),
        ],
    ),
    # ---- consumable capacity off: a persisted share blocks its device (the scheduler gathers only dedicated devices)
    dict(
        id="consumable-off-persisted-share-blocks-device",
        why="the engine kept the share apart and left the device free",
        features=dict(ALL_FEATURES, consumable_capacity=False),
        slices=[
            slice_(
                "node-1-gpu",
                GPU,
                "node-1-gpu",
                [dict(device("gpu-0", model="a"), allowMultipleAllocations=True), device("gpu-1", model="a")],
            )
        ],
        allocated=[
            {
                "metadata": {"name": "taken", "namespace": "other"},
                "spec": {"devices": {"requests": []}},
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "r",
                                    "driver": GPU,
                                    "pool": "node-1-gpu",
                                    "device": "gpu-0",
                                    "shareID": "00000000-0000-0000-0000-000000000001",
                                }
                            ]
                        }
                    }
                },
            }
        ],
        claims=[claim("c", request("gpu", "gpu"))],
        expect="success",
        picks=[("default/c", "gpu", f"{GPU}/node-1-gpu/gpu-1", False)],
    ),
]


def as_harness_input(case):
    """The case as the differential harness (and the engine) read it."""
    return {
        "features": case.get("features", ALL_FEATURES),
        "slices": case["slices"],
        "classes": CLASSES,
        "claims": case["claims"],
        "allocated": case.get("allocated", []),
        "nodes": NODES,
    }
