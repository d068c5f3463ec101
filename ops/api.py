"""Operations endpoints: stuck-claim findings, release actions (dry run first), 'why is my Pod Pending?',
cluster readiness. The audit log itself is served by claims.api.views.AuditEntryViewSet (/api/v1/audit).

Release outcomes map to HTTP: done / dry-run 200, permission 403, unsafe now or changed since 409,
API server failure 502. Every attempt is audited by claims.release, whatever the answer.
"""

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.finding_scope import scoped_summary_and_evidence
from claims.models import Finding
from claims.release.actions import release, release_finding
from claims.release.audit import DONE, DRY_RUN, ERROR
from claims.release.plans import PLANNERS
from claims.stuck import RULE_TITLES
from mirror import roles
from mirror.api.errors import error_body
from mirror.api.filters import filter_errors
from mirror.api.pagination import StablePagePagination
from mirror.api.permissions import IsViewer
from mirror.api.serializers import JSONBooleanField
from mirror.models import Cluster
from ops.pending import PodNotFound, explain_pod
from ops.readiness import run_checks

__all__ = ("urlpatterns",)


class FindingSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    active = serializers.SerializerMethodField()
    rule_title = serializers.SerializerMethodField()

    class Meta:
        model = Finding
        fields = (
            "id",
            "cluster",
            "rule",
            "rule_title",
            "severity",
            "namespace",
            "claim_name",
            "claim_uid",
            "subject",
            "summary",
            "evidence",
            "remedy",
            "first_seen",
            "last_seen",
            "cleared_at",
            "active",
        )

    def get_active(self, obj) -> bool:
        return obj.cleared_at is None

    def get_rule_title(self, obj) -> str:
        return RULE_TITLES.get(obj.rule, obj.rule)

    def to_representation(self, obj):
        """Summary and evidence without the claims of namespaces outside the requester's scope."""
        data = super().to_representation(obj)
        if "visible_namespaces" not in self.context:  # once per request, not per row
            request = self.context.get("request")
            self.context["visible_namespaces"] = roles.visible_namespaces(request.user) if request else set()
        data["summary"], data["evidence"] = scoped_summary_and_evidence(
            obj.rule,
            obj.summary,
            obj.evidence,
            self.context["visible_namespaces"],
            obj.summary_message,
            translate=False,
        )
        return data


class ReleaseRequestSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=sorted(PLANNERS), required=False)
    dry_run = JSONBooleanField(default=True)
    uids = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        allow_empty=False,
        help_text="remove_reservations only: the reservedFor entries (pod uids) to remove.",
    )
    resource_version = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="The claim's resourceVersion the dry run showed; refused as a conflict if it changed.",
    )


class BulkReleaseSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), allow_empty=False, max_length=200)
    dry_run = JSONBooleanField(default=True)
    resource_versions = serializers.DictField(
        child=serializers.CharField(max_length=64),
        required=False,
        help_text="finding id -> resourceVersion from the dry run.",
    )


def outcome_status(outcome):
    if outcome.outcome in (DONE, DRY_RUN):
        return status.HTTP_200_OK
    if outcome.permission_denied:
        return status.HTTP_403_FORBIDDEN
    if outcome.outcome == ERROR:
        return status.HTTP_502_BAD_GATEWAY
    return status.HTTP_409_CONFLICT  # refused as unsafe now, or a conflict: the state does not allow it


def outcome_response(outcome):
    code = outcome_status(outcome)
    body = {"result": outcome.as_dict()}
    if code != 200:
        kind = "permission_denied" if outcome.permission_denied else outcome.outcome
        body.update(error_body(kind, outcome.reason))
    return Response(body, status=code)


@extend_schema(
    parameters=[OpenApiParameter(k, str) for k in ("cluster", "rule", "severity", "namespace", "claim")]
    + [OpenApiParameter("active", str, description="1 (default) = open findings, 0 = cleared, all = both")]
)
class FindingListView(generics.ListAPIView):
    """Stuck-claim findings (open ones by default), newest first; filtered as the Stuck page is (FindingFilterSet)."""

    serializer_class = FindingSerializer
    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = []

    def get_queryset(self):
        from claims.filtersets import FindingFilterSet

        visible = roles.scope_queryset(Finding.objects.select_related("cluster"), self.request.user)
        filterset = FindingFilterSet(self.request.query_params, queryset=visible)
        if not filterset.is_valid():
            raise filter_errors(filterset)
        qs = filterset.qs
        if filterset.errors:
            raise filter_errors(filterset)
        return qs.order_by("-first_seen", "-id")


class FindingDetailView(generics.RetrieveAPIView):
    serializer_class = FindingSerializer
    permission_classes = [IsViewer]

    def get_queryset(self):
        return roles.scope_queryset(Finding.objects.select_related("cluster"), self.request.user)


