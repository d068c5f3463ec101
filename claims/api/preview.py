"""POST /api/v1/preview: where would this claim (YAML, or an existing pending claim) be allocated?"""

from contextlib import contextmanager

from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.models import ResourceClaim
from claims.preview import EngineFailure, InventoryNotReady, OutOfScope, PreviewError
from claims.preview_service import dispatch
from mirror import roles
from mirror.acyclic import AcyclicResponse
from mirror.api.errors import ClientClosedRequest, EngineError, InventoryBuilding, PreviewsBusy, PreviewWorkerLost
from mirror.api.permissions import IsAdmin, IsOperator
from mirror.models import Cluster


class PreviewRequestSerializer(serializers.Serializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all(), help_text="Cluster name.")
    namespace = serializers.CharField(max_length=253, default="default")
    yaml = serializers.CharField(
        required=False,
        allow_blank=False,
        max_length=256 * 1024,
        trim_whitespace=False,
        help_text="A ResourceClaim, ResourceClaimTemplate or Pod (with its claims) as YAML or JSON.",
    )
    claim = serializers.CharField(
        required=False, max_length=253, help_text="Name of an existing pending claim in `namespace`."
    )
    headroom = serializers.BooleanField(
        default=False,
        help_text="Also count how many more copies of the claim(s) fit right now (greedy, one after another), "
        "per node pool and device model: `result.headroom`. Slower than the preview alone.",
    )

    remedies = serializers.BooleanField(
        default=False,
        help_text="When no node fits: also `result.verdict` (per request, the nodes that could never serve it and "
        "those blocked now, with counts and names) and `result.remedies` (the smallest changes that make it fit, "
        "each checked by the allocation engine: where it would land and who is affected; nothing is applied).",
    )

    tolerations = serializers.JSONField(
        required=False,
        help_text="For a bare claim or template: the tolerations of the pod that would use it, as in a Pod's "
        'spec.tolerations (e.g. `[{"key": "nvidia.com/gpu", "operator": "Exists"}]`). A Pod in `yaml` carries its own.',
    )
    nodeSelector = serializers.JSONField(
        required=False,
        help_text="For a bare claim or template: the would-be pod's nodeSelector, a map (or `k=v,k2=v2`).",
    )
    nodeFilters = serializers.BooleanField(
        default=True,
        help_text="Run the kube-scheduler's node filters (cordon, taints, node affinity, ports, resources) before "
        "DRA (default). False previews devices only, as if any pod could run on every node.",
    )

    def validate(self, data):
        if bool(data.get("yaml")) == bool(data.get("claim")):
            raise ValidationError({"yaml": ["Give exactly one of `yaml` or `claim`."]})
        return data


