"""The per-node device summary behind the overview and the fleet map (inventory/summary.py, fleet.py),
checked against a per-device computation after every kind of change; and the stored device class
match counts (inventory/classmatch.py, inventory/tasks.py)."""

import copy
from collections import Counter, defaultdict

import pytest
import redis
from django.conf import settings as django_settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from claims.models import Finding
from inventory import classmatch, fleet, summary, tasks
from inventory.models import Device, DeviceClass, NodeDeviceSummary
from inventory.views import FleetMapView
from mirror import debounce
from mirror.sync.apply import apply_batch, apply_object, delete_object
from tests.ui_fixtures import A100, claim, fleet_objects, gpu, load_fleet, make_user, meta, node, resource_slice

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha(db):
    return load_fleet()


# --- the reference: every device's state, one by one ----------------------------------------------


def per_device(cluster_ids=None):
    """What the summary must add up to, from fleet.states_for (one device at a time, no summary)."""
    devices = Device.objects.all() if cluster_ids is None else Device.objects.filter(cluster_id__in=cluster_ids)
    out = {
        "states": Counter(),
        "flags": Counter(),
        "models": defaultdict(Counter),
        "nodes": defaultdict(Counter),
        "map": defaultdict(Counter),
    }
    for d in fleet.states_for(devices):
        st = d.st.state
        model = d.attribute_value("productName") or d.attribute_value("model") or "(no model attribute)"
        out["states"][st] += 1
        out["flags"].update(d.st.flags)
        out["models"][(d.driver, model)][st] += 1
        if d.node_name:
            out["nodes"][(d.cluster_id, d.node_name)][st] += 1
        out["map"][(d.cluster_id, d.node_name or f"pool:{d.pool}")][st] += 1
    return out


def map_rows(snapshot, state=""):
    fleet_map = fleet.FleetMap(snapshot, state=state)
    return fleet_map.decide(list(fleet_map.rows))


def assert_summary_matches_devices(cluster_ids=None):
    expected = per_device(cluster_ids)
    snap = fleet.FleetSnapshot(cluster_ids)
    totals = snap.totals()
    assert totals["by_state"] == {s: expected["states"][s] for s in fleet.STATES}
    assert totals["flags"] == {f: expected["flags"][f] for f in fleet.FLAGS}
    assert totals["total"] == sum(expected["states"].values())
    assert {(r["driver"], r["model"]): dict(r["counts"]) for r in snap.by_model()} == {
        k: dict(c) for k, c in expected["models"].items()
    }
    assert {k: {s: n for s, n in c.items() if s != "total"} for k, c in snap.node_counts().items()} == {
        k: dict(c) for k, c in expected["nodes"].items()
    }
    # Fragmentation: per driver, nodes whose every device is free, and free devices elsewhere.
    whole = sum(1 for c in expected["nodes"].values() if c[fleet.FREE] == sum(c.values()))
    frag = {row["driver"]: row for row in snap.fragmentation()}["gpu.nvidia.com"]
    assert (frag["nodes"], frag["whole_free_nodes"], frag["free_devices"]) == (
        len(expected["nodes"]),
        whole,
        sum(c[fleet.FREE] for c in expected["nodes"].values()),
    )
    # The map: every row's states and cells, and "nodes with a device in state X" for each X.
    rows = map_rows(snap)
    # (rows of nodes whose driver publishes nothing now keep their place, without devices)
    assert {(r["cluster_id"], r["node"]): dict(r["states"]) for r in rows if r["devices"] or not r["unpublished"]} == {
        k: dict(c) for k, c in expected["map"].items()
    }
    for r in rows:
        assert Counter(d["st"].state for d in r["devices"]) == r["states"]
    for state in fleet.STATES:
        want = {k for k, c in expected["map"].items() if c[state]}
        if state == fleet.UNHEALTHY:
            want |= {(r["cluster_id"], r["node"]) for r in rows if r["unhealthy"]}
        assert {(r["cluster_id"], r["node"]) for r in map_rows(snap, state)} == want, state
    # The rows the apply path kept equal a rebuild from scratch (nothing stale, nothing missing).
    kept = stored_summary()
    summary.rebuild(Q())
    assert stored_summary() == kept


