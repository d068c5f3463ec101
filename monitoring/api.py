"""GET /api/v1/utilization: each device's latest utilization, the poll status per cluster, and idle
GPU-hours by namespace (the overview's figure)."""

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

from .idle import idle_gpu_hours_by_namespace
from .models import PrometheusSource, UtilizationSample

MAX_LIMIT = 10000


def sample_json(sample, cluster_name, scope):
    visible = scope is None or sample.held_by_namespace in scope
    return {
        "cluster": cluster_name,
        "driver": sample.driver,
        "pool": sample.pool,
        "device": sample.device,
        "minute": sample.minute,
        "gpu_utilization_percent": sample.gpu_util,
        "memory_used_bytes": sample.fb_used_bytes,
        "power_watts": sample.power_watts,
        "graphics_engine_active_ratio": sample.gr_engine_active,
        # Claims of namespaces outside the user's scope are not named (like everywhere else).
        "held_by": (
            {"namespace": sample.held_by_namespace, "name": sample.held_by_name} if visible else {"hidden": True}
        )
        if sample.allocated
        else None,
    }


def source_json(source):
    return {
        "cluster": source.cluster.name,
        "enabled": source.enabled,
        "last_poll_at": source.last_poll_at,
        "last_success_at": source.last_success_at,
        "minute": source.last_minute,
        "devices_matched": source.devices_matched,
        "series_unmatched": source.series_unmatched,
        "error": source.last_error,
        "error_at": source.last_error_at,
    }


class UtilizationView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name."),
            OpenApiParameter("pool", OpenApiTypes.STR, description="Pool (the node's name for node-local drivers)."),
            OpenApiParameter(
                "namespace", OpenApiTypes.STR, description="Only devices held by claims of this namespace."
            ),
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description=f"At most this many devices (default 1000, up to {MAX_LIMIT})."
            ),
            OpenApiParameter("offset", OpenApiTypes.INT),
        ],
        filters=False,
        responses=inline_serializer(
            "Utilization",
            {
                "sources": serializers.ListField(child=serializers.DictField()),
                "count": serializers.IntegerField(),
                "results": serializers.ListField(child=serializers.DictField()),
                "idle_gpu_hours_by_namespace": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    def get(self, request):
        params = request.query_params
        check_params(request, {"cluster", "pool", "namespace", "limit", "offset", "format"})
        limit, offset = int_param(params, "limit", 1000, 1, MAX_LIMIT), int_param(params, "offset", 0, 0)
        sources = PrometheusSource.objects.select_related("cluster")
        if params.get("cluster"):
            if not Cluster.objects.filter(name=params["cluster"]).exists():
                raise ValidationError({"cluster": [f"No cluster named {params['cluster']!r}."]})
            sources = sources.filter(cluster__name=params["cluster"])
        sources = list(sources)
        scope = roles.visible_namespaces(request.user)
        samples = UtilizationSample.objects.none()
        for s in sources:
            if s.last_minute:
                samples |= UtilizationSample.objects.filter(cluster_id=s.cluster_id, minute=s.last_minute)
        if params.get("pool"):
            samples = samples.filter(pool=params["pool"])
        if params.get("namespace"):
            samples = samples.filter(allocated=True, held_by_namespace=params["namespace"])
        samples = samples.order_by("cluster_id", "pool", "device")
        names = {s.cluster_id: s.cluster.name for s in sources}
        page = [sample_json(x, names[x.cluster_id], scope) for x in samples[offset : offset + limit]]
        idle = idle_gpu_hours_by_namespace([s.cluster_id for s in sources])
        if scope is not None:
            idle = [(ns, h) for ns, h in idle if ns in scope]
        return Response(
            {
                "sources": [source_json(s) for s in sources],
                "count": samples.count(),
                "results": page,
                "idle_gpu_hours_by_namespace": [{"namespace": ns, "gpu_hours": h} for ns, h in idle],
            }
        )
