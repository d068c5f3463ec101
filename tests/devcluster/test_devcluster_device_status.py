"""The built-in API server's status strategies for claim device status and pod device health:
what a v1.36 apiserver accepts, drops, normalizes, and rejects (422 Invalid, same message and
causes), driven through the real `kubernetes` client over HTTP."""

import json

import pytest
from kubernetes import client

from devcluster.testing import raw_json, running_devcluster

MERGE = "application/merge-patch+json"
DRIVER = "gpu.example.com"
SHARE = "2f0d6a8e-6a0b-4f53-9b3c-0c6e3e1c9a10"


@pytest.fixture
def dc():
    with running_devcluster() as server:
        server.store.create("resourceclaims", allocated_claim("c"))
        server.store.create("pods", pod("p"))
        yield server


def allocated_claim(name, devices=("gpu-0", "gpu-1"), share=None):
    results = [{"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": d} for d in devices]
    if share:
        results.append({"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-2", "shareID": share})
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def pod(name):
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "c"}],
            "initContainers": [{"name": "init", "resources": {"claims": [{"name": "gpus"}]}}],
            "containers": [
                {"name": "main", "resources": {"claims": [{"name": "gpus", "request": "gpu"}]}},
                {"name": "plain", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
            ],
        },
        "status": {"phase": "Running"},
    }


def device(dev="gpu-0", **extra):
    return {"driver": DRIVER, "pool": "node-1", "device": dev, **extra}


def ready(status="True", reason="Prepared", **extra):
    return {"type": "Ready", "status": status, "reason": reason, "lastTransitionTime": "2026-03-01T10:00:00Z", **extra}


def patch_claim(dc, devices, name="c"):
    api = client.ResourceV1Api(dc.api_client())
    body = {"status": {"devices": devices}}
    return raw_json(api.patch_namespaced_resource_claim_status(name, "ns", body, _preload_content=False))


def patch_pod(dc, status):
    api = client.CoreV1Api(dc.api_client())
    return raw_json(api.patch_namespaced_pod_status("p", "ns", {"status": status}, _preload_content=False))


def rejected(call):
    with pytest.raises(client.ApiException) as err:
        call()
    return err.value.status, json.loads(err.value.body)


def causes(body):
    return [(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]]


# --- accepted, and served as the apiserver serves them -----------------------------------------


def test_a_full_device_status_is_stored_and_normalized(dc):
    served = patch_claim(
        dc,
        [
            device(
                conditions=[ready(lastTransitionTime="2026-03-01T12:00:00.750+02:00", observedGeneration=2)],
                data={"driverVersion": "580.65", "mig": {"profile": "3g.40gb"}},
                networkData={
                    "interfaceName": "net1",
                    "ips": ["10.9.8.7/24", "2001:db8::1/64"],
                    "hardwareAddress": "aa",
                },
                unknownField="dropped",
            ),
            device("gpu-1"),
        ],
    )
    first, second = served["status"]["devices"]
    assert first == {
        "driver": DRIVER,
        "pool": "node-1",
        "device": "gpu-0",
        # metav1.Time: UTC, whole seconds; reason and message always present
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-03-01T10:00:00Z",
                "reason": "Prepared",
                "message": "",
            }
        ],
        "data": {"driverVersion": "580.65", "mig": {"profile": "3g.40gb"}},
        "networkData": {"interfaceName": "net1", "ips": ["10.9.8.7/24", "2001:db8::1/64"], "hardwareAddress": "aa"},
    }
    # `conditions` has no omitempty in the v1 type: an entry without conditions says null
    assert second == {"driver": DRIVER, "pool": "node-1", "device": "gpu-1", "conditions": None}
    assert dc.store.get("resourceclaims", "ns", "c")["status"]["devices"] == [first, second]