def stored_summary():
    return sorted(
        NodeDeviceSummary.objects.values_list(
            *[f.attname for f in NodeDeviceSummary._meta.concrete_fields if f.attname != "id"]
        )
    )


def slice_raw(node_name):
    return next(
        copy.deepcopy(r)
        for kind, r in fleet_objects()
        if kind == "ResourceSlice" and r["spec"]["nodeName"] == node_name
    )


# --- the summary stays consistent ----------------------------------------------------------------


def test_summary_matches_the_devices_as_loaded(alpha):
    # One per node and device kind: one driver, one model each, node-b's MIG partitions a row of their own.
    assert sorted(NodeDeviceSummary.objects.filter(cluster=alpha).values_list("node_name", "kind")) == [
        ("node-a", "gpu"),
        ("node-b", "gpu"),
        ("node-b", "partition"),
        ("node-c", "gpu"),
    ]
    assert per_device()["states"][fleet.STUCK] == 1  # the fixture has every state the reads apply
    assert_summary_matches_devices()
    assert_summary_matches_devices([alpha.id])


def test_summary_follows_claim_changes(alpha):
    delete_object(alpha, "ResourceClaim", claim("team-a", "train-1"))
    # node-a keeps an admin watcher and the stuck claim's GPU (stored "allocated", shown stuck):
    # "nodes with allocated devices" must not list it any more.
    assert_summary_matches_devices()
    assert (alpha.id, "node-a") not in {
        (r["cluster_id"], r["node"]) for r in map_rows(fleet.FleetSnapshot(), fleet.ALLOCATED)
    }
    apply_batch(
        alpha, "ResourceClaim", [("ADDED", claim("team-a", "again", results=["gpu-1", "gpu-2"], node_name="node-a"))]
    )
    assert_summary_matches_devices()
    delete_object(alpha, "ResourceClaim", claim("team-b", "infer"))  # the MIG slice's counters come back
    assert_summary_matches_devices()


def test_summary_follows_slice_changes(alpha):
    raw = slice_raw("node-a")
    raw["metadata"]["resourceVersion"] = "99999"
    raw["spec"]["devices"].append(gpu("gpu-8", A100, taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]))
    apply_object(alpha, "ResourceSlice", raw)  # a second model and a tainted device on node-a
    assert NodeDeviceSummary.objects.filter(cluster=alpha, node_name="node-a").count() == 2
    assert_summary_matches_devices()
    before = NodeDeviceSummary.objects.filter(cluster=alpha, node_name="node-c").count()
    delete_object(alpha, "ResourceSlice", slice_raw("node-c"))
    # The driver stopped publishing: placeholders (no counts) keep the node's map row (issue 11).
    assert (
        list(
            NodeDeviceSummary.objects.filter(cluster=alpha, node_name="node-c").values_list("n_total", "n_unpublished")
        )
        == [(0, 2)] * before
    )
    assert_summary_matches_devices()
    # A slice for devices without a node (allNodes): its own map row, keyed by pool.
    shared = resource_slice("fabric", [gpu("gpu-0", A100)])
    shared["spec"].pop("nodeName")
    shared["spec"]["allNodes"] = True
    apply_object(alpha, "ResourceSlice", shared)
    assert NodeDeviceSummary.objects.get(cluster=alpha, pool="fabric").map_key == "pool:fabric"
    assert_summary_matches_devices()


def test_findings_and_node_readiness_apply_when_read(alpha):
    Finding.objects.update(cleared_at=timezone.now())  # the stuck claim recovers
    assert_summary_matches_devices()
    assert fleet.FleetSnapshot().totals()["by_state"][fleet.STUCK] == 0
    now = timezone.now()
    Finding.objects.create(
        cluster=alpha,
        rule="r",
        namespace="team-b",
        claim_name="infer",
        claim_uid="uid-team-b-infer",
        summary="s",
        first_seen=now,
        last_seen=now,
    )
    assert_summary_matches_devices()  # a MIG slice's holder is stuck now
    assert fleet.FleetSnapshot().totals()["by_state"][fleet.STUCK] == 1
    apply_object(alpha, "Node", node("node-a", ready=False))
    assert_summary_matches_devices()
    apply_object(alpha, "Node", node("node-c", ready=True))
    assert_summary_matches_devices()
    assert fleet.FleetSnapshot().totals()["flags"][fleet.UNHEALTHY] == 8


