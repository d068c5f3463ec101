"""The unit rule (dra/units.py): whole GPUs, every MIG profile of the A100 and H100 examples of
driver-examples.md (partitionable, with counters, and statically created, with memorySlice
capacities), consumable-capacity shares and admin access, each with the rule and note it states."""

import pytest

from dra.units import ADMIN, CAPACITY, PARTITION_RULE, WHOLE, raw_device_units

DRIVER = "gpu.nvidia.com"
# Per GPU: product name, multiprocessors of the whole GPU, memory slices, and per MIG profile
# (multiprocessors, memory slices it covers): NVML GPU-instance profiles (as tests/dra/test_partitions.py).
A100 = (
    "NVIDIA A100 80GB PCIe",
    98,
    8,
    {"1g.10gb": (14, 1), "2g.20gb": (28, 2), "3g.40gb": (42, 4), "4g.40gb": (56, 4), "7g.80gb": (98, 8)},
)
H100 = (
    "NVIDIA H100 80GB HBM3",
    132,
    8,
    {
        "1g.10gb": (16, 1),
        "1g.20gb": (26, 2),
        "2g.20gb": (32, 2),
        "3g.40gb": (60, 4),
        "4g.40gb": (64, 4),
        "7g.80gb": (132, 8),
    },
)


def counter_set(gpu):
    _model, sms, slices, _profiles = gpu
    counters = {"multiprocessors": {"value": str(sms)}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(slices)})
    return {"name": "gpu-0-counter-set", "counters": counters}


def partitionable(gpu, profile, start=0):
    model, _sms, _slices, profiles = gpu
    sms, size = profiles[profile]
    counters = {"multiprocessors": {"value": str(sms)}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)})
    return {
        "name": f"gpu-0-mig-{profile.replace('.', '')}-{start}",
        "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}, "productName": {"string": model}},
        "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": counters}],
    }


def static_mig(gpu, profile, start=0):
    model, _sms, _slices, profiles = gpu
    sms, size = profiles[profile]
    capacity = {"multiprocessors": {"value": str(sms)}, "memory": {"value": "9728Mi"}}
    capacity.update({f"memorySlice{i}": {"value": "1"} for i in range(start, start + size)})
    return {
        "name": f"gpu-0-mig-{profile.replace('.', '')}-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "parentUUID": {"string": "GPU-1"},
            "productName": {"string": model},
        },
        "capacity": capacity,
    }


MIG_CASES = [
    (name, gpu, profile, size)
    for name, gpu in (("A100", A100), ("H100", H100))
    for profile, (_s, size) in gpu[3].items()
]


@pytest.mark.parametrize(("gpu_name", "gpu", "profile", "slices"), MIG_CASES, ids=[f"{c[0]}-{c[2]}" for c in MIG_CASES])
def test_partitionable_mig_profile_counts_its_memory_slices(gpu_name, gpu, profile, slices):
    units = raw_device_units(DRIVER, "node-1", partitionable(gpu, profile), [counter_set(gpu)])
    assert units.rule == PARTITION_RULE
    assert units.units == slices / 8
    assert units.note == f"{profile}: {slices} of 8 memory slices"


@pytest.mark.parametrize(("gpu_name", "gpu", "profile", "slices"), MIG_CASES, ids=[f"{c[0]}-{c[2]}" for c in MIG_CASES])
def test_static_mig_profile_counts_its_memory_slice_capacities(gpu_name, gpu, profile, slices):
    units = raw_device_units(DRIVER, "node-1", static_mig(gpu, profile))
    assert (units.units, units.rule, units.note) == (
        slices / 8,
        PARTITION_RULE,
        f"{profile}: {slices} of 8 memory slices",
    )


def test_the_example_a100_3g40gb_is_half_a_gpu():
    # driver-examples.md Example B: gpu-0-mig-3g40gb-9-4 covers memorySlice4..7.
    units = raw_device_units(DRIVER, "aks", static_mig(A100, "3g.40gb", start=4))
    assert units.units == 0.5 and units.note == "3g.40gb: 4 of 8 memory slices"


