"""The stored device state (inventory/devicestate.py): kept current by the sync apply path, one
answer for the UI and the API, the migration's backfill; and the class match counts' shortcuts."""

import copy

import pytest
from django.urls import reverse

from claims.models import Finding
from inventory import classmatch, devicestate, fleet
from inventory.models import Device, DeviceClass
from mirror.sync.apply import apply_batch, apply_object, delete_object
from tests.api_fixtures import client_for
from tests.ui_fixtures import claim, fleet_objects, load_fleet, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha(db):
    return load_fleet()


def stored(pool, name):
    return (
        Device.objects.filter(pool=pool, name=name)
        .values_list("allocation_state", "held_by_namespace", "held_by_name", "admin_watched")
        .get()
    )


def states():
    """(pool, name) -> state, from the one SQL expression."""
    rows = Device.objects.annotate(st=devicestate.state_expression()).values_list("pool", "name", "st")
    return {(pool, name): st for pool, name, st in rows}


def test_apply_stores_who_holds_each_device(alpha):
    assert stored("node-a", "gpu-0") == (
        "allocated",
        "team-a",
        "train-1",
        True,
    )  # the exclusive holder wins over the admin watcher
    assert stored("node-a", "gpu-7") == ("allocated", "team-b", "stuck-claim", False)
    assert stored("node-b", "gpu-0-mig-1g10gb-19-0") == ("allocated", "team-b", "infer", False)
    # The full GPU is not held, but the held MIG slice uses its memory-slice-0 counter.
    assert stored("node-b", "gpu-0") == ("partial", "", "", False)
    assert stored("node-b", "gpu-0-mig-3g40gb-9-4") == ("free", "", "", False)  # its counters are still available
    assert stored("node-c", "gpu-1") == ("free", "", "", False)  # tainted and NotReady are read-time


def test_state_expression_adds_stuck_taints_and_node_readiness(alpha):
    st = states()
    assert st[("node-a", "gpu-7")] == devicestate.STUCK  # active finding on the holder
    assert st[("node-a", "gpu-0")] == devicestate.ALLOCATED
    assert st[("node-b", "gpu-0")] == devicestate.PARTIAL
    assert st[("node-c", "gpu-1")] == devicestate.TAINTED  # tainted before NotReady
    assert st[("node-c", "gpu-0")] == devicestate.UNHEALTHY
    assert st[("node-a", "gpu-3")] == devicestate.FREE
    Finding.objects.update(cleared_at="2026-01-06T00:00:00Z")
    assert states()[("node-a", "gpu-7")] == devicestate.ALLOCATED  # a cleared finding no longer counts


@pytest.mark.parametrize("list_limit", [devicestate.NOT_READY_LIST_LIMIT, 0], ids=["not-ready-list", "exists-probe"])
@pytest.mark.parametrize("state", devicestate.STATES)
def test_state_filters_agree_with_the_expression(alpha, state, list_limit, monkeypatch):
    # The filters test NotReady nodes against a list read once, or (past the limit) an EXISTS probe
    # per row as state_expression() does by default: both must select the same devices.
    monkeypatch.setattr(devicestate, "NOT_READY_LIST_LIMIT", list_limit)
    expected = sorted(k for k, v in states().items() if v == state)
    filtered = Device.objects.in_fleet_state(state)
    assert sorted(filtered.values_list("pool", "name")) == expected
    if state in (devicestate.FREE, devicestate.UNHEALTHY):
        assert ("EXISTS" in str(filtered.query)) == (list_limit == 0)


def test_not_ready_list_follows_node_readiness(alpha):
    """The list is read when the expression is made: a node that turns Ready drops out of the next one."""
    from inventory.models import Node

    unhealthy = {(p, n) for (p, n), st in states().items() if st == devicestate.UNHEALTHY}
    assert unhealthy and sorted(
        Device.objects.in_fleet_state(devicestate.UNHEALTHY).values_list("pool", "name")
    ) == sorted(unhealthy)
    Node.objects.filter(ready=False).update(ready=True)
    assert not Device.objects.in_fleet_state(devicestate.UNHEALTHY).exists()
    assert set(Device.objects.in_fleet_state(devicestate.FREE).values_list("pool", "name")) >= unhealthy


