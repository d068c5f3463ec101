"""Device counts grouped by cluster / node / driver / pool / model / state.

One GROUP BY over the device table: the state comes from the stored columns and the shared
expression of inventory/devicestate.py (the same the device list and the UI use).
"""

from django.db.models import Count, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from gpudash.api.filters import check_params
from gpudash.api.permissions import IsViewer
from inventory import devicestate
from inventory.filtersets import DeviceFilterSet
from inventory.models import Cluster, Device
from inventory.querysets import DEVICE_STATES

MODEL_ATTRIBUTE = "productName"
GROUPS = ("cluster", "node", "driver", "pool", "model", "kind", "state", "fleet_state")
DEFAULT_GROUPS = ("cluster", "model", "state")
_COLUMNS = {"cluster": "cluster_id", "node": "node_name", "driver": "driver", "pool": "pool", "model": "g_model", "kind": "kind", "state": "g_state", "fleet_state": "g_fleet_state"}


def device_counts(devices, group_by):
    """[{group: value, ..., "count": n}] for a filtered Device queryset."""
    annotations = {}
    if "model" in group_by:
        annotations["g_model"] = Coalesce(KT(f"attribute_values__{MODEL_ATTRIBUTE}"), Value(""), output_field=TextField())
    if "state" in group_by:
        annotations["g_state"] = devicestate.api_state_expression()
    if "fleet_state" in group_by:
        annotations["g_fleet_state"] = devicestate.state_expression()
    columns = [_COLUMNS[g] for g in group_by]
    rows = devices.order_by().annotate(**annotations).values_list(*columns).annotate(n=Count("id")).order_by(*columns)
    cluster_names = dict(Cluster.objects.values_list("id", "name")) if "cluster" in group_by else {}
    out = []
    for row in rows:
        item = dict(zip(group_by, row[:-1]))
        if "cluster" in item:
            item["cluster"] = cluster_names.get(item["cluster"], str(item["cluster"]))
        item["count"] = row[-1]
        out.append(item)
    return out


# The device list's filters apply to the counts too.
DEVICE_FILTER_PARAMETERS = [
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name."),
    OpenApiParameter("node", OpenApiTypes.STR),
    OpenApiParameter("driver", OpenApiTypes.STR),
    OpenApiParameter("pool", OpenApiTypes.STR),
    OpenApiParameter("state", OpenApiTypes.STR, enum=DEVICE_STATES),
    OpenApiParameter("fleet_state", OpenApiTypes.STR, enum=devicestate.STATES),
    OpenApiParameter("tainted", OpenApiTypes.BOOL),
    OpenApiParameter("kind", OpenApiTypes.STR, enum=("gpu", "partition", "other"), description="Device kind (a whole GPU, a partition of one, other devices)."),
    OpenApiParameter("attribute", OpenApiTypes.STR, many=True, explode=True, description="NAME:VALUE, repeatable."),
    OpenApiParameter("capacity", OpenApiTypes.STR, many=True, explode=True, description="NAME OP QUANTITY, repeatable."),
]


class DeviceAggregateView(APIView):
    """Device counts grouped by any of cluster, node, driver, pool, model (productName), kind, state.

    Counts devices as published: a GPU's MIG partitions are devices of kind "partition" beside it
    (aggregates/gpus counts physical GPUs)."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "group_by", OpenApiTypes.STR, many=True, enum=GROUPS, explode=True,
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
            raise ValidationError(filterset.errors)
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
                "kinds": serializers.DictField(help_text="gpus, gpus_free, gpu_devices, partitions, partitions_free, other, other_free"),
                "sources": serializers.DictField(help_text="dra, device-plugin, hami: totals and per-model counts"),
                "free_gpu_histogram": serializers.ListField(child=serializers.DictField()),
                "unpublished": serializers.DictField(help_text="devices and nodes whose driver publishes nothing now"),
            },
        ),
    )
    def get(self, request):
        from inventory import accelerators, fleet

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
        return Response({
            "kinds": snap.kind_totals(),
            "sources": accelerators.source_totals(snapshot=snap),
            "free_gpu_histogram": [
                {"model": m["model"], "nodes": m["nodes"], "nodes_by_free_gpus": {str(b["free"]): b["nodes"] for b in m["bars"]}}
                for m in snap.free_gpu_histogram()
            ],
            "unpublished": {
                "devices": unpublished["devices"],
                "nodes": [
                    {"cluster": names.get(cid, str(cid)), "node": node, "since": r["since"], "devices": r["devices"], "drivers": r["drivers"]}
                    for (cid, node), r in sorted(unpublished["rows"].items())
                ],
            },
        })
