"""GET /api/v1/dra-metrics: the DRA control plane's metrics (monitoring/drametrics.py) of each cluster
with a Prometheus configured, each figure with its PromQL, status (ok, no_data, absent, error, timed_out) and rows."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from mirror.api.filters import check_params
from mirror.api.permissions import IsViewer
from mirror.models import Cluster

from . import drametrics
from .models import PrometheusSource


def _results(source, window, keys):
    """Every figure from the evaluation the page shares (monitoring.drametrics.cached), or only the
    asked ones, run for this request; either way bounded by the deadline (DRA_DEADLINE_SECONDS)."""
    if keys:
        return drametrics.evaluate(source, window, keys)
    evaluation = drametrics.cached(source, window)
    evaluation.wait()
    return evaluation.results


class DRAMetricsView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name (default: every cluster)."),
            OpenApiParameter(
                "window",
                OpenApiTypes.STR,
                enum=list(drametrics.WINDOWS),
                description=f"Range of rates and quantiles (default {drametrics.DEFAULT_WINDOW}).",
            ),
            OpenApiParameter(
                "figure",
                OpenApiTypes.STR,
                enum=list(drametrics.BY_KEY),
                description="Only this figure (repeatable).",
            ),
        ],
        filters=False,
        responses=inline_serializer(
            "DRAMetrics",
            {
                "window": serializers.CharField(),
                "node_label": serializers.CharField(),
                "clusters": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    def get(self, request):
        params = request.query_params
        check_params(request, {"cluster", "window", "figure", "format"})
        window = params.get("window") or drametrics.DEFAULT_WINDOW
        if window not in drametrics.WINDOWS:
            raise ValidationError({"window": [f"Must be one of {', '.join(drametrics.WINDOWS)}, not {window!r}."]})
        keys = params.getlist("figure")
        unknown = [k for k in keys if k not in drametrics.BY_KEY]
        if unknown:
            raise ValidationError(
                {"figure": [f"Unknown figure {unknown[0]!r}; one of: {', '.join(drametrics.BY_KEY)}."]}
            )
        sources = PrometheusSource.objects.select_related("cluster").filter(enabled=True).order_by("cluster__name")
        if params.get("cluster"):
            if not Cluster.objects.filter(name=params["cluster"]).exists():
                raise ValidationError({"cluster": [f"No cluster named {params['cluster']!r}."]})
            sources = sources.filter(cluster__name=params["cluster"])
        clusters = [
            {
                "cluster": s.cluster.name,
                "prometheus": s.url,
                "series_selector": s.series_selector,
                "figures": [r.as_json() for r in _results(s, window, keys)],
            }
            for s in sources
        ]
        return Response({"window": window, "node_label": drametrics.node_label(), "clusters": clusters})