class FindingReleaseView(APIView):
    """Run the remedy of one finding: a dry run (default) shows the exact request; `dry_run: false` sends it."""

    permission_classes = [IsViewer]  # the operator check happens in claims.release, so refusals are audited too

    @extend_schema(
        operation_id="finding_release",
        request=ReleaseRequestSerializer,
        responses={200: inline_serializer("ReleaseResult", {"result": serializers.DictField()})},
    )
    def post(self, request, pk):
        finding = get_object_or_404(
            roles.scope_queryset(Finding.objects.select_related("cluster"), request.user), pk=pk
        )
        data = ReleaseRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        outcome = release_finding(
            request.user,
            finding,
            dry_run=data.validated_data["dry_run"],
            expected_resource_version=data.validated_data.get("resource_version", ""),
        )
        return outcome_response(outcome)


class BulkReleaseView(APIView):
    """Run the remedies of several findings, one audited attempt each; answers 200 with every result."""

    permission_classes = [IsViewer]

    @extend_schema(
        operation_id="finding_bulk_release",
        request=BulkReleaseSerializer,
        responses={200: inline_serializer("BulkReleaseResult", {"results": serializers.ListField()})},
    )
    def post(self, request):
        data = BulkReleaseSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids = data.validated_data["ids"]
        rvs = data.validated_data.get("resource_versions") or {}
        found = {
            f.id: f
            for f in roles.scope_queryset(Finding.objects.select_related("cluster"), request.user).filter(id__in=ids)
        }
        missing = [i for i in ids if i not in found]
        if missing:
            raise ValidationError({"ids": [f"Unknown findings: {', '.join(map(str, missing))}."]})
        results = []
        for fid in ids:
            outcome = release_finding(
                request.user,
                found[fid],
                dry_run=data.validated_data["dry_run"],
                expected_resource_version=rvs.get(str(fid), ""),
            )
            results.append({"finding": fid, "http_status": outcome_status(outcome), **outcome.as_dict()})
        return Response({"results": results})


class ClaimReleaseView(APIView):
    """Run one release action on a claim by name (no finding needed): {"action", "dry_run", "uids", "resource_version"}."""

    permission_classes = [IsViewer]

    @extend_schema(
        request=ReleaseRequestSerializer,
        responses={200: inline_serializer("ClaimReleaseResult", {"result": serializers.DictField()})},
    )
    def post(self, request, cluster, namespace, name):
        cluster_row = get_object_or_404(Cluster, name=cluster)
        data = ReleaseRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if not data.validated_data.get("action"):
            raise ValidationError({"action": [f"Required: one of {', '.join(sorted(PLANNERS))}."]})
        if data.validated_data.get("uids") and data.validated_data["action"] != "remove_reservations":
            raise ValidationError({"uids": ["Only remove_reservations takes uids."]})
        outcome = release(
            request.user,
            cluster_row,
            namespace,
            name,
            data.validated_data["action"],
            dry_run=data.validated_data["dry_run"],
            uids=data.validated_data.get("uids"),
            expected_resource_version=data.validated_data.get("resource_version", ""),
        )
        return outcome_response(outcome)


class PodPendingView(APIView):
    """'Why is my Pod Pending?': the DRA checklist for one pod (live from the API server when reachable)."""

    permission_classes = [IsViewer]

    @extend_schema(
        responses={
            200: inline_serializer(
                "PendingReport", {"verdict": serializers.DictField(), "steps": serializers.ListField()}
            )
        }
    )
    def get(self, request, cluster, namespace, name):
        cluster_row = get_object_or_404(Cluster, name=cluster)
        if not roles.can_see_namespace(request.user, namespace):
            return Response(error_body("not_found", f"No pod {namespace}/{name} in {cluster}."), status=404)
        try:
            return Response(
                explain_pod(
                    cluster_row,
                    namespace,
                    name,
                    visible_namespaces=roles.visible_namespaces(request.user),
                    user_key=request.user.pk,
                    driver_namespaces=roles.driver_namespaces(request.user),
                )
            )
        except PodNotFound as exc:
            return Response(error_body("not_found", str(exc)), status=404)


class ReadinessView(APIView):
    """Readiness checks of one cluster (pass / warn / fail per check)."""

    permission_classes = [IsViewer]

    @extend_schema(
        responses={
            200: inline_serializer("Readiness", {"status": serializers.CharField(), "checks": serializers.ListField()})
        }
    )
    def get(self, request, cluster):
        cluster_row = get_object_or_404(Cluster, name=cluster)
        return Response(run_checks(cluster_row))


# Included by gpudash/api_urls.py (mounted at /api/v1/).
urlpatterns = [
    path("findings", FindingListView.as_view(), name="finding-list"),
    path("findings/release", BulkReleaseView.as_view(), name="finding-bulk-release"),
    path("findings/<int:pk>", FindingDetailView.as_view(), name="finding-detail"),
    path("findings/<int:pk>/release", FindingReleaseView.as_view(), name="finding-release"),
    # <path:name>: a mirrored name with a slash (which Kubernetes would refuse) still has working URLs.
    path("claims/<slug:cluster>/<str:namespace>/<path:name>/release", ClaimReleaseView.as_view(), name="claim-release"),
    path("pods/<slug:cluster>/<str:namespace>/<path:name>/pending", PodPendingView.as_view(), name="pod-pending"),
    path("clusters/<slug:cluster>/readiness", ReadinessView.as_view(), name="cluster-readiness"),
]