def test_shared_device_entries_need_the_share_id_of_the_allocation(dc):
    dc.store.create("resourceclaims", allocated_claim("shared", devices=(), share=SHARE))
    served = patch_claim(dc, [device("gpu-2", shareID=SHARE)], name="shared")
    assert served["status"]["devices"][0]["shareID"] == SHARE
    code, body = rejected(lambda: patch_claim(dc, [device("gpu-2")], name="shared"))
    assert code == 422
    assert causes(body) == [
        (
            "status.devices[0]",
            "FieldValueInvalid",
            'Invalid value: {"Driver":"gpu.example.com","Pool":"node-1","Device":"gpu-2","ShareID":""}: '
            "must be an allocated device in the claim",
        )
    ]


def test_deallocation_drops_the_status_of_deallocated_devices(dc):
    patch_claim(dc, [device(conditions=[ready()]), device("gpu-1")])
    api = client.ResourceV1Api(dc.api_client())
    current = raw_json(api.read_namespaced_resource_claim("c", "ns", _preload_content=False))
    current["status"].pop("allocation")
    served = raw_json(api.replace_namespaced_resource_claim_status("c", "ns", current, _preload_content=False))
    assert "devices" not in served["status"]


def test_disabled_gate_drops_new_device_status(dc):
    dc.feature_gates["DRAResourceClaimDeviceStatus"] = ("BETA", False)
    served = patch_claim(dc, [device()])
    assert "devices" not in served["status"]


# --- rejected like the apiserver ----------------------------------------------------------------

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
CIDR_MSG = "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"
REASON_MSG = (
    "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric "
    "characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
    "'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
    "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"
)
NOT_ALLOCATED = "must be an allocated device in the claim"

CLAIM_CASES = [
    (
        "device not in the allocation",
        [device("gpu-7")],
        [
            (
                "status.devices[0]",
                "FieldValueInvalid",
                'Invalid value: {"Driver":"gpu.example.com","Pool":"node-1","Device":"gpu-7","ShareID":""}: '
                + NOT_ALLOCATED,
            )
        ],
    ),
    (
        "duplicate entry",
        [device(), device("gpu-1"), device()],
        [
            (
                "status.devices[2]",
                "FieldValueDuplicate",
                'Duplicate value: {"Driver":"gpu.example.com","Pool":"node-1","Device":"gpu-0","ShareID":""}',
            )
        ],
    ),
    (
        "device name not a DNS label",
        [device("GPU_0")],
        [
            ("status.devices[0].device", "FieldValueInvalid", f'Invalid value: "GPU_0": {LABEL_MSG}'),
            (
                "status.devices[0]",
                "FieldValueInvalid",
                'Invalid value: {"Driver":"gpu.example.com","Pool":"node-1","Device":"GPU_0","ShareID":""}: '
                + NOT_ALLOCATED,
            ),
        ],
    ),
    (
        "driver missing",
        [{"pool": "node-1", "device": "gpu-0"}],
        [
            ("status.devices[0].driver", "FieldValueRequired", "Required value"),
            (
                "status.devices[0]",
                "FieldValueInvalid",
                'Invalid value: {"Driver":"","Pool":"node-1","Device":"gpu-0","ShareID":""}: ' + NOT_ALLOCATED,
            ),
        ],
    ),
    (
        "nine conditions",
        [device(conditions=[ready(type=f"T{i}") for i in range(9)])],
        [("status.devices[0].conditions", "FieldValueTooMany", "Too many: 9: must have at most 8 items")],
    ),
    (
        "condition without reason and time, unsupported status",
        [device(conditions=[{"type": "Ready", "status": "Yes"}])],
        [
            (
                "status.devices[0].conditions[0].status",
                "FieldValueNotSupported",
                'Unsupported value: "Yes": supported values: "False", "True", "Unknown"',
            ),
            ("status.devices[0].conditions[0].lastTransitionTime", "FieldValueRequired", "Required value"),
            ("status.devices[0].conditions[0].reason", "FieldValueRequired", "Required value"),
        ],
    ),
    (
        "condition reason with a space, duplicate type",
        [device(conditions=[ready(), ready(reason="Not ready")])],
        [
            ("status.devices[0].conditions[1].type", "FieldValueDuplicate", 'Duplicate value: "Ready"'),
            (
                "status.devices[0].conditions[1].reason",
                "FieldValueInvalid",
                f'Invalid value: "Not ready": {REASON_MSG}',
            ),
        ],
    ),
    (
        "data over 10Ki",
        [device(data={"blob": "x" * (10 * 1024)})],
        [("status.devices[0].data", "FieldValueTooLong", "Too long: may not be more than 10240 bytes")],
    ),
    (
        "data not an object",
        [device(data=["a", "list"])],
        [
            (
                "status.devices[0].data",
                "FieldValueInvalid",
                'Invalid value: "<value omitted>": must be a valid JSON object',
            )
        ],
    ),
    (
        "interface name and hardware address too long",
        [device(networkData={"interfaceName": "n" * 257, "hardwareAddress": "a" * 129})],
        [
            (
                "status.devices[0].networkData.interfaceName",
                "FieldValueTooLong",
                "Too long: may not be more than 256 bytes",
            ),
            (
                "status.devices[0].networkData.hardwareAddress",
                "FieldValueTooLong",
                "Too long: may not be more than 128 bytes",
            ),
        ],
    ),
    (
        "17 addresses",
        [device(networkData={"ips": [f"10.0.0.{i}/24" for i in range(17)]})],
        [("status.devices[0].networkData.ips", "FieldValueTooMany", "Too many: 17: must have at most 16 items")],
    ),
    (
        "address without prefix, not canonical, duplicate",
        [device(networkData={"ips": ["10.0.0.1", "2001:DB8::1/64", "10.0.0.2/24", "10.0.0.2/24"]})],
        [
            ("status.devices[0].networkData.ips[0]", "FieldValueInvalid", f'Invalid value: "10.0.0.1": {CIDR_MSG}'),
            (
                "status.devices[0].networkData.ips[1]",
                "FieldValueInvalid",
                'Invalid value: "2001:DB8::1/64": must be in canonical form ("2001:db8::1/64")',
            ),
            ("status.devices[0].networkData.ips[3]", "FieldValueDuplicate", 'Duplicate value: "10.0.0.2/24"'),
        ],
    ),
    (
        "share ID not a UUID",
        [device(shareID="ABC")],
        [
            (
                "status.devices[0].shareID",
                "FieldValueInvalid",
                'Invalid value: "ABC": error validating uid: invalid UUID length: 3',
            ),
            (
                "status.devices[0]",
                "FieldValueInvalid",
                'Invalid value: {"Driver":"gpu.example.com","Pool":"node-1","Device":"gpu-0","ShareID":"ABC"}: '
                + NOT_ALLOCATED,
            ),
        ],
    ),
]