def test_all_clusters_add_up(alpha):
    beta = load_fleet("beta")
    delete_object(beta, "ResourceClaim", claim("team-a", "train-1"))
    assert_summary_matches_devices()
    assert_summary_matches_devices([beta.id])


# --- the map pages in SQL, in natural order -------------------------------------------------------


def test_natural_sort_key_orders_like_natural_key():
    names = [
        "node-10",
        "node-9",
        "node-100",
        "node-09",
        "node-1",
        "a-2",
        "b",
        "node-1a",
        "node-1-2",
        "gpu-10-mig-2",
        "gpu-10-mig-10",
        "pool:x",
        "z0",
        "N-3",
        "node-x",
        "node1",
        "node",
        "1a",
        "a",
    ]
    assert sorted(names, key=summary.natural_sort_key) == sorted(names, key=summary.natural_key)


def test_map_rows_are_ordered_and_paged_in_the_database(alpha, client, monkeypatch):
    for name in ("node-10", "node-9", "node-100"):
        apply_object(alpha, "ResourceSlice", resource_slice(name, [gpu("gpu-0", A100)]))
    order = [r["map_key"] for r in fleet.FleetMap(fleet.FleetSnapshot([alpha.id])).rows]
    assert order == ["node-9", "node-10", "node-100", "node-a", "node-b", "node-c"]
    client.force_login(make_user("pat"))
    monkeypatch.setattr(FleetMapView, "nodes_per_page", 4)
    page2 = client.get(reverse("inventory:fleet-map"), {"page": 2}).context
    assert page2["row_count"] == 6 and page2["totals"]["total"] == Device.objects.count()
    assert [(r["node"], len(r["devices"])) for r in page2["page_obj"]] == [
        ("node-b", 3),
        ("node-c", 2),
    ]  # cells of this page only
    filtered = client.get(reverse("inventory:fleet-map"), {"q": "node-1", "state": "free"}).context
    assert [r["node"] for r in filtered["page_obj"]] == ["node-10", "node-100"]
    bad = client.get(reverse("inventory:fleet-map"), {"state": "broken"})
    assert "Unknown state &#x27;broken&#x27;" in bad.content.decode() and bad.context["row_count"] == 0


# --- stored device class counts ------------------------------------------------------------------


@pytest.fixture
def clean_debounce(alpha):
    key = f"gpudash:class-count:{alpha.id}"
    if django_settings.REDIS_URL:
        redis.Redis.from_url(django_settings.REDIS_URL).delete(key)
    tasks._last_request.clear()
    yield
    if django_settings.REDIS_URL:
        redis.Redis.from_url(django_settings.REDIS_URL).delete(key)


@pytest.fixture
def queued(monkeypatch):
    """What request_class_counts would start (the broker and timers are outside these tests)."""
    out = []
    monkeypatch.setattr(
        tasks.count_class_matches, "apply_async", lambda args, countdown: out.append((args[0], countdown))
    )
    monkeypatch.setattr(debounce.threading, "Timer", lambda delay, fn, args: _Started(out, args[0], delay))
    return out


class _Started:
    def __init__(self, out, cluster_id, delay):
        out.append((cluster_id, delay))
        self.daemon = True

    def start(self):
        pass

    def cancel(self):  # mirror.debounce.stop_pending at the test's end
        pass

    def join(self, timeout=None):
        pass


def stored_counts():
    return {c.name: (c.match_count, c.match_error) for c in DeviceClass.objects.order_by("name")}


def test_background_count_stores_what_evaluating_now_gives(alpha):
    assert stored_counts() == {
        "gpu.nvidia.com": (None, ""),
        "mig.nvidia.com": (None, ""),
    }  # nothing counted on the write path
    assert tasks.count_class_matches(alpha.id) == 2
    fresh = list(DeviceClass.objects.order_by("name"))
    classmatch.annotate_matches(fresh)
    assert (
        stored_counts()
        == {c.name: (c.match_count, c.match_error) for c in fresh}
        == {"gpu.nvidia.com": (11, ""), "mig.nvidia.com": (2, "")}
    )
    versions = classmatch.inventory_versions([alpha.id])
    assert all(c.match_computed_at and classmatch.is_current(c, versions) for c in DeviceClass.objects.all())


