"""Property tests: random small clusters and claims, invariants every allocation must keep."""

import itertools
from collections import defaultdict
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra import Features, allocate, preview
from dra import matching as matching_mod
from dra import search as search_mod
from dra.cel import compile_selector, make_device
from dra.search import SUCCESS

from .allocator_fixtures import allocated_claim, claim, dev, inventory, req, slice_

FIXED = Features(quirk_counter_leak=False, quirk_distinct_per_request=False)
MODELS = ["a100", "h100"]
SELECTORS = [
    None,
    'device.attributes["driver-a"].model == "h100"',
    'device.capacity["driver-a"].memory.compareTo(quantity("40Gi")) >= 0',
]


@st.composite
def clusters(draw):
    n_dev = draw(st.integers(1, 7))
    # "shared": every device draws on one counter set (MIG partitions of a GPU); "own": each device
    # has a set of its own (a MIG-capable whole GPU), which the direct answer decides without the search.
    counter_mode = draw(st.sampled_from(["none", "shared", "own"]))
    with_counters = counter_mode != "none"
    devices = []
    for i in range(n_dev):
        d = dev(
            f"d{i}",
            attrs={"model": draw(st.sampled_from(MODELS)), "numa": draw(st.integers(0, 1))},
            capacity={"memory": draw(st.sampled_from(["20Gi", "40Gi", "80Gi"]))},
            consumes={"cs" if counter_mode == "shared" else f"cs{i}": {"mem": draw(st.sampled_from([1, 2, 3]))}}
            if with_counters
            else None,
            taints=[{"key": "bad", "effect": "NoSchedule"}] if draw(st.integers(0, 5)) == 0 else None,
        )
        devices.append(d)
    split = draw(st.integers(0, n_dev))
    pools = [("pool-1", devices[:split]), ("pool-2", devices[split:])]
    slices, counter_total = [], draw(st.integers(2, 8))
    for pool, devs in pools:
        if not devs:
            continue
        if with_counters:
            slices.append(slice_(f"{pool}-devs", pool=pool, count=2, devices=devs))
            if counter_mode == "shared":
                sets = {"cs": {"mem": counter_total}}
            else:
                sets = {f"cs{i}": {"mem": draw(st.integers(1, 3))} for i in range(n_dev)}
            slices.append(slice_(f"{pool}-counters", pool=pool, count=2, counters=sets))
        else:
            slices.append(slice_(f"{pool}-devs", pool=pool, devices=devs))
    all_ids = [f"driver-a/{pool}/{d['name']}" for pool, devs in pools for d in devs]
    allocated = draw(st.lists(st.sampled_from(all_ids), unique=True, max_size=3)) if all_ids else []
    n_req = draw(st.integers(1, 3))
    requests = [
        req(f"r{i}", count=draw(st.integers(1, 2)), selectors=[s] if (s := draw(st.sampled_from(SELECTORS))) else ())
        for i in range(n_req)
    ]
    constraint = draw(
        st.sampled_from([None, {"matchAttribute": "driver-a/numa"}, {"distinctAttribute": "driver-a/model"}])
    )
    return slices, allocated, requests, [constraint] if constraint else []


def _selectors_hold(device, variant, inv):
    cel_dev = make_device(
        device.driver, device.attributes, device.raw.get("capacity") or {}, allow_multiple_allocations=device.multi
    )
    exprs = [s["cel"]["expression"] for s in inv.classes[variant.class_name].selectors] + [
        s["cel"]["expression"] for s in variant.selectors
    ]
    return all(compile_selector(e).evaluate(cel_dev) for e in exprs)


def _counter_usage(devices):
    used = defaultdict(Fraction)
    for d in devices:
        for set_name, counters in d.consumes:
            for name, amount in counters.items():
                used[(d.pool, set_name, name)] += amount
    return used


