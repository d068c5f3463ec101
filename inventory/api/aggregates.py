"""Device counts grouped by cluster / node / driver / pool / model / kind / state.

Read from the per-node summary the watchers keep (inventory/summary.py, as the overview and the
fleet map read it) whenever the groups and filters are the summary's own columns: a few thousand
summary rows instead of every device, with the read-time parts of the state (stuck claims, NotReady
nodes) applied as inventory/fleet.py applies them. Filters the summary cannot answer (attribute,
capacity, tainted, name, slice) count the device rows in one GROUP BY instead; both give the same
counts (tests/inventory/test_api_aggregates.py checks them against a per-device scan).
"""

from collections import Counter, defaultdict

from django.db.models import Count, F, Q, Sum, Value
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from inventory import devicestate, fleet, summary
from inventory.devicestate import ADMIN, ALLOCATED, FREE, PARTIAL
from inventory.filtersets import DeviceFilterSet
from inventory.models import Device, NodeDeviceSummary
from inventory.querysets import DEVICE_STATES
from mirror.api.filters import check_params, filter_errors
from mirror.api.permissions import IsViewer
from mirror.models import Cluster

GROUPS = ("cluster", "node", "driver", "pool", "model", "kind", "state", "fleet_state")
DEFAULT_GROUPS = ("cluster", "model", "state")
# The model is the summary's (and the overview's): productName, else the model attribute.
_COLUMNS = {
    "cluster": "cluster_id",
    "node": "node_name",
    "driver": "driver",
    "pool": "pool",
    "model": "g_model",
    "kind": "kind",
    "state": "g_state",
    "fleet_state": "g_fleet_state",
}
# Groupings and filters the summary answers: its key columns (summary.KEY), and the states.
_SUMMARY_COLUMNS = {
    "cluster": "cluster_id",
    "node": "node_name",
    "driver": "driver",
    "pool": "pool",
    "model": "model",
    "kind": "kind",
}
SUMMARY_FILTERS = frozenset(("cluster", "node", "driver", "pool", "kind", "state", "fleet_state"))
_SUMS = (
    "free",
    "unready_free",
    "tainted_unheld",
    "allocated",
    "admin",
    "partial",
    "stuck",
    "stuck_allocated",
    "stuck_admin",
    "stuck_partial",
)


def _results(counts, group_by):
    """[{group: value, ..., "count": n}] from {group values: n}, in the groups' order, cluster names shown."""
    cluster_names = dict(Cluster.objects.values_list("id", "name")) if "cluster" in group_by and counts else {}
    out = []
    for key in sorted(k for k, n in counts.items() if n):
        item = dict(zip(group_by, key))
        if "cluster" in item:
            item["cluster"] = cluster_names.get(item["cluster"], str(item["cluster"]))
        item["count"] = counts[key]
        out.append(item)
    return out


def device_counts(devices, group_by):
    """[{group: value, ..., "count": n}] for a filtered Device queryset: one GROUP BY over the rows."""
    annotations = {}
    not_ready = devicestate.not_ready_nodes() if {"state", "fleet_state"} & set(group_by) else None
    if "model" in group_by:
        annotations["g_model"] = summary.MODEL
    if "state" in group_by:
        annotations["g_state"] = devicestate.api_state_expression(not_ready)
    if "fleet_state" in group_by:
        annotations["g_fleet_state"] = devicestate.state_expression(not_ready)
    columns = [_COLUMNS[g] for g in group_by]
    rows = devices.order_by().annotate(**annotations).values_list(*columns).annotate(n=Count("id")).order_by()
    return _results({tuple(row[:-1]): row[-1] for row in rows}, group_by)


