"""GET /api/v1/history/devices and /api/v1/history/namespaces: the fleet history's series (the
overview's and the namespace page's charts read these)."""

from datetime import UTC, datetime

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from mirror import roles
from mirror.api.filters import check_params, int_param
from mirror.api.permissions import IsViewer
from mirror.models import Cluster

from . import history

DEVICE_SERIES = history.STATE_FIELDS + ("gpus", "gpus_free", "gpus_stranded", "partition_slots_free", "partition_slots")
DEVICE_GROUPS = ("none", "model", "kind", "cluster")
# API name -> NamespaceSample column.
NAMESPACE_SERIES = {
    "gpu": "gpu",
    "partition": "partition",
    "other": "other",
    "idle": "idle",
    "claims_pending": "pending",
    "claims_allocated": "claims_allocated",
    "claims_reserved": "reserved",
    "claims_deleting": "deleting",
}
MAX_TOP = 50

Series = inline_serializer(
    "HistorySeries",
    {
        "hours": serializers.IntegerField(),
        "step_seconds": serializers.IntegerField(
            help_text="Seconds between points (the span is cut into at most 1,000)."
        ),
        "timestamps": serializers.ListField(child=serializers.IntegerField(), help_text="Unix seconds of each point."),
        "series": serializers.ListField(
            child=inline_serializer(
                "HistorySeriesValues",
                {
                    "name": serializers.CharField(),
                    "values": serializers.ListField(
                        child=serializers.IntegerField(allow_null=True),
                        help_text="One per timestamp; null: no sample that minute.",
                    ),
                },
            )
        ),
    },
)


def _choices(params, name, allowed, default):
    text = params.get(name)
    if text in (None, ""):
        return default
    picked = [p.strip() for p in text.split(",") if p.strip()]
    wrong = [p for p in picked if p not in allowed]
    if wrong or not picked:
        raise ValidationError(
            {
                name: [
                    f"Unknown value {', '.join(map(repr, wrong)) or repr(text)}; use a comma-separated list of: {', '.join(allowed)}."
                ]
            }
        )
    return tuple(dict.fromkeys(picked))


def _common(request):
    """(cluster ids or None, hours, step, minutes) from the shared parameters."""
    params = request.query_params
    cluster_ids = None
    if params.get("cluster"):
        cluster = Cluster.objects.filter(name=params["cluster"]).first()
        if cluster is None:
            raise ValidationError({"cluster": [f"No cluster named {params['cluster']!r}."]})
        cluster_ids = [cluster.id]
    hours = int_param(params, "hours", 24, 1, int(history.retention_days() * 24))
    now = timezone.now()
    end = int_param(params, "end", None, 0, int(now.timestamp()) + 86400)
    step, minutes = history.points(hours, now if end is None else datetime.fromtimestamp(end, tz=UTC))
    return cluster_ids, hours, step, minutes


def _answer(hours, step, minutes, columns):
    return Response(
        {
            "hours": hours,
            "step_seconds": step * 60,
            "timestamps": [int(m.timestamp()) for m in minutes],
            "series": [{"name": name, "values": values} for name, values in columns.items()],
        }
    )


_COMMON_PARAMETERS = [
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name (default: every cluster, summed)."),
    OpenApiParameter(
        "hours",
        OpenApiTypes.INT,
        description="How far back (default 24, at most the retention, GPUDASH_HISTORY_DAYS x 24).",
    ),
    OpenApiParameter("end", OpenApiTypes.INT, description="End of the span, Unix seconds (default now)."),
]