def test_state_filter_and_state_field_share_one_not_ready_read(alpha, django_assert_num_queries):
    """A queryset that filters on a state and annotates it reads the NotReady nodes once; the read
    belongs to that queryset and its clones, so the next request's queryset reads them afresh."""
    from inventory.models import Node

    base = Device.objects.all()
    with django_assert_num_queries(1):  # the NotReady read only; the devices are not fetched yet
        qs = base.with_state().in_state("tainted").in_fleet_state(devicestate.UNHEALTHY)
    unhealthy = sorted(qs.values_list("pool", "name", "state"))
    assert unhealthy and {state for _, _, state in unhealthy} == {"tainted"}
    assert base._not_ready is None  # the starting queryset keeps no read
    Node.objects.filter(ready=False).update(ready=True)
    assert not base.with_state().in_fleet_state(devicestate.UNHEALTHY).exists()
    assert sorted(qs.values_list("pool", "name", "state")) == unhealthy  # the earlier queryset keeps its read


def test_claim_changes_update_the_devices(alpha):
    delete_object(alpha, "ResourceClaim", claim("team-a", "train-1"))
    assert stored("node-a", "gpu-0") == ("admin", "ops", "monitor", True)  # only the admin watcher is left
    assert stored("node-a", "gpu-1") == ("free", "", "", False)
    delete_object(alpha, "ResourceClaim", claim("team-b", "infer"))
    assert stored("node-b", "gpu-0") == ("free", "", "", False)  # counters released with the MIG slice
    # Allocated again in one batch of events, as a watcher applies them.
    apply_batch(
        alpha, "ResourceClaim", [("ADDED", claim("team-a", "again", results=["gpu-1", "gpu-2"], node_name="node-a"))]
    )
    assert stored("node-a", "gpu-2") == ("allocated", "team-a", "again", False)


def test_a_reservation_rebuilds_the_consumers_and_leaves_the_results(alpha):
    """reservedFor and the allocation are separate sources: a pod reserving the claim replaces its
    consumer rows only; a new allocation replaces the results (and restates the devices)."""
    from claims.models import AllocationResult, ClaimConsumer

    def children():
        results = list(AllocationResult.objects.filter(claim__name="again").values_list("id", "device"))
        consumers = list(ClaimConsumer.objects.filter(claim__name="again").values_list("id", "name"))
        return results, consumers

    apply_batch(
        alpha, "ResourceClaim", [("ADDED", claim("team-a", "again", results=["gpu-1", "gpu-2"], node_name="node-a"))]
    )
    results, consumers = children()
    assert [d for _, d in results] == ["gpu-1", "gpu-2"] and consumers == []
    apply_batch(
        alpha,
        "ResourceClaim",
        [("MODIFIED", claim("team-a", "again", results=["gpu-1", "gpu-2"], node_name="node-a", reserved_for=["p1"]))],
    )
    assert children()[0] == results  # the same rows, not rebuilt
    assert [n for _, n in children()[1]] == ["p1"]
    apply_batch(
        alpha,
        "ResourceClaim",
        [("MODIFIED", claim("team-a", "again", results=["gpu-3"], node_name="node-a", reserved_for=["p1"]))],
    )
    after, kept = children()
    assert [d for _, d in after] == ["gpu-3"] and kept == children()[1] and [n for _, n in kept] == ["p1"]
    assert stored("node-a", "gpu-2") == ("free", "", "", False) and stored("node-a", "gpu-3") == (
        "allocated",
        "team-a",
        "again",
        False,
    )
    # Both in one batch, with the claim's first version in it too: every child from the last version.
    apply_batch(
        alpha,
        "ResourceClaim",
        [
            ("MODIFIED", claim("team-a", "again", results=["gpu-4"], node_name="node-a")),
            ("MODIFIED", claim("team-a", "again", results=["gpu-5"], node_name="node-a", reserved_for=["p2", "p3"])),
        ],
    )
    results, consumers = children()
    assert [d for _, d in results] == ["gpu-5"] and [n for _, n in consumers] == ["p2", "p3"]


