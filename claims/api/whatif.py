"""POST /api/v1/whatif: the effect of hypothetical changes on every pending pod and claim; and the
user's saved scenarios (/api/v1/whatif/scenarios)."""

from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.api.preview import preview_errors
from claims.models import WhatIfScenario
from claims.preview_service import dispatch
from claims.whatif import ScenarioInvalid, check_scope, parse_scenario
from mirror import roles
from mirror.api.permissions import IsOperator
from mirror.models import Cluster

LINES_HELP = (
    "One change per entry: `add NODE COUNT`, `remove NODE`, `drain NODE`, `cordon NODE`, `uncordon NODE`, "
    "`taint DRIVER[/POOL[/DEVICE]] KEY[=VALUE][:EFFECT]`, `release NAMESPACE/NAME`, `delete NAMESPACE/NAME`, "
    "`class NAME CEL`."
)


class WhatIfRequestSerializer(serializers.Serializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name.")
    changes = serializers.ListField(
        child=serializers.CharField(max_length=4096, trim_whitespace=True), max_length=50, help_text=LINES_HELP
    )
    shapes = serializers.ListField(
        child=serializers.CharField(max_length=300),
        required=False,
        default=list,
        max_length=10,
        help_text="Request shapes whose headroom to count before and after, each `COUNT x CLASS` (e.g. `8 x gpu.nvidia.com`).",
    )


def run_scenario(request, cluster, changes, shapes):
    """Check, admit and run a scenario on a preview worker; the result, or the API's errors."""
    visible = roles.visible_namespaces(request.user)
    with preview_errors(lambda _message: "changes"):
        try:
            parsed, _ = parse_scenario(changes, shapes)
            check_scope(parsed, visible)
            answer = dispatch.submit(
                cluster,
                user_key=request.user.pk,
                client_gone=getattr(request, "client_gone", None),
                what="whatif",
                changes=list(changes),
                shapes=list(shapes),
                visible_namespaces=visible,
            )
            return dispatch.result_of(answer)
        except ScenarioInvalid as exc:  # here or from the worker: names the change (`changes[2]`)
            raise ValidationError({exc.where: [str(exc)]}) from exc


class WhatIfView(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        summary="What would these changes do to the pending pods and claims?",
        description=(
            "Applies hypothetical changes to a copy of the cluster's live preview inventory (nothing is written "
            "to the cluster) and previews every pending pod (and every pending claim no pending pod uses) before "
            "and after: `verdict` is `now-schedulable`, `still-blocked`, `loses-place` (fitted before, not after), "
            "`still-schedulable`, `error` (e.g. its claim was deleted) or `undecided` (the deadline passed). "
            "Each is placed alone, as if next in the scheduler's queue. `displaced`: pods a remove or drain "
            "evicts. `headroom`: copies of each shape that fit before and after. A namespace-scoped user sees "
            "only its namespaces' pods and claims; a change naming a claim elsewhere is a 403. A bad change "
            "is a 400 whose `field` names it (`changes[2]`)."
        ),
        request=WhatIfRequestSerializer,
        responses={200: inline_serializer("WhatIfResult", {"result": serializers.JSONField()})},
        examples=[
            OpenApiExample(
                "Two more nodes like gpu-h100-02",
                request_only=True,
                value={
                    "cluster": "prod",
                    "changes": ["add gpu-h100-02 2", "cordon gpu-h100-04"],
                    "shapes": ["8 x gpu.nvidia.com"],
                },
            )
        ],
    )
    def post(self, request):
        body = WhatIfRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        result = run_scenario(request, data["cluster"], data["changes"], data["shapes"])
        return Response({"result": result})


class ScenarioSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    changes = serializers.ListField(child=serializers.CharField(max_length=4096), max_length=50, help_text=LINES_HELP)
    shapes = serializers.ListField(
        child=serializers.CharField(max_length=300), max_length=10, required=False, default=list
    )
    query = serializers.CharField(read_only=True, help_text="The what-if page's query string that shares it.")

    class Meta:
        model = WhatIfScenario
        fields = ("id", "name", "cluster", "changes", "shapes", "query", "created", "updated")
        read_only_fields = ("id", "created", "updated")

    def validate(self, data):
        # A PATCH sends only some fields: the rest are the saved scenario's.
        saved = self.instance
        changes = data.get("changes", saved.changes if saved else [])
        shapes = data.get("shapes", saved.shapes if saved else [])
        cluster = data.get("cluster", saved.cluster if saved else None)
        name = data.get("name", saved.name if saved else "")
        try:
            parse_scenario(changes, shapes)
        except ScenarioInvalid as exc:
            raise ValidationError({exc.where: [str(exc)]}) from exc
        owner = self.context["request"].user
        clash = WhatIfScenario.objects.filter(owner=owner, cluster=cluster, name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise ValidationError({"name": [f"You already have a scenario named {name!r} for this cluster."]})
        return data


class ScenarioListView(generics.ListCreateAPIView):
    """Your saved what-if scenarios (only yours)."""

    permission_classes = [IsOperator]
    serializer_class = ScenarioSerializer
    pagination_class = None

    def get_queryset(self):
        return WhatIfScenario.objects.owned_by(self.request.user).select_related("cluster")

    def perform_create(self, serializer):
        serializer.save(owner=self.request.user)


class ScenarioDetailView(generics.RetrieveUpdateDestroyAPIView):
    """One of your saved scenarios; another user's answers 404, as if it did not exist."""

    permission_classes = [IsOperator]
    serializer_class = ScenarioSerializer

    def get_queryset(self):
        return WhatIfScenario.objects.owned_by(self.request.user).select_related("cluster")