def summary_counts(filters, group_by):
    """device_counts from the per-node summary, for `filters` (cleaned values) among SUMMARY_FILTERS.

    One query: the summary rows summed per group (NotReady nodes' unheld devices apart), UNION ALL
    the devices held by stuck claims counted per group and stored state (findings come and go
    without the pool changing, so the summary does not hold them; they are few, read through the
    index on held_by_claim_id). Each group's states are then decided as the overview decides them.
    """
    columns = ["cluster_id"] + [c for g, c in _SUMMARY_COLUMNS.items() if g in group_by and g != "cluster"]
    scope = Q()
    for name, column in (
        ("cluster", "cluster_id"),
        ("node", "node_name"),
        ("driver", "driver"),
        ("pool", "pool"),
        ("kind", "kind"),
    ):
        if name in filters:
            scope &= Q(**{column: filters[name].pk if name == "cluster" else filters[name]})
    keys = [f"k{i}" for i in range(len(columns))]
    zero = Value(0)
    unready = Q(unready=True)
    # Placeholder rows of pools not publishing now count nothing.
    rows = (
        NodeDeviceSummary.objects.filter(scope)
        .exclude(n_total=0)
        .annotate(unready=devicestate.not_ready_nodes([filters["cluster"].pk] if "cluster" in filters else None))
        .annotate(**{k: F(c) for k, c in zip(keys, columns)})
        .values(*keys)
        .annotate(
            free=Sum("n_free", filter=~unready),
            unready_free=Sum("n_free", filter=unready),
            tainted_unheld=Sum("n_tainted_unheld"),
            allocated=Sum("n_allocated"),
            admin=Sum("n_admin"),
            partial=Sum("n_partial"),
            stuck=zero,
            stuck_allocated=zero,
            stuck_admin=zero,
            stuck_partial=zero,
        )
        .order_by()
    )
    stuck = (
        Device.objects.filter(scope, held_by_claim_id__in=devicestate.stuck_claim_ids())
        .annotate(**{k: summary.MODEL if c == "model" else F(c) for k, c in zip(keys, columns)})
        .values(*keys)
        .annotate(
            free=zero,
            unready_free=zero,
            tainted_unheld=zero,
            allocated=zero,
            admin=zero,
            partial=zero,
            stuck=Count("id"),
            stuck_allocated=Count("id", filter=Q(allocation_state=ALLOCATED)),
            stuck_admin=Count("id", filter=Q(allocation_state=ADMIN)),
            stuck_partial=Count("id", filter=Q(allocation_state=PARTIAL)),
        )
        .order_by()
    )
    sums = defaultdict(Counter)
    for row in rows.union(stuck, all=True):
        sums[tuple(row[k] for k in keys)].update({s: row[s] or 0 for s in _SUMS})
    counts = Counter()
    for key, group in sums.items():
        values = dict(zip(columns, key))
        held = {ALLOCATED: group["stuck_allocated"], ADMIN: group["stuck_admin"], PARTIAL: group["stuck_partial"]}
        held[FREE] = group["stuck"] - sum(held.values())
        for fleet_state, n in fleet._decide(group, held).items():  # the overview's decision, so both agree
            api_state = devicestate.API_STATE_OF[fleet_state]
            if filters.get("state", api_state) != api_state or filters.get("fleet_state", fleet_state) != fleet_state:
                continue
            counts[
                tuple(
                    api_state if g == "state" else fleet_state if g == "fleet_state" else values[_SUMMARY_COLUMNS[g]]
                    for g in group_by
                )
            ] += n
    return _results(counts, group_by)


# The device list's filters apply to the counts too.
DEVICE_FILTER_PARAMETERS = [
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name."),
    OpenApiParameter("node", OpenApiTypes.STR),
    OpenApiParameter("driver", OpenApiTypes.STR),
    OpenApiParameter("pool", OpenApiTypes.STR),
    OpenApiParameter("state", OpenApiTypes.STR, enum=DEVICE_STATES),
    OpenApiParameter("fleet_state", OpenApiTypes.STR, enum=devicestate.STATES),
    OpenApiParameter("tainted", OpenApiTypes.BOOL),
    OpenApiParameter(
        "kind",
        OpenApiTypes.STR,
        enum=("gpu", "partition", "other"),
        description="Device kind (a whole GPU, a partition of one, other devices).",
    ),
    OpenApiParameter("attribute", OpenApiTypes.STR, many=True, explode=True, description="NAME:VALUE, repeatable."),
    OpenApiParameter(
        "capacity", OpenApiTypes.STR, many=True, explode=True, description="NAME OP QUANTITY, repeatable."
    ),
]