@pytest.mark.parametrize(
    ("device", "counter_sets", "note"),
    [
        # Example A: an H100 published whole, no counters.
        (
            {
                "name": "gpu-0",
                "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
                "capacity": {"memory": {"value": "81559Mi"}},
            },
            [],
            "whole GPU",
        ),
        # The whole GPU of a partitionable pool consumes every counter of its set.
        (
            {
                "name": "gpu-0",
                "attributes": {"type": {"string": "gpu"}},
                "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": counter_set(A100)["counters"]}],
            },
            [counter_set(A100)],
            "whole GPU",
        ),
        # The example driver's devices: no type attribute, no counters.
        (
            {
                "name": "gpu-3",
                "attributes": {"model": {"string": "LATEST-GPU-MODEL"}},
                "capacity": {"memory": {"value": "80Gi"}},
            },
            [],
            "whole device",
        ),
    ],
    ids=["h100-plain", "a100-partitionable-whole", "example-driver"],
)
def test_whole_devices_count_one(device, counter_sets, note):
    units = raw_device_units(DRIVER, "p", device, counter_sets)
    assert (units.units, units.rule, units.note) == (1.0, WHOLE, note)


def shared_gpu():
    return {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"type": {"string": "gpu"}},
        "capacity": {
            "memory": {"value": "80Gi", "requestPolicy": {"default": "1Mi", "validRange": {"min": "1Mi"}}},
            "shares": {"value": "4"},
        },
    }


@pytest.mark.parametrize(
    ("consumed", "units", "note"),
    [
        ({"memory": "20Gi"}, 0.25, "memory: 20Gi of 80Gi"),
        ({"memory": "40Gi", "shares": "1"}, 0.5, "memory: 40Gi of 80Gi"),  # the scarcest capacity decides
        ({"memory": "1Gi", "shares": "2"}, 0.5, "shares: 2 of 4"),
        ({"memory": "80Gi"}, 1.0, "memory: 80Gi of 80Gi"),
    ],
)
def test_consumable_capacity_share_is_consumed_over_capacity(consumed, units, note):
    got = raw_device_units(DRIVER, "p", shared_gpu(), consumed=consumed)
    assert (got.units, got.rule, got.note) == (units, CAPACITY, note)


def test_consumed_capacity_the_device_does_not_offer_leaves_the_device_rule():
    got = raw_device_units(DRIVER, "p", shared_gpu(), consumed={"bandwidth": "10G"})
    assert (got.units, got.rule) == (1.0, WHOLE)


def test_a_share_of_a_partition_is_a_share_of_its_share():
    device = static_mig(A100, "3g.40gb")
    device["allowMultipleAllocations"] = True
    device["capacity"]["memory"] = {"value": "40Gi"}
    got = raw_device_units(DRIVER, "p", device, consumed={"memory": "10Gi"})
    assert (got.units, got.rule) == (0.125, CAPACITY)
    assert got.note == "memory: 10Gi of 40Gi of 3g.40gb: 4 of 8 memory slices"


@pytest.mark.parametrize(
    "device", [shared_gpu(), static_mig(H100, "1g.10gb"), partitionable(A100, "7g.80gb")], ids=["shared", "mig", "pmig"]
)
def test_admin_access_is_counted_apart_with_no_units(device):
    got = raw_device_units(DRIVER, "p", device, [counter_set(A100)], admin_access=True, consumed={"memory": "1Gi"})
    assert (got.units, got.rule) == (0.0, ADMIN)


def test_a_partition_of_unknown_parent_says_so_and_counts_whole():
    device = static_mig(A100, "1g.10gb")
    device["attributes"]["productName"] = {"string": "Mystery GPU"}
    got = raw_device_units(DRIVER, "p", device)
    assert (got.units, got.rule) == (1.0, WHOLE)
    assert got.note == "1g.10gb: share of the parent unknown: counted as a whole device"
    assert raw_device_units(DRIVER, "p", device, parent_slices=4).units == 0.25


def test_counters_without_memory_slices_take_the_largest_share():
    sets = [{"name": "cs", "counters": {"cores": {"value": "8"}, "mem": {"value": "64Gi"}}}]
    device = {
        "name": "part-0",
        "attributes": {"type": {"string": "mig"}},
        "consumesCounters": [{"counterSet": "cs", "counters": {"cores": {"value": "2"}, "mem": {"value": "32Gi"}}}],
    }
    got = raw_device_units("x.example.com", "p", device, sets)
    assert (got.units, got.rule) == (0.5, PARTITION_RULE)
    assert got.note.endswith("of 68719476736 mem")