def test_slice_and_class_changes_ask_for_a_recount_after_commit(
    alpha, clean_debounce, queued, django_capture_on_commit_callbacks
):
    tasks.count_class_matches(alpha.id)
    raw = slice_raw("node-c")
    raw["metadata"]["resourceVersion"] = "99999"
    raw["spec"]["devices"].append(gpu("gpu-2", A100))
    with django_capture_on_commit_callbacks(execute=True):
        apply_object(alpha, "ResourceSlice", raw)
        assert queued == []  # not before the commit
    assert queued == [(alpha.id, tasks.debounce_seconds())]
    assert not any(classmatch.is_current(c, classmatch.inventory_versions()) for c in DeviceClass.objects.all())
    with django_capture_on_commit_callbacks(execute=True):
        apply_object(alpha, "DeviceClass", _class_raw())
    assert len(queued) == 1  # inside the debounce window: the scheduled run counts this too
    tasks.count_class_matches(alpha.id)  # the scheduled run
    assert stored_counts()["gpu.nvidia.com"] == (
        4,
        "",
    )  # the full A100s now (node-b's and node-c's), per the new selector
    with django_capture_on_commit_callbacks(execute=True):
        apply_batch(alpha, "Pod", [])
        apply_object(alpha, "Node", node("node-b"))
    assert len(queued) == 1  # nodes and pods do not change what classes match


def _class_raw():
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": meta("gpu.nvidia.com"),
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.attributes['gpu.nvidia.com'].productName == '{A100}' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                    }
                }
            ]
        },
    }


def test_deleting_a_slice_makes_the_counts_out_of_date(alpha):
    tasks.count_class_matches(alpha.id)
    delete_object(alpha, "ResourceSlice", slice_raw("node-a"))  # the newest resourceVersion stays the same
    assert not any(classmatch.is_current(c, classmatch.inventory_versions()) for c in DeviceClass.objects.all())


def test_pages_read_stored_counts_and_never_count(
    alpha, client, monkeypatch, clean_debounce, queued, django_capture_on_commit_callbacks
):
    def no_counting(*args):
        raise AssertionError("counted during a request")

    client.force_login(make_user("cleo"))
    monkeypatch.setattr(classmatch, "annotate_matches", no_counting)
    with django_capture_on_commit_callbacks(execute=True):
        body = client.get(reverse("inventory:class-list")).content.decode()
    assert body.count("counting…") == 2 and "match-count" not in body
    assert queued == [(alpha.id, tasks.debounce_seconds())]  # the page asked for the count it lacks
    api = client.get("/api/v1/device-classes/").json()["results"]
    assert [(c["matching_devices"], c["matching_counted_at"], c["matching_current"]) for c in api] == [
        (None, None, False)
    ] * 2
    assert api[0]["matching_error"].startswith("not counted yet")

    monkeypatch.undo()
    tasks.count_class_matches(alpha.id)
    monkeypatch.setattr(classmatch, "annotate_matches", no_counting)
    body = client.get(reverse("inventory:class-list")).content.decode()
    assert '<b class="match-count">11</b>' in body and "counted <time datetime=" in body and "recounting" not in body
    api = client.get("/api/v1/device-classes/").json()["results"]
    assert [(c["name"], c["matching_devices"], c["matching_current"]) for c in api] == [
        ("gpu.nvidia.com", 11, True),
        ("mig.nvidia.com", 2, True),
    ]
    assert all(c["matching_counted_at"] for c in api)

    apply_object(alpha, "ResourceSlice", resource_slice("node-d", [gpu("gpu-0", A100)]))
    body = client.get(reverse("inventory:class-list")).content.decode()
    assert (
        '<b class="match-count">11</b>' in body and body.count("recounting…") == 2
    )  # the last count, marked out of date
