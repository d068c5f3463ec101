"""Indexes of the mirrored tables (mirror.models.text_indexes): every text column the sync and the
pages look rows up by has one plain b-tree index that starts with it, and on PostgreSQL no index of
the tables the sync writes uses a LIKE-only operator class (Django's `_like` twin of `db_index=True`, which no query uses and
every write of the sync pays for)."""

import pytest
from django.apps import apps
from django.db import connection

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]

# Single text columns that queries filter on alone (by uid: owners and releases; by node: the node
# page and the node filters; by state: the lists).
LOOKED_UP = {
    "claims.ResourceClaim": ("uid", "namespace", "state", "node_name", "owner_pod_uid"),
    "claims.Pod": ("uid", "namespace", "phase", "node_name"),
    "claims.PodFootprint": ("node_name",),
    "claims.ClaimConsumer": ("uid",),
    "claims.ClaimStateChange": ("uid",),
    "claims.Finding": ("rule", "namespace", "claim_uid"),
    "claims.ResourceClaimTemplate": ("uid", "namespace"),
    "inventory.ResourceSlice": ("uid", "namespace", "driver", "pool", "node_name"),
    "inventory.Device": ("node_name", "allocation_state"),
    "inventory.Node": ("uid", "namespace"),
    "inventory.DeviceClass": ("uid", "namespace"),
    "inventory.DeviceTaintRule": ("uid", "namespace"),
    "inventory.Namespace": ("uid", "namespace"),
    "mirror.KubeEvent": ("uid", "namespace"),
}


def _indexes(table):
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, table)


@pytest.mark.parametrize("label", sorted(LOOKED_UP))
def test_looked_up_columns_keep_an_index(label):
    model = apps.get_model(label)
    leading = {tuple(c["columns"])[0] for c in _indexes(model._meta.db_table).values() if c["index"] and c["columns"]}
    missing = [f for f in LOOKED_UP[label] if model._meta.get_field(f).column not in leading]
    assert not missing, f"{label}: no index starts with {missing}"


def test_no_like_only_indexes_on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("operator classes for LIKE are PostgreSQL's")
    # The tables the sync writes (a unique name of a tiny table, e.g. a cluster's, may keep its twin).
    tables = [apps.get_model(label)._meta.db_table for label in LOOKED_UP]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexdef LIKE %s",
            [tables, "%pattern_ops%"],
        )
        found = cursor.fetchall()
    assert found == []
    # The check itself sees such an index where one exists (e.g. the auth app's username twin).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'auth_user' AND indexdef LIKE %s", ["%pattern_ops%"]
        )
        assert cursor.fetchone()[0] >= 1


# The search box's "name contains" lookups and its GPU-UUID lookup (mirror/search_indexes.py): each
# index must match the expression Django writes for the lookup, or PostgreSQL cannot use it.
SEARCHED = [
    ("inventory.Node", "name__icontains", "h100", "inventory_node_name_trgm"),
    ("inventory.ResourceSlice", "name__icontains", "h100", "inventory_resourceslice_name_trgm"),
    ("inventory.Device", "name__icontains", "gpu-1", "inventory_device_name_trgm"),
    ("claims.ResourceClaim", "name__icontains", "train", "claims_resourceclaim_name_trgm"),
    ("claims.ResourceClaim", "owner_pod_name__icontains", "train", "claims_resourceclaim_owner_pod_name_trgm"),
    ("claims.Pod", "name__icontains", "train", "claims_pod_name_trgm"),
    ("inventory.Device", "attribute_values__uuid", "GPU-8f3c", "inventory_device_uuid_idx"),
]


@pytest.mark.parametrize("label,lookup,value,index", SEARCHED, ids=[f"{s[0]}.{s[1]}" for s in SEARCHED])
def test_search_lookups_can_use_their_index(label, lookup, value, index):
    if connection.vendor != "postgresql":
        pytest.skip("trigram indexes are PostgreSQL's (pg_trgm); SQLite scans its small tables")
    queryset = apps.get_model(label).objects.filter(**{lookup: value}).order_by()  # no ordering index walk
    with connection.cursor() as cursor:
        # Empty test tables make a scan cheapest; with scans priced out the planner takes any index
        # that can answer the lookup, and none when the index's expression differs from the query's.
        cursor.execute("SET LOCAL enable_seqscan = off")
    plan = queryset.explain()
    assert index in plan, plan


def test_the_preview_pages_pending_claims_are_read_in_index_order():
    """The preview page lists a cluster's pending claims newest first (PreviewView.pending_claims):
    PostgreSQL reads them in claims_claim_state_new_idx's order and stops at the page, instead of
    sorting every pending claim (70 ms at 20,000 nodes)."""
    if connection.vendor != "postgresql":
        pytest.skip("the plan is PostgreSQL's")
    from claims.models import ResourceClaim
    from mirror.models import Cluster

    cluster = Cluster.objects.create(name="c")
    queryset = ResourceClaim.objects.pending().filter(cluster=cluster).newest_first()[:25]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # empty test tables: price the scan out, as above
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        # On empty tables an index on state alone plus a sort of nothing costs the same as the ordered
        # index, and the planner's pick then depends on statistics other tests left: price the sort
        # out too, so the plan shows whether an index can give this order at all.
        cursor.execute("SET LOCAL enable_sort = off")
    plan = queryset.explain()
    assert "claims_claim_state_new_idx" in plan and "Sort" not in plan, plan
