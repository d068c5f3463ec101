"""Time limits: the scheduler's per-node filter timeout and a deadline for a whole preview.

No timing is asserted (figures are in bench/bench_deadline.py): a search that cannot finish in any
reasonable time meets a tiny limit, and an expired deadline decides no node at all.
"""

from dra import allocate, headroom, preview
from dra.deadline import Deadline
from dra.search import DEADLINE, ERROR, SUCCESS

from .allocator_fixtures import claim, dev, inventory, req, slice_

NODES = {f"node-{i}": {} for i in range(1, 4)}


def endless_inventory():
    """node-1: 30 devices, a claim whose second request can never meet the constraint, so the search
    walks all C(30, 8) = 5.8 million picks of the first request (exact, no shortcut applies)."""
    devices = [dev(f"a{i}", attrs={"side": "left"}) for i in range(30)] + [
        dev(f"b{i}", attrs={"side": "right"}) for i in range(2)
    ]
    slices = [slice_("s1", node="node-1", devices=devices)]
    slices += [
        slice_(f"s{n}", pool=f"pool-{n}", node=f"node-{n}", devices=[dev("d", attrs={"side": "left"})]) for n in (2, 3)
    ]
    return inventory(slices, nodes=NODES)


ENDLESS = claim(
    "c",
    [
        req("many", count=8, selectors=['device.attributes["driver-a"].side == "left"']),
        req("other", selectors=['device.attributes["driver-a"].side == "right"']),
    ],
    constraints=[{"matchAttribute": "driver-a/side"}],
)
SMALL = claim("s", [req("one")])


def test_filter_timeout_is_the_schedulers_error_on_that_node():
    outcome = allocate(endless_inventory(), [ENDLESS], "node-1", filter_timeout=0.05)
    assert outcome.status == ERROR
    assert outcome.message == "node node-1: timed out trying to allocate devices"


def test_preview_reports_the_timeout_per_node_and_goes_on():
    out = preview(endless_inventory(), [ENDLESS], node_filters=False, filter_timeout=0.05)
    by_node = {e["node"]: e for e in out["nodes"]}
    assert by_node["node-1"]["error"] == "node node-1: timed out trying to allocate devices"
    assert not by_node["node-1"]["fits"] and by_node["node-1"]["reason"] is None
    assert by_node["node-2"]["reason"] and by_node["node-2"]["error"] is None  # decided normally: does not fit
    assert "deadline" not in out["summary"]  # no request deadline given: the summary is as before


def test_request_deadline_decides_no_node_once_passed():
    out = preview(endless_inventory(), [SMALL], node_filters=False, deadline=0, reason_codes=True)
    assert [e["code"] for e in out["nodes"]] == ["deadline"] * 3
    assert all(
        not e["fits"] and e["error"] is None and "deadline of 0 s passed first" in e["reason"] for e in out["nodes"]
    )
    assert out["summary"]["deadline"] == {"seconds": 0, "reached": True, "undecidedNodes": 3}
    assert out["summary"]["fits"] == 0


def test_request_deadline_inside_a_search_is_not_a_verdict():
    out = preview(
        endless_inventory(), [ENDLESS], node_filters=False, deadline=0.05, filter_timeout=None, reason_codes=True
    )
    first = out["nodes"][0]
    assert first["node"] == "node-1" and first["code"] == "deadline" and first["error"] is None
    assert out["summary"]["deadline"]["reached"] is True
    assert out["summary"]["deadline"]["undecidedNodes"] == 3  # the other nodes come after it


def test_deadline_not_reached_changes_nothing():
    inv = endless_inventory()
    plain = preview(inv, [SMALL], node_filters=False)
    bounded = preview(inv, [SMALL], node_filters=False, deadline=Deadline(3600))
    assert bounded["nodes"] == plain["nodes"]
    assert bounded["summary"]["deadline"] == {"seconds": 3600, "reached": False, "undecidedNodes": 0}


def test_allocate_with_expired_deadline():
    assert allocate(endless_inventory(), [SMALL], "node-2", deadline=0).status == DEADLINE
    assert allocate(endless_inventory(), [SMALL], "node-2").status == SUCCESS


def test_headroom_stops_at_the_deadline():
    inv = endless_inventory()
    assert headroom(inv, [SMALL], node_filters=False)["deadlineReached"] is False
    room = headroom(inv, [SMALL], node_filters=False, deadline=0)
    assert room["deadlineReached"] is True and room["copies"] == 0


def test_negative_deadline_is_refused():
    import pytest

    with pytest.raises(ValueError, match="deadline must be >= 0"):
        Deadline(-1)
