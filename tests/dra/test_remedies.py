"""Remedies are exact: for every kind, over random fleets, making the change a remedy names makes the
engine place the pod exactly where the remedy says (on every node of the changed fleet), and no
remedy is offered that does not work. Table tests show each kind offered where it is the answer."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra import preview
from dra.remedies import KINDS, RANK, apply, remedies
from dra.verdict import verdict

from .remedy_fleets import build, cases, node_case, pending


def fitting(inv, claims, pod):
    """{node: [driver/pool/device]} where the engine places the pod, over the whole fleet."""
    out = preview(inv, claims, pod=pod)
    return {
        e["node"]: [f"{r['driver']}/{r['pool']}/{r['device']}" for r in e["results"]] for e in out["nodes"] if e["fits"]
    }


def offered(case):
    inv, claims, pod, stuck = build(case)
    out = preview(inv, claims, pod=pod)
    if any(e["fits"] for e in out["nodes"]):
        return inv, claims, pod, None
    answer = verdict(inv, claims, out, stuck=stuck)
    return inv, claims, pod, remedies(inv, claims, pod, out, answer, stuck=stuck)


def assert_exact(inv, claims, pod, remedy):
    changed = apply(inv, claims, pod, remedy["change"])
    assert fitting(*changed) == {f["node"]: f["devices"] for f in remedy["fits"]}, remedy
    assert remedy["fits"], remedy


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_remedy_of_a_kind_places_the_pod_where_it_says(kind, data):
    inv, claims, pod, found = offered(data.draw(cases(bias=kind)))
    if found is None:
        return  # it fits already: no remedy is asked for
    for remedy in found:
        if remedy["kind"] == kind:
            assert_exact(inv, claims, pod, remedy)
    # The original inventory is untouched by the search.
    assert fitting(inv, claims, pod) == {}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_remedies_are_ranked_and_each_change_is_offered_once(case):
    inv, claims, pod, found = offered(case)
    if not found:
        return
    assert [RANK[r["kind"]] for r in found] == sorted(RANK[r["kind"]] for r in found)
    changes = [repr(sorted(r["change"].items())) for r in found]
    assert len(changes) == len(set(changes))


def kinds_of(found):
    return {r["kind"] for r in found or ()}


def by_kind(found, kind):
    return [r for r in found if r["kind"] == kind]


def test_releasing_a_stuck_claim_names_the_node_and_devices():
    case = pending(
        count=2,
        nodes=[node_case("n0", gpus=2, holders=[1, 1], kinds={1: "stuck"}), node_case("n1", state="cpu-only")],
    )
    inv, claims, pod, found = offered(case)
    (remedy,) = by_kind(found, "release-stuck")
    assert remedy["claims"] == ["work/n0-claim-1"]
    assert remedy["affects"] == ["work/n0-pod-1"]
    assert remedy["fits"] == [{"node": "n0", "devices": ["gpu.example.com/n0/gpu-0", "gpu.example.com/n0/gpu-1"]}]
    assert_exact(inv, claims, pod, remedy)


def test_waiting_for_a_deleting_claim_comes_first():
    case = pending(
        count=1,
        nodes=[
            node_case("n0", gpus=1, holders=[1], kinds={1: "deleting"}),
            node_case("n1", gpus=1, holders=[1], kinds={1: "stuck"}),
        ],
    )
    inv, claims, pod, found = offered(case)
    assert [r["kind"] for r in found][:2] == ["wait-deleting", "release-stuck"]
    for r in found:
        assert_exact(inv, claims, pod, r)


def test_a_claim_in_use_is_not_released_and_a_tainted_device_stays_out():
    """Releasing the stuck claim frees a device the pod cannot use (tainted): not offered."""
    case = pending(
        count=2,
        nodes=[node_case("n0", gpus=2, holders=[0, 1], tainted=[1], kinds={1: "stuck"})],
    )
    _, _, _, found = offered(case)
    assert "release-stuck" not in kinds_of(found)
    # The tainted device is also held: tolerating its taint alone frees nothing, and a copy of the node
    # has the same tainted device. One device is all it can get.
    assert kinds_of(found) == {"reduce-count", "first-available"}
    assert by_kind(found, "reduce-count")[0]["count"] == 1


def test_uncordon_and_recover():
    case = pending(
        count=2,
        nodes=[node_case("n0", state="cordoned", gpus=2), node_case("n1", state="not-ready", gpus=2)],
    )
    inv, claims, pod, found = offered(case)
    assert {r["node"] for r in by_kind(found, "uncordon")} == {"n0"}
    assert {r["node"] for r in by_kind(found, "recover-node")} == {"n1"}
    for r in found:
        assert_exact(inv, claims, pod, r)


def test_a_notready_node_whose_devices_are_held_is_not_offered():
    case = pending(count=2, nodes=[node_case("n0", state="not-ready", gpus=2, holders=[1, 0])])
    _, _, _, found = offered(case)
    assert "recover-node" not in kinds_of(found)


def test_reduce_count_gives_the_largest_count_that_fits_and_a_first_available_spelling():
    case = pending(count=4, nodes=[node_case("n0", gpus=4, holders=[1, 0, 0, 0]), node_case("n1", gpus=2)])
    inv, claims, pod, found = offered(case)
    (reduce,) = by_kind(found, "reduce-count")
    assert reduce["count"] == 3 and reduce["asked"] == 4
    assert [f["node"] for f in reduce["fits"]] == ["n0"]
    (first,) = by_kind(found, "first-available")
    for r in (reduce, first):
        assert_exact(inv, claims, pod, r)


def test_dropping_a_selector_and_another_class():
    case = pending(count=2, cls="gpu", selector="device.attributes['gpu.example.com'].model == 'b'")
    case["nodes"] = [node_case("n0", gpus=2, model="a"), node_case("n1", gpus=2, model="b", holders=[1, 0])]
    inv, claims, pod, found = offered(case)
    (drop,) = by_kind(found, "drop-selectors")
    assert [f["node"] for f in drop["fits"]] == ["n0"] and drop["nodesFitting"] == 1
    other = by_kind(found, "other-class")
    assert [r["deviceClass"] for r in other] == ["gpu-a"]  # gpu-a: no selector, model a is free
    for r in found:
        assert_exact(inv, claims, pod, r)


def test_dropping_the_constraint_that_blocks():
    case = pending(
        count=2,
        constraint=True,
        nodes=[
            node_case("n0", gpus=2, models=["a", "b"]),
            node_case("n1", gpus=3, models=["a", "b", "b"], holders=[0, 1, 0]),
        ],
    )
    inv, claims, pod, found = offered(case)
    (drop,) = by_kind(found, "drop-constraints")
    assert drop["nodesFitting"] == 2 and [f["node"] for f in drop["fits"]] == ["n0", "n1"]
    assert drop["constraints"] == [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/model"}]
    assert_exact(inv, claims, pod, drop)


def test_preempting_lower_priority_pods_whose_generated_claims_hold_the_devices():
    case = pending(
        count=2,
        priority=1000,
        nodes=[
            node_case("n0", gpus=2, holders=[1, 1], priorities={1: 0}, generated={1: True}),
            node_case("n1", gpus=2, holders=[1, 1], priorities={1: 0}, generated={1: False}),  # claim stays
            node_case("n2", gpus=2, holders=[1, 1], priorities={1: 2000}, generated={1: True}),  # higher
        ],
    )
    inv, claims, pod, found = offered(case)
    (remedy,) = by_kind(found, "preempt")
    assert remedy["victims"] == ["work/n0-pod-1"] and [f["node"] for f in remedy["fits"]] == ["n0"]
    assert_exact(inv, claims, pod, remedy)


def test_tolerating_a_node_taint_and_a_device_taint_state_the_risk():
    case = pending(count=1, nodes=[node_case("n0", state="tainted", gpus=1), node_case("n1", gpus=1, tainted=[0])])
    inv, claims, pod, found = offered(case)
    (node_taint,) = by_kind(found, "tolerate-node-taint")
    (device_taint,) = by_kind(found, "tolerate-device-taint")
    assert node_taint["risk"] and device_taint["risk"]
    assert [f["node"] for f in node_taint["fits"]] == ["n0"]
    assert [f["node"] for f in device_taint["fits"]] == ["n1"]
    for r in found:
        assert_exact(inv, claims, pod, r)


def test_one_more_node_like_the_best_candidate():
    case = pending(count=2, nodes=[node_case("n0", gpus=2, holders=[1, 1]), node_case("n1", state="cpu-only")])
    inv, claims, pod, found = offered(case)
    (add,) = by_kind(found, "add-node")
    assert add["like"] == "n0" and add["fits"][0]["node"] == "n0-copy"
    assert_exact(inv, claims, pod, add)


def test_nothing_is_offered_where_no_change_of_these_kinds_helps():
    case = pending(count=1, cls="gpu-b", nodes=[node_case("n0", state="cpu-only")])
    _, _, _, found = offered(case)
    assert found == []