def brute_force(inv, c, node="node-1"):
    """Is there any assignment at all? (exhaustive, tiny inputs only)"""
    view = inv.node(node)
    devices = [d for p in view.usable for d in p.devices]
    # Allocated devices alone may over-commit a pool's counters: then none of its devices with counters fits (brief 2.10).
    broke = {d.key for p in view.usable if p.counters and p.counters.overcommitted for d in p.devices if d.has_counters}
    free = [
        d
        for d in devices
        if d.key not in inv.state.dedicated
        and d.key not in broke
        and not any(t.get("effect") == "NoSchedule" for t in d.taints)
    ]
    totals = {
        (p.name, s, n): v
        for p in view.usable
        if p.counters
        for s, cs in p.counters.available.items()
        for n, v in cs.items()
    }
    variants = [r.variants[0] for r in c.requests]
    eligible = [[d for d in free if _selectors_hold(d, v, inv)] for v in variants]

    def rec(i, used):
        if i == len(variants):
            picks = [d for group in used for d in group]
            for con in c.constraints:
                name = con.match or con.distinct
                values = [d.attribute(name) for d in picks]
                if con.match and len(set(values)) > 1:
                    return False
                if con.distinct and len(set(values)) != len(values):
                    return False
            for key, amount in _counter_usage(picks).items():
                if amount > totals.get(key, 0):
                    return False
            return True
        taken = {d.key for group in used for d in group}
        for combo in itertools.combinations([d for d in eligible[i] if d.key not in taken], variants[i].count):
            if rec(i + 1, used + [combo]):
                return True
        return False

    return rec(0, [])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_allocations_keep_every_invariant(data):
    slices, allocated, requests, constraints = data
    inv = inventory(slices, allocated=allocated, features=FIXED, nodes={"node-1": {}})
    c = claim("c", requests, constraints=constraints)
    out = allocate(inv, [c], "node-1")
    assert out.status in ("success", "unschedulable", "node-failure"), out.message
    # The search is exhaustive: it finds a solution exactly when one exists.
    assert (out.status == SUCCESS) == brute_force(inv, c)
    if out.status != SUCCESS:
        return
    picks = [p for group in out.picks for p in group]
    keys = [p.device.key for p in picks]
    assert len(keys) == len(set(keys)), "a device was picked twice"
    assert not set(keys) & inv.state.dedicated, "an allocated device was picked"
    assert [len([p for p in picks if p.variant.request == r.name]) for r in c.requests] == [
        r.variants[0].count for r in c.requests
    ]
    for p in picks:
        assert _selectors_hold(p.device, p.variant, inv)
        assert not any(t.get("effect") == "NoSchedule" for t in p.device.taints)
    view = inv.node("node-1")
    allocated_devs = [d for pool in view.usable for d in pool.devices if d.key in inv.state.dedicated]
    usage = _counter_usage([p.device for p in picks] + allocated_devs)
    # The generator may already over-commit with allocated devices alone; the allocator can only
    # be blamed for a counter that its own picks draw on.
    picked_usage = _counter_usage([p.device for p in picks])
    for pool in view.usable:
        totals = {name: cs for s in inv.by_pool[pool.key] for name, cs in s.counter_sets}
        if totals:
            for (pool_name, set_name, name), amount in usage.items():
                if pool_name == pool.name and picked_usage.get((pool_name, set_name, name)):
                    assert amount <= totals[set_name][name], "shared counters over-committed"
    for con in c.constraints:
        values = [p.device.attribute(con.match or con.distinct) for p in picks]
        assert len(set(values)) == (1 if con.match else len(values))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_results_are_deterministic_and_projection_is_exact(data):
    slices, allocated, requests, constraints = data

    def run():
        inv = inventory(slices, allocated=allocated, nodes={"node-1": {}, "node-2": {}})
        return preview(inv, [claim("c", requests, constraints=constraints)])["nodes"]

    first = run()
    assert run() == first
    matching_mod.SHARE_RESULTS = False  # evaluate every device on its own
    try:
        assert run() == first
    finally:
        matching_mod.SHARE_RESULTS = True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans(), st.sampled_from([FIXED, Features()]))
def test_direct_answer_equals_the_search(data, single, features):
    """NodeAllocator answers one-request plans without the search where that is exact (search.py
    _simple_run): the same verdicts, picks, reasons and headroom as the search itself."""
    from dra import headroom

    slices, allocated, requests, constraints = data
    if single:
        requests = requests[:1]

    def run():
        inv = inventory(slices, allocated=allocated, features=features, nodes={"node-1": {}, "node-2": {}})
        c = claim("c", requests, constraints=constraints)
        out = allocate(inv, [c], "node-1")
        return (
            (out.status, out.message, [(p.variant.label, p.device.id) for ps in out.picks for p in ps]),
            preview(inv, [c], reason_codes=True)["nodes"],
            headroom(inv, [c])["byNode"],
        )

    fast = run()
    search_mod.SIMPLE_PATH = False
    try:
        assert run() == fast
    finally:
        search_mod.SIMPLE_PATH = True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_kept_direct_answers_follow_allocation_changes(data, more):
    """The direct answer is kept with the node's view under the allocated state's tokens: after an
    incremental change of who holds what, previews agree with an Inventory built from scratch, and
    the older Inventory (which shares unchanged views) still gives its own answers."""
    slices, allocated, _, constraints = data
    c = claim("c", [req("r0", count=more.draw(st.integers(1, 3)))], constraints=constraints)
    all_ids = [
        f"driver-a/{s['spec']['pool']['name']}/{d['name']}" for s in slices for d in s["spec"].get("devices") or []
    ]
    changed = more.draw(st.lists(st.sampled_from(all_ids), unique=True, max_size=3)) if all_ids else []
    nodes = {"node-1": {}, "node-2": {}}
    before = inventory(slices, allocated=allocated, nodes=nodes)
    first = preview(before, [c])["nodes"]
    assert preview(before, [c])["nodes"] == first  # the second run reads the kept answers
    upserts = {"resource_claims": [allocated_claim("taken", changed)]} if changed else None
    after = before.with_changes(
        upserts, None if changed else {"resource_claims": [("other", "taken")]} if allocated else None
    )
    fresh = inventory(slices, allocated=changed, nodes=nodes)
    assert preview(after, [c])["nodes"] == preview(fresh, [c])["nodes"]
    assert preview(before, [c])["nodes"] == first
    # Another claim asking for the same devices reads the kept answer under its own names.
    other = claim("other", [req("r1", count=c.requests[0].variants[0].count)], constraints=constraints)
    assert preview(after, [other])["nodes"] == preview(fresh, [other])["nodes"]
