"""The first preview's shortcuts give what the plain code gives: the counter-name check of a pool's
validity (model.Device.counter_names) and the projection keys (projection.Projector.key, _freeze)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from dra import preview
from dra.model import Device, Slice
from dra.projection import MISSING, _freeze, projector_for

from .allocator_fixtures import claim, dev, devices, inventory, req, slice_

# Amounts as drivers write them, and shapes they should not (each must end as the full parse ends).
AMOUNTS = st.one_of(
    st.sampled_from(["1", "98", "80Gi", "0.5", "1500m", "", "abc", "1e3", "-2"]).map(lambda v: {"value": v}),
    st.sampled_from([{"value": 1}, {"value": None}, {}, "1", 3, None, {"value": "1", "extra": "x"}]),
)
COUNTERS = st.one_of(
    st.dictionaries(st.sampled_from(["mem", "sm", "memory-slice-0"]), AMOUNTS, max_size=3),
    st.sampled_from([None, [], "x"]),
)
ENTRIES = st.one_of(
    st.fixed_dictionaries({"counterSet": st.sampled_from(["cs", "gpu-0-counter-set", "", None]), "counters": COUNTERS}),
    st.sampled_from(["cs", None, 7]),
)


def _names_or_error(fn):
    try:
        return "ok", [(name, sorted(keys)) for name, keys in fn()]
    except Exception as exc:  # the message is part of the pool's "invalid" reason
        return "error", type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRIES, max_size=3))
def test_counter_names_equal_the_parsed_counters(entries):
    raw_slice = {
        "metadata": {"name": "s"},
        "spec": {"driver": "d", "pool": {"name": "p"}, "devices": [{"name": "x", "consumesCounters": entries}]},
    }
    device = Slice(raw_slice).devices[0]
    fast = _names_or_error(device.counter_names)
    plain = _names_or_error(lambda: Device(device.slice, device.raw).consumes)
    assert fast == plain
    if fast[0] == "ok":  # and once parsed, the names come from the parsed amounts
        assert _names_or_error(device.counter_names) == plain
    # With a build's memo (model.parsed_counters), as the live inventory's slices have: the same
    # names, amounts and errors, for a device reading its maps first and for one reading them after.
    memo = {}
    first, second = (Slice(raw_slice, counter_memo=memo).devices[0] for _ in range(2))
    assert _names_or_error(first.counter_names) == plain
    assert _names_or_error(lambda: first.consumes) == _names_or_error(lambda: second.consumes) == plain
    assert _names_or_error(second.counter_names) == plain


def test_equal_counter_maps_shared_by_the_live_inventory_are_parsed_once_per_build():
    """live_inventory.share_device_values makes equal consumesCounters maps one object; a build's
    slices then parse each such map once (model.parsed_counters), and a map that does not parse
    fails every device that reads it, not only the first."""
    from claims.live_inventory import share_device_values

    counters = {"memory": {"value": "40Gi"}, "multiprocessors": {"value": "42"}}
    bad = {"memory": {"value": "lots"}}

    def device(name, entries):
        return {"name": name, "consumesCounters": [{"counterSet": f"{name}-set", "counters": dict(c)} for c in entries]}

    rows = [
        {
            "metadata": {"name": f"s{i}"},
            "spec": {
                "driver": "d",
                "pool": {"name": f"p{i}"},
                "devices": [device("a", [counters]), device("b", [counters, bad]), device("c", [bad])],
            },
        }
        for i in range(2)
    ]
    share_device_values(rows, {})
    maps = [e["counters"] for r in rows for d in r["spec"]["devices"] for e in d["consumesCounters"]]
    assert (
        len({id(m) for m in maps}) == 2
        and maps[0] is maps[1] is maps[4] is maps[5]
        and maps[2] is maps[3] is maps[6] is maps[7]
    )

    memo = {}
    devs = [d for r in rows for d in Slice(r, counter_memo=memo).devices]
    assert devs[0].consumes == [("a-set", {"memory": 40 * 2**30, "multiprocessors": 42})]
    assert devs[0].consumes[0][1] is devs[3].consumes[0][1]  # one parse of the shared map
    assert len(memo) == 1

    # A counter slice's totals: shared with equal maps, parsed once, as a plain parse gives them.
    totals = [
        {
            "metadata": {"name": f"c{i}"},
            "spec": {
                "driver": "d",
                "pool": {"name": f"p{i}"},
                "sharedCounters": [{"name": "a-set", "counters": dict(counters)}],
            },
        }
        for i in range(2)
    ]
    share_device_values(totals, {})
    assert totals[0]["spec"]["sharedCounters"][0]["counters"] is totals[1]["spec"]["sharedCounters"][0]["counters"]
    sets = [Slice(t, counter_memo=memo).counter_sets for t in totals]
    assert (
        sets[0]
        == sets[1]
        == [("a-set", {"memory": 40 * 2**30, "multiprocessors": 42})]
        == Slice(totals[0]).counter_sets
    )
    assert sets[0][0][1] is sets[1][0][1]
    for d in (devs[1], devs[2], devs[4], devs[5]):
        assert _names_or_error(d.counter_names)[0] == "error"
        assert _names_or_error(lambda d=d: d.consumes) == _names_or_error(lambda d=d: Device(d.slice, d.raw).consumes)


def test_bad_counter_amount_makes_the_pool_invalid_with_the_parse_error():
    bad = dev("g0", consumes={"cs": {"mem": "lots"}})
    inv = inventory([slice_("d", devices=[bad], count=2), slice_("c", count=2, counters={"cs": {"mem": "4"}})])
    node = preview(inv, [claim("c", [req("r")])])["nodes"][0]
    assert node["fits"] is False
    assert "invalid resource pools were encountered (pool driver-a/pool-1: device g0: " in node["reason"]
    assert "lots" in node["reason"]


def _freeze_reference(value):
    """_freeze as it was before its shortcut for one-entry dicts."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze_reference(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze_reference(v) for v in value)
    return value


