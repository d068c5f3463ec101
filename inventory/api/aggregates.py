"""Device counts grouped by cluster / node / driver / pool / model / state.

Hand-written SQL around an ORM-built device query: counting 40,000 devices by state needs the
allocation results joined once as a grouped table; the ORM can only express state as a
correlated EXISTS per device, which PostgreSQL runs once per row (about ten times slower).
The SQL is plain SQL-92 (CASE, MAX, LEFT JOIN) so it runs on SQLite too.
"""

from django.db import connection
from django.db.models.fields.json import KT
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.models import AllocationResult
from gpudash.api.filters import check_params
from gpudash.api.permissions import IsViewer
from inventory.filtersets import DeviceFilterSet
from inventory.models import Cluster, Device
from inventory.querysets import DEVICE_STATES

MODEL_ATTRIBUTE = "productName"
GROUPS = ("cluster", "node", "driver", "pool", "model", "state")
DEFAULT_GROUPS = ("cluster", "model", "state")
_COLUMNS = {"cluster": "d.cluster_id", "node": "d.node_name", "driver": "d.driver", "pool": "d.pool", "model": "d.model"}

_STATE_SQL = """CASE WHEN a.exclusive = 1 THEN 'allocated' WHEN a.shared = 1 THEN 'shared'
    WHEN d.tainted THEN 'tainted' WHEN a.admin = 1 THEN 'admin' ELSE 'free' END"""


def _allocations_sql():
    table = AllocationResult._meta.db_table
    return f"""SELECT cluster_id, driver, pool, device,
        MAX(CASE WHEN NOT admin_access AND share_id = '' THEN 1 ELSE 0 END) AS exclusive,
        MAX(CASE WHEN NOT admin_access AND share_id <> '' THEN 1 ELSE 0 END) AS shared,
        MAX(CASE WHEN admin_access THEN 1 ELSE 0 END) AS admin
        FROM {table} GROUP BY cluster_id, driver, pool, device"""


def device_counts(devices, group_by):
    """[{group: value, ..., "count": n}] for a filtered Device queryset."""
    inner = devices.order_by().annotate(model=KT(f"attribute_values__{MODEL_ATTRIBUTE}")).values(
        "cluster_id", "node_name", "driver", "pool", "name", "tainted", "model"
    )
    inner_sql, params = inner.query.sql_with_params()
    selects = [_STATE_SQL if g == "state" else _COLUMNS[g] for g in group_by]
    select_list = ", ".join(f"{expr} AS g{i}" for i, expr in enumerate(selects))
    positions = ", ".join(str(i + 1) for i in range(len(selects)))
    sql = f"""SELECT {select_list}, COUNT(*) FROM ({inner_sql}) d
        LEFT JOIN ({_allocations_sql()}) a
          ON a.cluster_id = d.cluster_id AND a.driver = d.driver AND a.pool = d.pool AND a.device = d.name
        GROUP BY {positions} ORDER BY {positions}"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    cluster_names = dict(Cluster.objects.values_list("id", "name")) if "cluster" in group_by else {}
    out = []
    for row in rows:
        item = dict(zip(group_by, row[:-1]))
        if "cluster" in item:
            item["cluster"] = cluster_names.get(item["cluster"], str(item["cluster"]))
        if "model" in item and item["model"] is None:
            item["model"] = ""
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
    OpenApiParameter("tainted", OpenApiTypes.BOOL),
    OpenApiParameter("attribute", OpenApiTypes.STR, many=True, explode=True, description="NAME:VALUE, repeatable."),
    OpenApiParameter("capacity", OpenApiTypes.STR, many=True, explode=True, description="NAME OP QUANTITY, repeatable."),
]


class DeviceAggregateView(APIView):
    """Device counts grouped by any of cluster, node, driver, pool, model (productName), state."""

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