@pytest.mark.parametrize("devices,expected", [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES])
def test_invalid_device_status_is_rejected_with_the_apiservers_causes(dc, devices, expected):
    before = dc.store.get("resourceclaims", "ns", "c")
    code, body = rejected(lambda: patch_claim(dc, devices))
    assert code == 422
    assert body["reason"] == "Invalid" and body["kind"] == "Status" and body["code"] == 422
    assert body["details"]["name"] == "c" and body["details"]["kind"] == "ResourceClaim"
    assert body["details"]["group"] == "resource.k8s.io"
    assert causes(body) == expected
    texts = [f"{field}: {message}" for field, _, message in expected]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert body["message"] == f'ResourceClaim.resource.k8s.io "c" is invalid: {joined}'
    assert dc.store.get("resourceclaims", "ns", "c") == before  # nothing stored


def test_a_value_of_the_wrong_type_is_a_bad_request(dc):
    code, body = rejected(lambda: patch_claim(dc, [device(conditions="Ready")]))
    assert code == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal string into '
        "Go struct field AllocatedDeviceStatus.status.devices.conditions of type []v1.Condition"
    )


def test_the_store_itself_keeps_what_a_test_plants(dc):
    """Tests plant states the API would refuse (a lax or older server) through the store directly."""
    claim = dc.store.get("resourceclaims", "ns", "c")
    claim["status"]["devices"] = [{"driver": 5, "conditions": "not a list"}]
    dc.store.update("resourceclaims", claim, subresource="status")
    assert dc.store.get("resourceclaims", "ns", "c")["status"]["devices"][0]["driver"] == 5


