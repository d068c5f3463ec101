"""/api/v1/aggregates/devices and /gpus read the per-node summary the sync keeps (inventory/summary.py):
after every kind of change the sync applies, each grouping and filter equals a count over every
device computed here one device at a time, and the device-row path (filters the summary cannot
answer) gives the same counts."""

import copy
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from claims.models import Finding
from inventory import devicekinds, devicestate, fleet
from inventory.api.aggregates import device_counts
from inventory.models import Device
from mirror.models import Cluster
from mirror.sync.apply import apply_batch, apply_object, delete_object
from tests.ui_fixtures import A100, H100, claim, fleet_objects, gpu, load_fleet, make_user, node, resource_slice

pytestmark = pytest.mark.django_db

GROUPINGS = [
    ["cluster", "model", "state"],
    ["model", "state"],
    ["cluster", "node", "fleet_state"],
    ["driver", "pool", "kind", "state"],
    ["kind", "fleet_state"],
    ["state"],
    ["node"],
]
FILTERS = [
    {},
    {"cluster": "alpha"},
    {"node": "node-a"},
    {"kind": "partition"},
    {"state": "free"},
    {"state": "allocated"},
    {"fleet_state": "unhealthy"},
    {"fleet_state": "stuck", "cluster": "alpha"},
    {"driver": "net.example.com"},
]


@pytest.fixture
def alpha(db):
    cluster = load_fleet()
    # A NIC without productName (its model attribute names it) and a slice with no node (allNodes).
    nic = resource_slice("node-a", [{"name": "nic-0", "attributes": {"model": {"string": "cx7"}}}])
    nic["metadata"]["name"] = "node-a-nic"
    nic["spec"]["driver"] = "net.example.com"
    apply_object(cluster, "ResourceSlice", nic)
    fabric = resource_slice("fabric", [gpu("gpu-0", A100)])
    fabric["spec"].pop("nodeName")
    fabric["spec"]["allNodes"] = True
    apply_object(cluster, "ResourceSlice", fabric)
    apply_batch(
        cluster, "ResourceClaim", [("ADDED", claim("ops", "watch", results=["gpu-6"], node_name="node-a", admin=True))]
    )  # admin only
    return cluster


@pytest.fixture
def api(client):
    user = make_user("agg-viewer")
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
    return client


# --- the reference: every device, one at a time ---------------------------------------------------


def devices_with_state():
    names = dict(Cluster.objects.values_list("id", "name"))
    out = []
    for d in fleet.states_for(Device.objects.all()):
        out.append(
            {
                "cluster": names[d.cluster_id],
                "node": d.node_name,
                "driver": d.driver,
                "pool": d.pool,
                "kind": d.kind,
                "model": d.attribute_value("productName") or d.attribute_value("model") or "",
                "fleet_state": d.st.state,
                "state": devicestate.API_STATE_OF[d.st.state],
                "device": d,
            }
        )
    return out


def scan(group_by, filters):
    counts = Counter()
    for d in devices_with_state():
        if all(d[k] == v for k, v in filters.items()):
            counts[tuple(d[g] for g in group_by)] += 1
    return [{**dict(zip(group_by, key)), "count": n} for key, n in sorted(counts.items())]


def gpu_kinds():
    """What aggregates/gpus' `kinds` must say: physical GPUs are (pool, parent) groups, free when no
    device of theirs is held (admin access aside) or tainted and their node is Ready."""
    out = Counter()
    gpus = {}
    for d in devices_with_state():
        dev, kind = d["device"], d["kind"]
        free = d["fleet_state"] == fleet.FREE
        out[{devicekinds.GPU: "gpu_devices", devicekinds.PARTITION: "partitions"}.get(kind, "other")] += 1
        if kind == devicekinds.PARTITION:
            out["partitions_free"] += free
        elif kind == devicekinds.OTHER:
            out["other_free"] += free
        if kind in (devicekinds.GPU, devicekinds.PARTITION):
            busy = (
                (dev.held_by_claim_id is not None and dev.allocation_state != devicestate.ADMIN)
                or dev.tainted
                or fleet.UNHEALTHY in dev.st.flags
            )
            key = (dev.cluster_id, dev.driver, dev.pool, dev.parent)
            gpus[key] = gpus.get(key, False) or busy
    out["gpus"] = len(gpus)
    out["gpus_free"] = sum(1 for busy in gpus.values() if not busy)
    return {
        **{
            k: out[k]
            for k in ("gpus", "gpus_free", "gpu_devices", "partitions", "partitions_free", "other", "other_free")
        },
        # Partition-aware capacity (tests/inventory/test_partition_capacity.py counts it on a MIG fleet): these
        # fleets publish their partitions in the slice that holds the counter set, whose devices the
        # 1.36 allocator never considers, so no partition can be created.
        "partition_profiles": {},
        "gpus_stranded": 0,
    }


def assert_aggregates_match_a_scan(api):
    for group_by in GROUPINGS:
        for filters in FILTERS:
            body = api.get("/api/v1/aggregates/devices", {"group_by": group_by, **filters}).json()
            want = scan(group_by, filters)
            assert body["results"] == want, (group_by, filters)
            assert body["total"] == sum(r["count"] for r in want)
        # The device-row path (what attribute/capacity/tainted filters use) counts the same.
        assert device_counts(Device.objects.all(), group_by) == scan(group_by, {}), group_by
    assert api.get("/api/v1/aggregates/gpus").json()["kinds"] == gpu_kinds()


