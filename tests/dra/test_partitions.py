"""Partition-aware capacity (dra/partitions.py): counts against hand-worked counter arithmetic for
A100 and H100 MIG shapes, and against the engine itself on random small pools."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra import Features, allocate, partitions
from dra.search import SUCCESS

from .allocator_fixtures import claim, dev, inventory, req, slice_

FIXED = Features(quirk_counter_leak=False)

# Per GPU model: (multiprocessors, memory slices) of the whole GPU, and per profile
# (multiprocessors, memory slices per placement, placement starts): NVML GPU-instance profiles
# as the NVIDIA driver publishes them (driver-examples: one device per placement, consuming its
# multiprocessors and memory-slice-<i> counters of the GPU's counter set).
A100 = (98, 8, {"1g.10gb": (14, 1, range(7)), "2g.20gb": (28, 2, (0, 2, 4)), "3g.40gb": (42, 4, (0, 4))})
H100 = (
    132,
    8,
    {
        "1g.10gb": (16, 1, range(7)),
        "1g.20gb": (26, 2, (0, 2, 4, 6)),
        "2g.20gb": (32, 2, (0, 2, 4)),
        "3g.40gb": (60, 4, (0, 4)),
        "4g.40gb": (64, 4, (0,)),
        "7g.80gb": (132, 8, (0,)),
    },
)


def mig_pool(shape, gpus=1, pool="pool-1", node="node-1", taint=()):
    """Slices of one node's partitionable pool: per GPU a counter set, the whole GPU and every placement."""
    sms, n_slices, profiles = shape
    sets, devices = {}, []
    for g in range(gpus):
        cs = f"gpu-{g}-counter-set"
        sets[cs] = {"multiprocessors": sms, **{f"memory-slice-{i}": 1 for i in range(n_slices)}}
        devices.append(dev(f"gpu-{g}", attrs={"type": "gpu", "productName": "GPU"}, consumes={cs: sets[cs]}))
        for profile, (p_sms, size, starts) in profiles.items():
            for start in starts:
                name = f"gpu-{g}-mig-{profile.replace('.', '')}-{start}"
                counters = {"multiprocessors": p_sms, **{f"memory-slice-{i}": 1 for i in range(start, start + size)}}
                devices.append(
                    dev(
                        name,
                        attrs={"type": "mig", "profile": profile, "productName": "GPU"},
                        consumes={cs: counters},
                        taints=[{"key": "bad", "effect": "NoSchedule"}] if name in taint else None,
                    )
                )
    return [
        slice_(f"{pool}-counters", pool=pool, node=node, count=2, counters=sets),
        slice_(f"{pool}-devices", pool=pool, node=node, count=2, devices=devices),
    ]


def figures(slices, allocated=(), features=None, pool="pool-1", node="node-1"):
    inv = inventory(slices, allocated=[f"driver-a/{pool}/{d}" for d in allocated], features=features)
    return partitions.capacity(inv)[("driver-a", pool)][(node, "GPU")]


def free(cap):
    return {p: c.free for p, c in cap.profiles.items()}


def test_empty_a100_counts_each_profile_alone_not_summed():
    cap = figures(mig_pool(A100))
    # 12 partition devices are published; at most 7 x 1g (7 slices, 7 x 14 = 98 SMs), 3 x 2g, 2 x 3g.
    assert free(cap) == {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2}
    assert {p: c.total for p, c in cap.profiles.items()} == free(cap)
    assert (cap.gpus, cap.gpus_free, cap.stranded) == (1, 1, 0)


def test_a100_partly_used_by_a_3g_placement():
    # 3g.40gb at 4 takes slices 4-7 and 42 SMs: left slices 0-3 and 56 SMs.
    cap = figures(mig_pool(A100), allocated=["gpu-0-mig-3g40gb-4"])
    # 1g: placements 0-3 free, 56 // 14 = 4; 2g: placements 0, 2 (4 overlaps), 56 // 28 = 2;
    # 3g: placement 0 (slices 0-3), 56 // 42 = 1.
    assert free(cap) == {"1g.10gb": 4, "2g.20gb": 2, "3g.40gb": 1}
    assert (cap.gpus, cap.gpus_free, cap.stranded) == (1, 0, 1)