class PreviewView(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        summary="Where would a claim be allocated now?",
        description=(
            "Runs the kube-scheduler's node filters and then the allocation engine on every node of the cluster "
            "(docs/allocator.md): per node whether the pod/claim(s) fit, each filter's verdict (`filters`), the devices "
            "chosen, or why not; a summary with counts per reason and the scheduler's `0/N nodes are available` message (for a Pod "
            "that fits nowhere, ending with the PostFilter text; `summary.postFilter` says which claim would be deallocated and "
            "where preempting lower-priority pods makes room); with `headroom` "
            "also how many more copies fit. Bad YAML, an unknown or already-allocated claim are 400s naming "
            "`yaml` or `claim`; hard errors of the claim itself (unknown class, CEL compile error with line and "
            "column) are part of the 200 answer, as the scheduler would report them per node. For a namespace-scoped "
            "user, a namespace outside the scope (the request's, or one the YAML names) is a 403 decided before "
            "any lookup, the same whether or not anything exists there; claims of other namespaces named in "
            "reasons are replaced by `a claim in another namespace`."
        ),
        request=PreviewRequestSerializer,
        responses={
            200: inline_serializer(
                "PreviewResult",
                {"result": serializers.JSONField(help_text="The engine's result: nodes, summary, headroom.")},
            ),
            400: inline_serializer(
                "PreviewError", {"error": serializers.JSONField(help_text="{code, message, field}")}
            ),
            503: inline_serializer(
                "PreviewUnavailable",
                {
                    "error": serializers.JSONField(
                        help_text="{code: inventory_building, message, field: null}: the cluster's preview inventory is still being "
                        "built (a preview worker's start-up warm-up) past the preview deadline; Retry-After says when to ask again. "
                        "{code: preview_worker_lost}: the preview worker running it died or did not answer in time; ask again"
                    )
                },
            ),
            429: inline_serializer(
                "PreviewsBusy",
                {
                    "error": serializers.JSONField(
                        help_text="{code: previews_busy, message, field: null}: more previews in flight than the preview workers admit "
                        "(in all, or for this user); Retry-After says when to ask again"
                    )
                },
            ),
            422: inline_serializer(
                "PreviewEngineError",
                {
                    "error": serializers.JSONField(
                        help_text="{code: engine_error, message, field: null}: the engine failed on this input (logged for the administrators)"
                    )
                },
            ),
        },
        examples=[
            OpenApiExample(
                "YAML with headroom",
                request_only=True,
                value={
                    "cluster": "prod",
                    "namespace": "ml",
                    "headroom": True,
                    "yaml": (
                        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: two-gpus}\nspec:\n  devices:\n"
                        "    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com, count: 2}\n"
                    ),
                },
            ),
            OpenApiExample(
                "A pending claim",
                request_only=True,
                value={"cluster": "prod", "namespace": "ml", "claim": "train-gpu-x7k2p"},
            ),
            OpenApiExample(
                "Result",
                response_only=True,
                status_codes=["200"],
                value={
                    "result": {
                        "nodes": [
                            {
                                "node": "node-a",
                                "fits": True,
                                "reason": None,
                                "error": None,
                                "results": [
                                    {
                                        "claim": "ml/two-gpus",
                                        "request": "gpu",
                                        "driver": "gpu.nvidia.com",
                                        "pool": "node-a",
                                        "device": "gpu-0",
                                        "adminAccess": False,
                                    },
                                    {
                                        "claim": "ml/two-gpus",
                                        "request": "gpu",
                                        "driver": "gpu.nvidia.com",
                                        "pool": "node-a",
                                        "device": "gpu-1",
                                        "adminAccess": False,
                                    },
                                ],
                            },
                            {
                                "node": "node-b",
                                "fits": False,
                                "results": [],
                                "error": None,
                                "reason": "request `gpu`: 8 devices match class `gpu.nvidia.com`, 7 are already allocated to other claims (e.g. ml/x), 1 free < count 2",
                            },
                        ],
                        "summary": {
                            "claims": ["ml/two-gpus"],
                            "nodes": 2,
                            "fits": 1,
                            "errors": 0,
                            "cluster": "prod",
                            "mostCommonReason": {"code": "allocated", "nodes": 1, "example": "request `gpu`: ..."},
                            "reasons": [{"code": "allocated", "nodes": 1, "example": "request `gpu`: ..."}],
                            "schedulerMessage": None,
                            "problems": [],
                            "seconds": 0.004,
                        },
                        "headroom": {
                            "claims": ["ml/two-gpus"],
                            "copies": 3,
                            "byNodePool": {"a100": 3},
                            "byDeviceModel": {"NVIDIA A100 80GB PCIe": 3},
                            "byNode": {"node-a": 3},
                            "cappedNodes": [],
                            "maxPerNode": 64,
                            "seconds": 0.001,
                        },
                    }
                },
            ),
            OpenApiExample(
                "Malformed YAML",
                response_only=True,
                status_codes=["400"],
                value={
                    "error": {
                        "code": "invalid",
                        "message": "YAML: malformed YAML at line 3, column 17: expected ',' or '}', but got ':'",
                        "field": "yaml",
                    }
                },
            ),
        ],
    )
    def post(self, request):
        body = PreviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        visible = roles.visible_namespaces(request.user)
        if not roles.can_operate(request.user, data["namespace"]):
            # IsOperator passed, so only the scope refuses; said before any lookup, whatever exists.
            raise PermissionDenied(str(OutOfScope(data["namespace"])))
        claim = None
        if data.get("claim"):
            claim = ResourceClaim.objects.filter(
                cluster=data["cluster"], namespace=data["namespace"], name=data["claim"]
            ).first()
            if claim is None:
                raise ValidationError(
                    {"claim": [f"No claim {data['namespace']}/{data['claim']} in cluster {data['cluster'].name}."]}
                )
        timing = {}
        with preview_errors(lambda message: _field_of(message, data)):
            answer = dispatch.submit(
                data["cluster"],
                user_key=request.user.pk,
                client_gone=getattr(request, "client_gone", None),
                timing=timing,
                yaml_text=data.get("yaml"),
                claim=claim,
                namespace=data["namespace"],
                with_headroom=data["headroom"],
                with_remedies=data["remedies"] or None,
                visible_namespaces=visible,
                tolerations=data.get("tolerations"),
                node_selector=data.get("nodeSelector"),
                node_filters=data["nodeFilters"],
            )
            if not dispatch.is_result(answer):
                dispatch.result_of(answer)  # an error answer: raises what an in-process preview would have
        # The worker wrote the answer with the API's JSON renderer: sent as it is, or read for another renderer.
        return self._timed(AcyclicResponse(encoded=answer), timing)

    @staticmethod
    def _timed(response, timing):
        if timing:
            response["Server-Timing"] = server_timing(timing)
        return response