# --- pod allocatedResourcesStatus ---------------------------------------------------------------


def health(name, *resources):
    return {"name": name, "resources": list(resources)}


def test_pod_device_health_is_stored(dc):
    status = {
        "initContainerStatuses": [
            {
                "name": "init",
                "allocatedResourcesStatus": [health("claim:gpus", {"resourceID": "a", "health": "Healthy"})],
            }
        ],
        "containerStatuses": [
            {
                "name": "main",
                "allocatedResourcesStatus": [
                    health(
                        "claim:gpus/gpu",
                        {"resourceID": "gpu.example.com/node-1/gpu-0", "health": "Unhealthy", "message": "XID 79"},
                        {"resourceID": "gpu.example.com/node-1/gpu-1", "health": "Healthy", "extra": 1},
                    ),
                ],
            },
            {
                "name": "plain",
                "allocatedResourcesStatus": [health("nvidia.com/gpu", {"resourceID": "GPU-1", "health": "Unknown"})],
            },
        ],
    }
    served = patch_pod(dc, status)["status"]
    main = served["containerStatuses"][0]["allocatedResourcesStatus"]
    assert main == [
        health(
            "claim:gpus/gpu",
            {"resourceID": "gpu.example.com/node-1/gpu-0", "health": "Unhealthy", "message": "XID 79"},
            {"resourceID": "gpu.example.com/node-1/gpu-1", "health": "Healthy"},
        ),
    ]
    assert served["initContainerStatuses"][0]["allocatedResourcesStatus"][0]["name"] == "claim:gpus"


def test_health_message_dropped_while_its_gate_is_off(dc):
    dc.feature_gates["ResourceHealthStatusMessage"] = ("BETA", False)
    served = patch_pod(
        dc,
        {
            "containerStatuses": [
                {
                    "name": "main",
                    "allocatedResourcesStatus": [
                        health("claim:gpus/gpu", {"resourceID": "a", "health": "Unhealthy", "message": "XID"})
                    ],
                }
            ]
        },
    )
    assert served["status"]["containerStatuses"][0]["allocatedResourcesStatus"][0]["resources"] == [
        {"resourceID": "a", "health": "Unhealthy"}
    ]


CLAIM_NAME_MSG = (
    "must match one of the container's resource claims in a format 'claim:<claimName>/<request>' or "
    "'claim:<claimName>' if request is empty"
)
POD_CASES = [
    (
        "claim not referenced by the container",
        {
            "containerStatuses": [
                {
                    "name": "main",
                    "allocatedResourcesStatus": [health("claim:other/gpu", {"resourceID": "a", "health": "Healthy"})],
                }
            ]
        },
        [
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].name",
                "FieldValueInvalid",
                f'Invalid value: "claim:other/gpu": {CLAIM_NAME_MSG}',
            )
        ],
    ),
    (
        "request missing from the name",
        {
            "containerStatuses": [
                {
                    "name": "main",
                    "allocatedResourcesStatus": [health("claim:gpus", {"resourceID": "a", "health": "Healthy"})],
                }
            ]
        },
        [
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].name",
                "FieldValueInvalid",
                f'Invalid value: "claim:gpus": {CLAIM_NAME_MSG}',
            )
        ],
    ),
    (
        "resource the container does not request",
        {
            "containerStatuses": [
                {
                    "name": "plain",
                    "allocatedResourcesStatus": [health("example.com/fpga", {"resourceID": "a", "health": "Healthy"})],
                }
            ]
        },
        [
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].name",
                "FieldValueInvalid",
                'Invalid value: "example.com/fpga": must match one of the container\'s resource requests',
            )
        ],
    ),
    (
        "health value, empty message, duplicate resource ID",
        {
            "containerStatuses": [
                {
                    "name": "main",
                    "allocatedResourcesStatus": [
                        health(
                            "claim:gpus/gpu",
                            {"resourceID": "a", "health": "Broken", "message": ""},
                            {"resourceID": "a", "health": "Healthy", "message": "m" * 1025},
                        )
                    ],
                }
            ]
        },
        [
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].health",
                "FieldValueNotSupported",
                'Unsupported value: "Broken": supported values: "Healthy", "Unhealthy", "Unknown"',
            ),
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].message",
                "FieldValueRequired",
                "Required value: must be non-empty if specified",
            ),
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].resources[1].message",
                "FieldValueTooLong",
                "Too long: may not be more than 1024 bytes",
            ),
            (
                "status.containerStatuses[0].allocatedResourcesStatus[0].resources[1].resourceID",
                "FieldValueDuplicate",
                'Duplicate value: "a"',
            ),
        ],
    ),
    (
        "health missing",
        {
            "initContainerStatuses": [
                {"name": "init", "allocatedResourcesStatus": [health("claim:gpus", {"resourceID": "a"})]}
            ]
        },
        [
            (
                "status.initContainerStatuses[0].allocatedResourcesStatus[0].resources[0].health",
                "FieldValueNotSupported",
                'Unsupported value: "": supported values: "Healthy", "Unhealthy", "Unknown"',
            )
        ],
    ),
    (
        "ephemeral container",
        {
            "ephemeralContainerStatuses": [
                {
                    "name": "debug",
                    "allocatedResourcesStatus": [health("claim:gpus", {"resourceID": "a", "health": "Healthy"})],
                }
            ]
        },
        [
            (
                "status.ephemeralContainerStatuses[0].allocatedResourcesStatus",
                "FieldValueForbidden",
                "Forbidden: must not be specified in container status",
            )
        ],
    ),
]