class DeviceHistoryView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        summary="Devices over time",
        description="Per-minute device counts. Without `group_by`, one series per name in `series`; with it, the sum of "
        "those per model, device kind or cluster (a group that is zero throughout is left out). `gpus`/`gpus_free` "
        "count physical GPUs (a whole GPU and its partitions are one); `gpus_stranded` counts whole GPUs partly used by "
        "partitions (room for partitions only); `partition_slots_free`/`partition_slots` count partitions of each "
        "model's smallest MIG profile that can still be created / could be with nothing in use (from the shared "
        "counters: overlapping placements are not added up).",
        parameters=_COMMON_PARAMETERS
        + [
            OpenApiParameter(
                "series",
                OpenApiTypes.STR,
                description=f"Comma-separated, from: {', '.join(DEVICE_SERIES)} (default: every state).",
            ),
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(DEVICE_GROUPS), description="default none"),
            OpenApiParameter(
                "kind", OpenApiTypes.STR, enum=list(history.KIND_FIELDS), description="Only devices of this kind."
            ),
            OpenApiParameter("model", OpenApiTypes.STR, description="Only devices of this model (productName)."),
        ],
        filters=False,
        responses=Series,
    )
    def get(self, request):
        check_params(request, {"cluster", "hours", "end", "series", "group_by", "kind", "model", "format"})
        params = request.query_params
        cluster_ids, hours, step, minutes = _common(request)
        names = _choices(params, "series", DEVICE_SERIES, history.STATE_FIELDS)
        group_by = _choices(params, "group_by", DEVICE_GROUPS, ("none",))
        kind = _choices(params, "kind", history.KIND_FIELDS, (None,))
        if len(group_by) > 1 or len(kind) > 1:
            raise ValidationError({"group_by" if len(group_by) > 1 else "kind": ["One value only."]})
        columns = history.device_series(
            minutes,
            cluster_ids,
            kind=kind[0],
            model=params.get("model") or None,
            group_by="state" if group_by[0] == "none" else group_by[0],
            states=names,
        )
        return _answer(hours, step, minutes, columns)


class NamespaceHistoryView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        summary="Namespaces over time",
        description="Per-minute counts per namespace: devices held by its claims (`gpu`, `partition`, `other`), held "
        "devices the utilization poll found idle (`idle`), its claims by state. Series are named by the "
        'namespace (one series name), by the series name (one namespace), else "namespace name". '
        "A user with a namespace scope sees only those namespaces.",
        parameters=_COMMON_PARAMETERS
        + [
            OpenApiParameter(
                "namespace",
                OpenApiTypes.STR,
                description="Comma-separated namespaces (default: the `top` namespaces by the first series' highest value).",
            ),
            OpenApiParameter(
                "series",
                OpenApiTypes.STR,
                description=f"Comma-separated, from: {', '.join(NAMESPACE_SERIES)} (default gpu).",
            ),
            OpenApiParameter(
                "top",
                OpenApiTypes.INT,
                description=f"Without `namespace`: how many namespaces (default 8, at most {MAX_TOP}).",
            ),
        ],
        filters=False,
        responses=Series,
    )
    def get(self, request):
        check_params(request, {"cluster", "hours", "end", "namespace", "series", "top", "format"})
        params = request.query_params
        cluster_ids, hours, step, minutes = _common(request)
        names = _choices(params, "series", tuple(NAMESPACE_SERIES), ("gpu",))
        top = int_param(params, "top", 8, 1, MAX_TOP)
        namespaces = (
            [n.strip() for n in params["namespace"].split(",") if n.strip()] if params.get("namespace") else None
        )
        scope = roles.visible_namespaces(request.user)
        if scope is not None:
            # Namespaces outside the user's scope are not named (as everywhere): asked for, they are left out.
            namespaces = [n for n in namespaces if n in scope] if namespaces is not None else sorted(scope)
            if not params.get("namespace"):
                namespaces = history.top_namespaces(minutes, cluster_ids, namespaces, NAMESPACE_SERIES[names[0]], top)
        elif namespaces is None:
            namespaces = history.top_namespaces(minutes, cluster_ids, None, NAMESPACE_SERIES[names[0]], top)
        columns = history.namespace_series(
            minutes, namespaces, cluster_ids, fields={n: NAMESPACE_SERIES[n] for n in names}
        )
        return _answer(hours, step, minutes, columns)
