"""POST /api/v1/preview: where would this claim (YAML, or an existing pending claim) be allocated?"""

import dataclasses

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from gpudash import roles
from gpudash.api.permissions import IsOperator
from claims.models import ResourceClaim
from inventory.models import Cluster


class PreviewUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The allocation engine is not installed."
    default_code = "preview_unavailable"


class PreviewRequestSerializer(serializers.Serializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name.")
    namespace = serializers.CharField(max_length=253, default="default")
    yaml = serializers.CharField(
        required=False, allow_blank=False, max_length=256 * 1024, trim_whitespace=False,
        help_text="A ResourceClaim, ResourceClaimTemplate or Pod (with its claims) as YAML or JSON.",
    )
    claim = serializers.CharField(required=False, max_length=253, help_text="Name of an existing pending claim in `namespace`.")
    headroom = serializers.BooleanField(default=False, help_text="Also compute how many more such claims would fit.")

    def validate(self, data):
        if bool(data.get("yaml")) == bool(data.get("claim")):
            raise ValidationError({"yaml": ["Give exactly one of `yaml` or `claim`."]})
        return data


def _plain(result):
    """The engine's result as JSON-ready data, whatever container it comes in."""
    for method in ("as_dict", "to_dict"):
        if hasattr(result, method):
            return getattr(result, method)()
    if dataclasses.is_dataclass(result):
        return dataclasses.asdict(result)
    return result


class PreviewView(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        request=PreviewRequestSerializer,
        responses=inline_serializer("PreviewResult", {"result": serializers.JSONField()}),
    )
    def post(self, request):
        body = PreviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if not roles.can_operate(request.user, data["namespace"]):
            raise PermissionDenied(f"You may not preview claims in namespace {data['namespace']!r}.")
        try:
            from claims.preview import PreviewError, run_preview
        except ImportError as exc:
            raise PreviewUnavailable() from exc
        claim = None
        if data.get("claim"):
            claim = ResourceClaim.objects.filter(cluster=data["cluster"], namespace=data["namespace"], name=data["claim"]).first()
            if claim is None:
                raise ValidationError({"claim": [f"No claim {data['namespace']}/{data['claim']} in cluster {data['cluster'].name}."]})
        try:
            result = run_preview(
                data["cluster"], yaml_text=data.get("yaml"), claim=claim, namespace=data["namespace"], with_headroom=data["headroom"]
            )
        except PreviewError as exc:
            # The engine's own input errors (bad YAML, unknown kind, unsupported feature) name the problem.
            raise ValidationError({"yaml" if data.get("yaml") else "claim": [str(exc)]}) from exc
        return Response({"result": _plain(result)})