SCALARS = st.one_of(
    st.text(max_size=4), st.integers(-3, 3), st.booleans(), st.floats(allow_nan=False, width=16), st.none()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["int", "string", "value", "a"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_freeze_equals_the_general_definition(value):
    assert _freeze(value) == _freeze_reference(value)


def _key_reference(fields, device):
    """Projector.key as it was before the lookups were precomputed."""
    driver = device.driver
    parts = [driver, device.multi]
    attrs, caps = device.attributes, device.raw.get("capacity") or {}
    for kind, domain, ident in fields:
        source = attrs if kind == "attributes" else caps
        value = source.get(f"{domain}/{ident}", MISSING)
        if value is MISSING and domain == driver:
            value = source.get(ident, MISSING)
        if value is not MISSING:
            value = _freeze_reference(value)
        parts.append(value)
    return tuple(parts)


ATTRS = st.dictionaries(
    st.sampled_from(["model", "driver-a/model", "other/model", "numa"]),
    st.one_of(
        st.sampled_from(["a100", "h100"]).map(lambda v: {"string": v}), st.integers(0, 2).map(lambda v: {"int": v})
    ),
    max_size=3,
)
CAPS = st.dictionaries(
    st.sampled_from(["memory", "driver-a/memory", "other/memory"]),
    st.sampled_from(["40Gi", "80Gi"]).map(lambda v: {"value": v}),
    max_size=2,
)
EXPRESSIONS = [
    'device.attributes["driver-a"].model == "h100"',
    'device.attributes["other"].model == "h100" && device.capacity["driver-a"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.driver == "driver-a" && device.attributes["driver-a"]["numa"] == 1 && device.capacity["other"]["memory"].isGreaterThan(quantity("1"))',
]


@settings(max_examples=200, deadline=None)
@given(ATTRS, CAPS, st.booleans(), st.sampled_from(EXPRESSIONS))
def test_projection_key_equals_the_reference(attrs, caps, multi, expr):
    raw = {"name": "x", "attributes": attrs, "capacity": caps, "allowMultipleAllocations": multi}
    device = Slice(
        {"metadata": {"name": "s"}, "spec": {"driver": "driver-a", "pool": {"name": "p"}, "devices": [raw]}}
    ).devices[0]
    proj = projector_for(expr)
    assert proj is not None
    assert proj.key(device) == _key_reference(proj.fields, device)


def test_kept_answer_outcome_gives_fresh_results_and_the_current_plans_picks():
    """A repeated preview reads the node's kept direct answer (search.KeptOutcome): its result
    dicts are copies (a caller changing them changes no later answer), and allocate() on the same
    Inventory still gets Picks of its own claim and request (what allocation_result reads)."""
    from dra import allocate
    from dra.results import allocation_result
    from dra.search import KeptOutcome

    inv = inventory([slice_("s", devices=devices("gpu", 4), count=1)])
    c = claim("c", [req("r", count=2)])
    first = preview(inv, [c])["nodes"][0]
    assert first["fits"] and [r["device"] for r in first["results"]] == ["gpu-0", "gpu-1"]
    first["results"][0]["device"] = "changed by a caller"
    again = preview(inv, [c])["nodes"][0]
    assert [r["device"] for r in again["results"]] == ["gpu-0", "gpu-1"]

    other = claim("other", [req("mine", count=2)], ns="team")
    out = allocate(inv, [other], "node-1")
    assert isinstance(out, KeptOutcome)  # the kept answer of the previews above, under new names
    (picks,) = out.picks
    assert [(p.claim.ref, p.variant.label, p.device.name) for p in picks] == [
        ("team/other", "mine", "gpu-0"),
        ("team/other", "mine", "gpu-1"),
    ]
    assert [r["request"] for r in out.result_dicts()] == ["mine", "mine"]
    result = allocation_result(inv, other, picks, "node-1")
    assert [r["device"] for r in result["devices"]["results"]] == ["gpu-0", "gpu-1"]