@pytest.mark.parametrize("status,expected", [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_invalid_pod_health_is_rejected_with_the_apiservers_causes(dc, status, expected):
    code, body = rejected(lambda: patch_pod(dc, status))
    assert code == 422 and body["reason"] == "Invalid"
    assert body["details"] == {"name": "p", "kind": "Pod", "causes": body["details"]["causes"]}  # no group: core
    assert causes(body) == expected
    texts = [f"{field}: {message}" for field, _, message in expected]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert body["message"] == f'Pod "p" is invalid: {joined}'


def test_a_status_of_a_container_not_in_the_spec_is_not_checked_by_name(dc):
    served = patch_pod(
        dc,
        {
            "containerStatuses": [
                {
                    "name": "ghost",
                    "allocatedResourcesStatus": [health("claim:x/y", {"resourceID": "a", "health": "Healthy"})],
                }
            ]
        },
    )
    assert served["status"]["containerStatuses"][0]["allocatedResourcesStatus"][0]["name"] == "claim:x/y"


# --- v1.37 ------------------------------------------------------------------------------------


def test_a_v1_37_server_serves_device_taint_rules_as_v1_and_the_same_status_shapes():
    with running_devcluster() as dc:
        dc.serve_kubernetes_version(37)
        version = client.VersionApi(dc.api_client()).get_code()
        assert (version.major, version.minor) == ("1", "37")
        groups = client.ApisApi(dc.api_client()).get_api_versions().groups
        assert [v.version for g in groups if g.name == "resource.k8s.io" for v in g.versions] == ["v1"]
        dc.store.create(
            "devicetaintrules",
            {
                "metadata": {"name": "xid-79"},
                "spec": {
                    "deviceSelector": {"driver": DRIVER},
                    "taint": {"key": "gpu.example.com/xid", "effect": "NoExecute"},
                },
            },
        )
        api = client.ResourceV1Api(dc.api_client())
        rule = raw_json(api.read_device_taint_rule("xid-79", _preload_content=False))
        assert rule["apiVersion"] == "resource.k8s.io/v1" and rule["spec"]["taint"]["effect"] == "NoExecute"
        assert raw_json(api.list_device_taint_rule(_preload_content=False))["apiVersion"] == "resource.k8s.io/v1"
        dc.store.create("resourceclaims", allocated_claim("c"))
        served = patch_claim(dc, [device(conditions=[ready()], networkData={"ips": ["10.0.0.1/8"]})])
        assert served["status"]["devices"][0]["networkData"] == {"ips": ["10.0.0.1/8"]}
        code, _ = rejected(lambda: patch_claim(dc, [device("gpu-9")]))
        assert code == 422
