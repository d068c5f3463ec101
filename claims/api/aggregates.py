"""Allocation per namespace: claims by state and devices held, for capacity planning tools."""

from django.db.models import Count, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.filtersets import stuck_exists
from claims.models import AllocationResult, ResourceClaim
from mirror.api.filters import check_params
from mirror.api.permissions import IsViewer
from mirror.models import Cluster
from mirror.roles import scope_queryset

STATES = [s.value for s in ResourceClaim.State]


def allocation_by_namespace(claims, results):
    """[{cluster, namespace, claims, <state>..., stuck, devices, admin_access_devices}] for a claim
    queryset and the allocation results filtered alike (cluster, namespace, the user's scope: results
    carry their claim's namespace, so they are counted without joining each to its claim)."""
    per_state = {
        s: Count("state", filter=Q(state=s)) for s in STATES
    }  # indexed columns only: an index-only scan of (cluster, state, namespace)
    rows = {
        (r["cluster__name"], r["namespace"]): r
        for r in claims.order_by().values("cluster__name", "namespace").annotate(claims=Count("*"), **per_state)
    }
    # Counted apart with EXISTS in WHERE (a semi-join), not per claim in the SELECT list.
    stuck = {
        (r["cluster__name"], r["namespace"]): r["n"]
        for r in claims.filter(stuck_exists()).order_by().values("cluster__name", "namespace").annotate(n=Count("id"))
    }
    results = (
        results.values("cluster__name", "namespace")
        .annotate(devices=Count("id", filter=Q(admin_access=False)), admin=Count("id", filter=Q(admin_access=True)))
        .order_by()
    )
    held = {(r["cluster__name"], r["namespace"]): r for r in results}
    out = []
    for key in sorted(rows):
        row = rows[key]
        out.append(
            {
                "cluster": key[0],
                "namespace": key[1],
                "claims": row["claims"],
                **{s: row[s] for s in STATES},
                "stuck": stuck.get(key, 0),
                "devices": held.get(key, {}).get("devices", 0),
                "admin_access_devices": held.get(key, {}).get("admin", 0),
            }
        )
    return out


class AllocationAggregateView(APIView):
    """Per (cluster, namespace): claims by state, stuck claims, devices held (admin-access counted apart)."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", OpenApiTypes.STR, description="Cluster name."),
            OpenApiParameter("namespace", OpenApiTypes.STR),
        ],
        filters=False,
        responses=inline_serializer(
            "AllocationAggregate",
            {"results": serializers.ListField(child=serializers.DictField())},
        ),
    )
    def get(self, request):
        check_params(request, {"cluster", "namespace", "format"})
        where = {}
        if "cluster" in request.query_params:
            name = request.query_params["cluster"]
            if not Cluster.objects.filter(name=name).exists():
                raise ValidationError({"cluster": [f"No cluster named {name!r}."]})
            where["cluster__name"] = name
        if "namespace" in request.query_params:
            where["namespace"] = request.query_params["namespace"]
        claims = scope_queryset(ResourceClaim.objects.filter(**where), request.user)
        results = scope_queryset(AllocationResult.objects.filter(**where), request.user)
        return Response({"results": allocation_by_namespace(claims, results)})