def test_a100_overlapping_placements_in_use():
    # 2g at 0 (slices 0-1, 28 SMs) and 1g at 5 (slice 5, 14 SMs): 56 SMs, slices 2-4, 6-7 left.
    cap = figures(mig_pool(A100), allocated=["gpu-0-mig-2g20gb-0", "gpu-0-mig-1g10gb-5"])
    # 1g: placements 2, 3, 4, 6 (slice 7 has no 1g placement), 56 // 14 = 4 -> 4.
    # 2g: placement 2 only (4 needs slice 5), 3g: none (0 needs 0-1, 4 needs 5).
    assert free(cap) == {"1g.10gb": 4, "2g.20gb": 1, "3g.40gb": 0}
    assert cap.stranded == 1


def test_a100_whole_gpu_allocated_leaves_nothing():
    cap = figures(mig_pool(A100, gpus=2), allocated=["gpu-0"])
    # The whole gpu-0 consumes its whole counter set: only gpu-1's placements remain.
    assert free(cap) == {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2}
    assert {p: c.total for p, c in cap.profiles.items()} == {"1g.10gb": 14, "2g.20gb": 6, "3g.40gb": 4}
    assert (cap.gpus, cap.gpus_free, cap.stranded) == (2, 1, 0)


def test_a100_full_of_partitions_is_not_stranded():
    cap = figures(mig_pool(A100), allocated=[f"gpu-0-mig-1g10gb-{i}" for i in range(7)])
    # 7 x 14 = 98 SMs: nothing left, slice 7 alone serves no profile.
    assert free(cap) == {"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0}
    assert (cap.gpus_free, cap.stranded) == (0, 0)


def test_h100_multiprocessors_bind_before_memory_slices():
    # 3g.40gb at 4: slices 4-7 and 60 SMs; 72 SMs and slices 0-3 left.
    cap = figures(mig_pool(H100), allocated=["gpu-0-mig-3g40gb-4"])
    # 1g.10gb: placements 0-3, 72 // 16 = 4 -> 4; 1g.20gb: 0, 2 -> 2 (72 // 26 = 2);
    # 2g.20gb: 0, 2 -> 2 (72 // 32 = 2); 3g.40gb: 0 -> 1 (72 // 60); 4g.40gb: 0 needs 64 <= 72 -> 1;
    # 7g: 0.
    assert free(cap) == {"1g.10gb": 4, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 1, "4g.40gb": 1, "7g.80gb": 0}
    # Two 1g.10gb more (2 x 16) leave 40 SMs: 3g.40gb (60) no longer fits though slices 0-1... are free.
    cap = figures(mig_pool(H100), allocated=["gpu-0-mig-3g40gb-4", "gpu-0-mig-1g10gb-2", "gpu-0-mig-1g10gb-3"])
    # SMs 132 - 60 - 32 = 40: 1g.10gb at 0, 1 (40 // 16 = 2); 1g.20gb at 0 (26 <= 40, one); 2g at 0 (32).
    assert free(cap) == {"1g.10gb": 2, "1g.20gb": 1, "2g.20gb": 1, "3g.40gb": 0, "4g.40gb": 0, "7g.80gb": 0}
    assert cap.stranded == 1


def test_h100_empty_counts():
    cap = figures(mig_pool(H100))
    # 1g.10gb: 7 placements, 132 // 16 = 8 -> 7; 1g.20gb: 4 placements, 132 // 26 = 5 -> 4;
    # 2g.20gb 3 (96 SMs); 3g.40gb 2 (120); 4g.40gb 1; 7g.80gb 1.
    assert free(cap) == {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}


def test_tainted_placements_and_gpus_are_not_counted():
    cap = figures(mig_pool(A100, taint={"gpu-0-mig-3g40gb-0"}), allocated=["gpu-0-mig-1g10gb-6"])
    # 3g at 0 is tainted, 3g at 4 overlaps the allocated 1g at 6: no 3g; 1g: 0-5 -> 6 (84 // 14 = 6).
    assert free(cap)["3g.40gb"] == 0
    assert free(cap)["1g.10gb"] == 6
    assert cap.profiles["3g.40gb"].total == 1  # the tainted placement never counts


def test_partitionable_devices_off_serves_nothing_with_counters():
    cap = figures(mig_pool(A100), features=Features(partitionable_devices=False))
    assert free(cap) == {"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0}
    assert cap.gpus_free == 0


def test_incomplete_pool_serves_nothing_and_says_why():
    slices = mig_pool(A100)[1:]  # the counter slice is missing: 1 of 2 slices
    cap = figures(slices)
    assert free(cap) == {"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0}
    assert "incomplete" in cap.problem


def test_overcommitted_pool_serves_nothing_with_counters():
    # Two overlapping placements allocated together (a republished pool, kubernetes#140802): the
    # counters are over-committed, so no device with counters fits (brief 2.10).
    cap = figures(mig_pool(A100), allocated=["gpu-0-mig-3g40gb-0", "gpu-0-mig-2g20gb-0"])
    assert free(cap) == {"1g.10gb": 0, "2g.20gb": 0, "3g.40gb": 0}


def test_exact_search_beats_first_fit():
    # One set of 4 slices; profile p placements: {0,1}, {1,2}, {2,3}. First fit by name order takes
    # {0,1} then {2,3} = 2, but with {0,1}'s slice 0 taken, a smallest-first pick could take {1,2}
    # and stop at 1. The count is the true maximum whatever the order.
    sets = {"cs": {f"s{i}": 1 for i in range(4)}}
    devs = [dev(f"p-{a}", attrs={"profile": "p"}, consumes={"cs": {f"s{a}": 1, f"s{a + 1}": 1}}) for a in (1, 0, 2)]
    inv = inventory([slice_("c", counters=sets, count=2), slice_("d", devices=devs, count=2)])
    cap = partitions.capacity(inv)[("driver-a", "pool-1")][("node-1", "")]
    assert cap.profiles["p"].free == 2 and cap.profiles["p"].exact


def test_search_budget_marks_the_figure_inexact(monkeypatch):
    monkeypatch.setattr(partitions, "SEARCH_BUDGET", 3)
    sets = {"cs": {f"s{i}": 1 for i in range(6)}}
    devs = [
        dev(f"p-{a}", attrs={"profile": "p"}, consumes={"cs": {f"s{a}": 1, f"s{(a + 1) % 6}": 1}}) for a in range(6)
    ]
    inv = inventory([slice_("c", counters=sets, count=2), slice_("d", devices=devs, count=2)])
    cap = partitions.capacity(inv)[("driver-a", "pool-1")][("node-1", "")]
    assert not cap.profiles["p"].exact
    assert cap.profiles["p"].to_dict()["exact"] is False


# -- the engine's own verdicts ------------------------------------------------------------------

PROFILES = ["p1", "p2"]


@st.composite
def pools(draw, disjoint=False):
    """One node's pool: 1-2 counter sets of 4 slices and some SMs, a whole device per set, and
    placements of two profiles (random slices, or disjoint per profile), some without counters,
    some tainted; some devices allocated."""
    n_sets = draw(st.integers(1, 2))
    sets, devices = {}, []
    for s in range(n_sets):
        cs = f"cs{s}"
        sets[cs] = {"sm": draw(st.integers(2, 8)), **{f"ms{i}": 1 for i in range(4)}}
        devices.append(dev(f"gpu-{s}", attrs={"type": "gpu"}, consumes={cs: sets[cs]}))
        for p in PROFILES:
            sm = draw(st.integers(1, 3))
            size = draw(st.integers(1, 2))
            starts = range(0, 4 - size + 1, size) if disjoint else draw(st.lists(st.integers(0, 4 - size), max_size=4))
            for k, start in enumerate(starts):
                counters = {"sm": sm, **{f"ms{i}": 1 for i in range(start, start + size)}}
                devices.append(
                    dev(
                        f"{p}-{s}-{k}",
                        attrs={"type": "mig", "profile": p},
                        consumes={cs: counters},
                        taints=[{"key": "bad", "effect": "NoSchedule"}] if draw(st.integers(0, 6)) == 0 else None,
                    )
                )
    for i in range(draw(st.integers(0, 2))):
        devices.append(dev(f"plain-{i}", attrs={"type": "mig", "profile": draw(st.sampled_from(PROFILES))}))
    names = [d["name"] for d in devices]
    allocated = draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
    slices = [slice_("c", counters=sets, count=2), slice_("d", devices=devices, count=2)]
    return slices, [f"driver-a/pool-1/{n}" for n in allocated]


def _is(profile):
    # The whole GPUs publish no profile: the type test first (CEL's && absorbs the missing key).
    return f'device.attributes["driver-a"].type == "mig" && device.attributes["driver-a"].profile == "{profile}"'


def _fits(inv, profile, count):
    c = claim("probe", [req("r", count=count, selectors=[_is(profile)])])
    return allocate(inv, [c], "node-1").status == SUCCESS


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.sampled_from([FIXED, Features(quirk_counter_leak=False, partitionable_devices=False)]))
def test_count_is_the_largest_request_the_engine_places(pool, features):
    """A claim for N devices of the profile fits exactly when N <= the count (the engine's search
    backtracks over placements, so its answer for N is exact)."""
    slices, allocated = pool
    inv = inventory(slices, allocated=allocated, features=features)
    caps = partitions.capacity(inv).get(("driver-a", "pool-1"), {})
    for profile in PROFILES:
        counts = [c.profiles[profile] for c in caps.values() if profile in c.profiles]
        n = sum(c.free for c in counts)
        assert all(c.exact for c in counts)
        if n:
            assert _fits(inv, profile, n), f"{profile}: {n} counted, the engine cannot place them"
        assert not _fits(inv, profile, n + 1), f"{profile}: {n} counted, the engine places {n + 1}"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(disjoint=True), st.sampled_from(PROFILES))
def test_count_equals_one_by_one_allocation_until_it_fails(pool, profile):
    """Allocating one device of the profile at a time (each a new claim, the last one's result then
    allocated) places exactly the count before the engine says no: placements of one profile are
    disjoint on MIG GPUs, so the order the allocator picks in never strands one."""
    slices, allocated = pool
    inv = inventory(slices, allocated=allocated, features=FIXED)
    caps = partitions.capacity(inv).get(("driver-a", "pool-1"), {})
    n = sum(c.profiles[profile].free for c in caps.values() if profile in c.profiles)
    taken = list(allocated)
    placed = 0
    while True:
        c = claim("probe", [req("r", selectors=[_is(profile)])])
        out = allocate(inv, [c], "node-1")
        if out.status != SUCCESS:
            break
        taken += [p.device.id for picks in out.picks for p in picks]
        placed += 1
        inv = inventory(slices, allocated=taken, features=FIXED)
        assert placed <= 40
    assert placed == n


@pytest.mark.parametrize("shape", [A100, H100], ids=["A100", "H100"])
def test_mig_counts_match_one_by_one_engine_allocation(shape):
    """On real MIG shapes with a GPU half used, each profile's count is what the engine places."""
    _sms, _n, profiles = shape
    slices = mig_pool(shape, gpus=2)
    used = ["gpu-0-mig-3g40gb-4"]
    for profile in profiles:
        cap = figures(slices, allocated=used)
        n = cap.profiles[profile].free
        taken, placed = [f"driver-a/pool-1/{d}" for d in used], 0
        inv = inventory(slices, allocated=taken)
        while placed <= n:
            c = claim("probe", [req("r", selectors=[_is(profile)])])
            out = allocate(inv, [c], "node-1")
            if out.status != SUCCESS:
                break
            taken += [p.device.id for picks in out.picks for p in picks]
            placed += 1
            inv = inventory(slices, allocated=taken)
        assert placed == n, profile