def server_timing(timing):
    """The Server-Timing header of a preview a worker answered (dispatch.submit's `timing`), in ms:
    `queue` what the trip through the preview workers added to the worker's own run (wall - run: waiting
    for a free worker, the hand-over and the answer's way back), `run`, `wait` (until a worker started
    it) and `idle` (how long that worker had been free before, when known)."""
    parts = [("queue", timing["wall"] - timing["run"]), ("run", timing["run"]), ("wait", timing["wait"])]
    if timing.get("idle") is not None:
        parts.append(("idle", timing["idle"]))
    return ", ".join(f"{name};dur={seconds * 1000:.1f}" for name, seconds in parts)


@contextmanager
def preview_errors(field_of):
    """Submitting a preview (or a what-if) and reading its answer: their errors as the API's
    responses. 429 + Retry-After (admission control), 503 (a lost worker; + Retry-After while the
    inventory builds), 499 (the client left), 403 (a namespace named in the input is out of scope),
    the engine's failure as a JSON 500 (logged by run_preview, never a 500 page) and 400 for the
    engine's input errors, on the request field `field_of(message)` names."""
    try:
        yield
    except dispatch.PreviewBusy as exc:
        raise PreviewsBusy(str(exc), wait=exc.retry_after) from exc
    except dispatch.PreviewWorkerLost as exc:
        raise PreviewWorkerLost(str(exc)) from exc
    except dispatch.PreviewCancelled as exc:
        raise ClientClosedRequest() from exc
    except OutOfScope as exc:
        raise PermissionDenied(str(exc)) from exc
    except EngineFailure as exc:
        raise EngineError(str(exc)) from exc
    except InventoryNotReady as exc:
        raise InventoryBuilding(str(exc), wait=exc.retry_after) from exc
    except PreviewError as exc:  # bad YAML, unknown kind, unsupported feature: named by the engine
        raise ValidationError({field_of(str(exc)): [str(exc)]}) from exc


def _field_of(message, data):
    """Which request field a preview error is about (the would-be pod's fields name themselves)."""
    for name in ("tolerations", "nodeSelector"):
        if message.startswith(name) and data.get(name) is not None:
            return name
    return "yaml" if data.get("yaml") else "claim"


class PreviewWorkersView(APIView):
    """What the preview workers are doing: for admins watching load or finding a stuck worker."""

    permission_classes = [IsAdmin]

    @extend_schema(
        summary="The preview workers now",
        description="The backend (`local` pool or `celery` queue), the admission limits, previews in flight, and per worker "
        "(local) or per running job (celery) the process and the job it runs since when (epoch seconds).",
        responses={
            200: inline_serializer(
                "PreviewWorkers",
                {
                    "backend": serializers.CharField(),
                    "limits": serializers.DictField(),
                    "inFlight": serializers.IntegerField(required=False),
                },
            )
        },
    )
    def get(self, request):
        return Response(dispatch.status())
