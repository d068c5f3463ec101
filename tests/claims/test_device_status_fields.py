"""Reading one `status.devices[]` entry (claims/devicestatus.py): odd list fields are said in `error`
and read as far as they can be, never raised."""

import pytest

from claims.devicestatus import device_status_fields

BASE = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(
    ("extra", "conditions", "ips", "error"),
    [
        ({"conditions": [READY], "networkData": {"ips": ["10.0.0.1/24"]}}, [READY], ["10.0.0.1/24"], ""),
        ({}, [], [], ""),
        ({"conditions": "Ready"}, [], [], 'conditions is not a list: "Ready"'),
        ({"conditions": [READY, "x", 3]}, [READY], [], "an entry of conditions is not an object"),
        (
            {"networkData": {"ips": ["10.0.0.1/24", 7]}},
            [],
            ["10.0.0.1/24", "7"],
            "an entry of networkData.ips is not a string",
        ),
        ({"networkData": {"ips": {"a": 1}}}, [], [], 'networkData.ips is not a list: {"a": 1}'),
    ],
)
def test_list_fields(extra, conditions, ips, error):
    fields = device_status_fields({**BASE, **extra})
    assert (fields["conditions"], fields["ips"], fields["error"]) == (conditions, ips, error)
    assert fields["ready"] is (True if READY in conditions else None)