class DeviceAggregateView(APIView):
    """Device counts grouped by any of cluster, node, driver, pool, model (productName), kind, state.

    Counts devices as published: a GPU's MIG partitions are devices of kind "partition" beside it
    (aggregates/gpus counts physical GPUs)."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "group_by",
                OpenApiTypes.STR,
                many=True,
                enum=GROUPS,
                explode=True,
                description=f"Repeatable; default {', '.join(DEFAULT_GROUPS)}.",
            ),
            *DEVICE_FILTER_PARAMETERS,
        ],
        filters=False,
        responses=inline_serializer(
            "DeviceAggregate",
            {
                "group_by": serializers.ListField(child=serializers.CharField()),
                "total": serializers.IntegerField(),
                "results": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    def get(self, request):
        filterset_params = set(DeviceFilterSet.base_filters) - {"ordering"}
        check_params(request, filterset_params | {"group_by", "format"})
        group_by = request.query_params.getlist("group_by") or list(DEFAULT_GROUPS)
        bad = [g for g in group_by if g not in GROUPS]
        if bad:
            raise ValidationError({"group_by": [f"Unknown grouping {bad[0]!r}; choose from {', '.join(GROUPS)}."]})
        group_by = list(dict.fromkeys(group_by))
        filterset = DeviceFilterSet(request.query_params, queryset=Device.objects.all(), request=request)
        if not filterset.is_valid():
            raise filter_errors(filterset)
        filters = {k: v for k, v in filterset.form.cleaned_data.items() if v not in (None, "", [])}
        if set(filters) <= SUMMARY_FILTERS:
            results = summary_counts(filters, group_by)
        else:
            results = device_counts(filterset.qs, group_by)
        return Response({"group_by": group_by, "total": sum(r["count"] for r in results), "results": results})


class GpuAggregateView(APIView):
    """Whole GPUs across the fleet: physical GPUs (a GPU and its partitions count once) and free ones,
    partitions and other devices apart; DRA devices, device-plugin GPUs and HAMi vGPU shares side by
    side, per model; nodes by number of free whole GPUs per model; devices not published now."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name; default every cluster.")],
        filters=False,
        responses=inline_serializer(
            "GpuAggregate",
            {
                "kinds": serializers.DictField(
                    help_text="gpus, gpus_free, gpu_devices, partitions (published MIG placements; overlapping "
                    "ones exclude each other), partitions_free (those devices in state free: not a capacity), other, "
                    "other_free; partition_profiles {profile: {free, total}}: per profile how many more partitions "
                    "one claim could get now from the shared counters (profiles are alternatives, never summed), of "
                    "how many with nothing in use; gpus_stranded: whole GPUs partly used by partitions"
                ),
                "partitions_by_node": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Where partitions can still be created: per node with partitions or stranded GPUs, "
                    "{cluster, node, profiles {profile: {free, total}}, stranded} (NotReady nodes: free 0).",
                ),
                "sources": serializers.DictField(help_text="dra, device-plugin, hami: totals and per-model counts"),
                "free_gpu_histogram": serializers.ListField(child=serializers.DictField()),
                "unpublished": serializers.DictField(help_text="devices and nodes whose driver publishes nothing now"),
            },
        ),
    )
    def get(self, request):
        from inventory import fleet

        check_params(request, {"cluster", "format"})
        cluster_ids = None
        if request.query_params.get("cluster"):
            cluster = Cluster.objects.filter(name=request.query_params["cluster"]).first()
            if cluster is None:
                raise ValidationError({"cluster": [f"No cluster named {request.query_params['cluster']!r}."]})
            cluster_ids = [cluster.id]
        snap = fleet.FleetSnapshot(cluster_ids, user=request.user)
        names = dict(Cluster.objects.values_list("id", "name"))
        unpublished = snap.unpublished()
        return Response(
            {
                "kinds": snap.kind_totals(),
                "sources": fleet.source_totals(snapshot=snap),
                "partitions_by_node": [
                    {"cluster": names.get(cid, str(cid)), "node": node, **cap}
                    for (cid, node), cap in sorted(snap.partition_capacity("cluster_id", "node_name").items())
                    if node
                ],
                "free_gpu_histogram": [
                    {
                        "model": m["model"],
                        "nodes": m["nodes"],
                        "nodes_by_free_gpus": {str(b["free"]): b["nodes"] for b in m["bars"]},
                    }
                    for m in snap.free_gpu_histogram()
                ],
                "unpublished": {
                    "devices": unpublished["devices"],
                    "nodes": [
                        {
                            "cluster": names.get(cid, str(cid)),
                            "node": node,
                            "since": r["since"],
                            "devices": r["devices"],
                            "drivers": r["drivers"],
                        }
                        for (cid, node), r in sorted(unpublished["rows"].items())
                    ],
                },
            }
        )