# --- tests ---------------------------------------------------------------------------------------


def test_aggregates_as_loaded(alpha, api):
    states = {d["fleet_state"] for d in devices_with_state()}
    assert states == set(devicestate.STATES)  # every state the summary path must decide is there
    assert_aggregates_match_a_scan(api)
    # The model is productName, else the model attribute (as on the overview).
    by_model = {
        (r["model"], r["state"]): r["count"]
        for r in api.get("/api/v1/aggregates/devices?group_by=model&group_by=state").json()["results"]
    }
    assert by_model[("cx7", "free")] == 1 and by_model[(H100, "free")] == 4


def test_aggregates_past_the_not_ready_list_limit(alpha, api, monkeypatch):
    """With more NotReady nodes than devicestate lists as constants, the counts test each row with
    an EXISTS probe instead, and still equal the per-device scan."""
    monkeypatch.setattr(devicestate, "NOT_READY_LIST_LIMIT", 0)
    assert_aggregates_match_a_scan(api)


def test_aggregates_read_the_summary_not_the_devices(alpha, api):
    with CaptureQueriesContext(connection) as ctx:
        assert (
            api.get(
                "/api/v1/aggregates/devices", {"group_by": ["cluster", "model", "state"], "state": "free"}
            ).status_code
            == 200
        )
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    assert "inventory_nodedevicesummary" in sql
    # Device rows are read only for those held by stuck claims (the UNION's second part).
    device_reads = [q["sql"] for q in ctx.captured_queries if 'FROM "inventory_device"' in q["sql"]]
    assert len(device_reads) == 1 and "held_by_claim_id" in device_reads[0] and "UNION ALL" in device_reads[0]
    # A filter the summary cannot answer counts the device rows.
    with CaptureQueriesContext(connection) as ctx:
        body = api.get("/api/v1/aggregates/devices", {"group_by": ["node"], "capacity": "memory>=40Gi"}).json()
    assert "inventory_nodedevicesummary" not in " ".join(q["sql"] for q in ctx.captured_queries)
    assert body["total"] == sum(1 for d in devices_with_state() if d["kind"] == devicekinds.GPU)


def test_aggregates_follow_claims_allocated_and_released(alpha, api):
    apply_batch(
        alpha,
        "ResourceClaim",
        [("ADDED", claim("team-a", "more", count=2, results=["gpu-2", "gpu-3"], node_name="node-a"))],
    )
    assert_aggregates_match_a_scan(api)
    delete_object(alpha, "ResourceClaim", claim("team-a", "train-1"))  # released
    assert_aggregates_match_a_scan(api)
    delete_object(alpha, "ResourceClaim", claim("team-b", "infer"))  # the MIG slice's counters come back
    assert_aggregates_match_a_scan(api)
    apply_batch(alpha, "ResourceClaim", [("ADDED", claim("team-a", "share", results=["gpu-0"], node_name="fabric"))])
    assert_aggregates_match_a_scan(api)


def test_aggregates_follow_devices_added_and_removed(alpha, api):
    raw = next(
        copy.deepcopy(r) for kind, r in fleet_objects() if kind == "ResourceSlice" and r["spec"]["nodeName"] == "node-a"
    )
    raw["metadata"]["resourceVersion"] = "99999"
    raw["spec"]["devices"].append(gpu("gpu-8", A100, taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]))
    apply_object(alpha, "ResourceSlice", raw)  # a second model and a tainted device on node-a
    assert_aggregates_match_a_scan(api)
    node_c = next(
        copy.deepcopy(r) for kind, r in fleet_objects() if kind == "ResourceSlice" and r["spec"]["nodeName"] == "node-c"
    )
    delete_object(alpha, "ResourceSlice", node_c)  # the driver stops publishing there (placeholders count nothing)
    assert_aggregates_match_a_scan(api)
    apply_object(alpha, "ResourceSlice", resource_slice("node-d", [gpu(f"gpu-{i}", H100) for i in range(4)]))
    assert_aggregates_match_a_scan(api)


def test_aggregates_follow_findings_and_readiness(alpha, api):
    Finding.objects.update(cleared_at=timezone.now())  # the stuck claim recovers
    assert_aggregates_match_a_scan(api)
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
    assert_aggregates_match_a_scan(api)  # a MIG slice's holder (stored "allocated") is stuck now
    apply_object(alpha, "Node", node("node-a", ready=False))
    apply_object(alpha, "Node", node("node-c", ready=True))
    assert_aggregates_match_a_scan(api)


def test_two_clusters_add_up(alpha, api):
    beta = load_fleet("beta")
    delete_object(beta, "ResourceClaim", claim("team-a", "train-1"))
    assert_aggregates_match_a_scan(api)
    body = api.get("/api/v1/aggregates/devices", {"group_by": ["cluster"], "cluster": "beta"}).json()
    assert body["results"] == [{"cluster": "beta", "count": Device.objects.filter(cluster=beta).count()}]