def test_a_list_takes_statistics_once_at_its_end(alpha):
    """ANALYZE after many inserts: per watch batch, but a LIST's pages leave it to their end
    (take_statistics), which also analyzes what the device-state refresh reads where stale (the pages'
    ANALYZEs were most of a sync)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mirror.sync.apply import ANALYZE_AFTER_INSERTS, reconcile, take_statistics

    if connection.vendor != "postgresql":
        pytest.skip("statistics are PostgreSQL's")
    claims = [("LISTED", claim("team-c", f"listed-{i}")) for i in range(ANALYZE_AFTER_INSERTS)]
    seen = set()
    with CaptureQueriesContext(connection) as pages:
        for start in range(0, len(claims), ANALYZE_AFTER_INSERTS // 2):
            result = apply_batch(
                alpha, "ResourceClaim", claims[start : start + ANALYZE_AFTER_INSERTS // 2], defer_device_state=True
            )
            seen |= result.seen_ids
        big = apply_batch(
            alpha,
            "ResourceClaim",
            [("LISTED", claim("team-d", f"more-{i}")) for i in range(ANALYZE_AFTER_INSERTS)],
            defer_device_state=True,
        )
    assert big.analyze and not any(q["sql"].startswith("ANALYZE") for q in pages.captured_queries)

    def list_end():
        pools = {(alpha.pk, "gpu.nvidia.com", "node-a")}
        with CaptureQueriesContext(connection) as end:
            take_statistics("ResourceClaim", pools)
            reconcile(alpha, "ResourceClaim", seen | big.seen_ids, 0, device_pools=pools)
        analyzes = [q["sql"] for q in end.captured_queries if q["sql"].startswith("ANALYZE")]
        assert (
            len(analyzes) == 1
            and '"claims_resourceclaim"' in analyzes[0]
            and '"claims_allocationresult"' in analyzes[0]
        )
        tables = analyzes[0].removeprefix("ANALYZE ").split(", ")
        assert tables == sorted(tables)  # one lock order for every list end: no deadlock between kinds
        return analyzes[0]

    with connection.cursor() as cursor:
        cursor.execute('ANALYZE "inventory_device"')  # fresh statistics of the shared table: not taken again
    assert '"inventory_device"' not in list_end()
    with connection.cursor() as cursor:  # as if never analyzed (rolled back with the test)
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE relname = 'inventory_device'")
    assert '"inventory_device"' in list_end()
    with CaptureQueriesContext(connection) as watch:
        apply_batch(
            alpha, "ResourceClaim", [("ADDED", claim("team-e", f"new-{i}")) for i in range(ANALYZE_AFTER_INSERTS)]
        )
    assert sum(q["sql"].startswith("ANALYZE") for q in watch.captured_queries) == 1  # a watch batch takes them itself


def test_results_carry_their_claims_namespace(alpha):
    """Set by the sync and by migration claims 0011's backfill for rows stored before it."""
    import importlib

    from django.apps import apps

    from claims.models import AllocationResult

    pairs = set(AllocationResult.objects.values_list("namespace", "claim__namespace"))
    assert pairs and all(ns == claim_ns for ns, claim_ns in pairs)
    AllocationResult.objects.update(namespace="")
    importlib.import_module("claims.migrations.0011_result_namespace").backfill(apps, None)
    assert set(AllocationResult.objects.values_list("namespace", "claim__namespace")) == pairs


def test_republished_slice_keeps_the_holders(alpha):
    raw = next(
        copy.deepcopy(r) for kind, r in fleet_objects() if kind == "ResourceSlice" and r["spec"]["nodeName"] == "node-a"
    )
    raw["metadata"]["resourceVersion"] = "99999"
    raw["spec"]["devices"].append(copy.deepcopy(raw["spec"]["devices"][0]) | {"name": "gpu-8"})
    apply_object(alpha, "ResourceSlice", raw)  # every device row of the slice is rebuilt
    assert stored("node-a", "gpu-0") == ("allocated", "team-a", "train-1", True)
    assert stored("node-a", "gpu-8") == ("free", "", "", False)


def test_backfill_rebuilds_the_same_columns(alpha):
    before = sorted(
        Device.objects.values_list(
            "id", "allocation_state", "held_by_claim_id", "held_by_namespace", "held_by_name", "admin_watched"
        )
    )
    Device.objects.update(
        allocation_state="free", held_by_claim_id=None, held_by_namespace="", held_by_name="", admin_watched=False
    )
    devicestate.refresh_pools(None)  # what migration inventory 0003_perf_device_state runs
    assert (
        sorted(
            Device.objects.values_list(
                "id", "allocation_state", "held_by_claim_id", "held_by_namespace", "held_by_name", "admin_watched"
            )
        )
        == before
    )


def test_ui_and_api_give_one_answer(alpha):
    user = make_user("uma")
    api = client_for(user)
    body = api.get("/api/v1/devices/?page_size=1000").json()
    by_key = {(d["pool"], d["name"]): d for d in body["results"]}
    expected = states()
    assert {k: d["fleet_state"] for k, d in by_key.items()} == expected
    assert all(d["state"] == devicestate.API_STATE_OF[d["fleet_state"]] for d in by_key.values())
    ui = {(d.pool, d.name): d.st.state for d in fleet.states_for(Device.objects.all(), user=user)}
    assert ui == expected
    assert [(d["pool"], d["name"]) for d in api.get("/api/v1/devices/?fleet_state=stuck").json()["results"]] == [
        ("node-a", "gpu-7")
    ]
    counts = {
        r["fleet_state"]: r["count"]
        for r in api.get("/api/v1/aggregates/devices?group_by=fleet_state").json()["results"]
    }
    assert counts == {s: list(expected.values()).count(s) for s in set(expected.values())}


def test_map_cells_name_the_holder_for_visible_namespaces_only(alpha, client):
    client.force_login(make_user("sam", namespaces=["team-a"]))
    body = client.get(reverse("inventory:fleet-map")).content.decode()
    assert "team-a/train-1" in body
    assert "team-b/stuck-claim" not in body and "claim in another namespace" in body


@pytest.mark.parametrize(
    "exprs, driver",
    [
        (["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"], "gpu.nvidia.com"),
        (['device.attributes["x.com"].a == 1 && device.driver == "x.com"'], "x.com"),
        (["device.driver == 'a.com' || device.driver == 'b.com'"], None),  # not a conjunct
        (["device.driver == 'a.com' && x ? y : z"], None),
        (["device.attributes['a.com'].type == 'gpu'"], None),
    ],
)
def test_pinned_driver(exprs, driver):
    assert classmatch.pinned_driver(exprs) == driver


def test_class_match_counts_equal_evaluating_every_device(alpha):
    from dra import cel

    classes = list(DeviceClass.objects.order_by("name"))
    classmatch.annotate_matches(classes)
    for cls in classes:
        compiled = [cel.compile_selector(s["cel"]["expression"]) for s in cls.selectors]
        brute = sum(
            all(
                c.evaluate(cel.make_device(d.driver, d.attributes, d.capacity, d.allow_multiple_allocations))
                for c in compiled
            )
            for d in Device.objects.filter(cluster_id=cls.cluster_id)
        )
        assert (cls.name, cls.match_count, cls.match_error) == (cls.name, brute, "")
    assert [c.match_count for c in classes] == [11, 2]  # 8 H100 + full A100 + 2 on node-c; two MIG slices
