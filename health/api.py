"""GET /api/v1/health/devices (devices that are not healthy, with their reasons) and
GET /api/v1/health/timeline (the changes of device health, newest first). The kubelet's own reports
are GET /api/v1/device-health (claims)."""

from rest_framework import generics, serializers

from mirror import roles
from mirror.api.filters import StrictFilterBackend
from mirror.api.pagination import StablePagePagination
from mirror.api.permissions import IsViewer
from mirror.messages import english

from . import notion
from .filtersets import DeviceHealthFilterSet, HealthChangeFilterSet
from .models import STATES, DeviceHealth, HealthChange


def _english(text, stored, scope):
    shown = notion.scoped_reason(text, scope)
    return stored if shown is text else english(shown)


def _scoped(names, scope):
    return list(names) if scope is None else [n for n in names if n.split("/", 1)[0] in scope]


class HealthStateSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    node = serializers.CharField(source="node_name", read_only=True)
    state = serializers.ChoiceField(choices=STATES, read_only=True)
    reason = serializers.SerializerMethodField(help_text="The worst reason, in English.")
    reasons = serializers.SerializerMethodField(help_text="Every signal, worst first: state, source, text (English).")

    class Meta:
        model = DeviceHealth
        fields = ("cluster", "driver", "pool", "device", "node", "state", "source", "reason", "reasons", "since")

    # A pod report of a namespace outside the reader's scope says that a pod reports it, not which.
    def get_reason(self, obj) -> str:
        if not obj.reasons:
            return obj.reason
        return _english(obj.reasons[0].get("text"), obj.reason, self.context["scope"])

    def get_reasons(self, obj) -> list[dict]:
        scope = self.context["scope"]
        return [
            {
                k: v
                for k, v in {
                    "state": r.get("state"),
                    "source": r.get("source"),
                    "text": _english(r.get("text"), r.get("english", ""), scope),
                    "taint": r.get("taint"),
                    "rule": r.get("rule") or None,
                    "pod": r.get("pod") if notion.scoped_reason(r.get("text"), scope) is r.get("text") else None,
                }.items()
                if v
            }
            for r in obj.reasons
        ]


class HealthChangeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    node = serializers.CharField(source="node_name", read_only=True)
    reason = serializers.SerializerMethodField(help_text="Why, in English (the new state's main reason).")
    claims = serializers.SerializerMethodField(help_text='"namespace/name" of the claims allocated the device then.')
    pods = serializers.SerializerMethodField(help_text='"namespace/name" of their live pods then.')

    class Meta:
        model = HealthChange
        fields = (
            "id",
            "cluster",
            "driver",
            "pool",
            "device",
            "node",
            "at",
            "from_state",
            "to_state",
            "source",
            "reason",
            "claims",
            "pods",
        )

    # Claims and pods of namespaces outside the user's scope are left out, as everywhere else.
    def get_reason(self, obj) -> str:
        return _english(obj.reason_message, obj.reason, self.context["scope"])

    def get_claims(self, obj) -> list[str]:
        return _scoped(obj.claims, self.context["scope"])

    def get_pods(self, obj) -> list[str]:
        return _scoped(obj.pods, self.context["scope"])


class DeviceHealthListView(generics.ListAPIView):
    """Devices whose health is unhealthy, degraded or unknown (a device not listed is healthy)."""

    queryset = DeviceHealth.objects.select_related("cluster").order_by("cluster_id", "driver", "pool", "device")
    serializer_class = HealthStateSerializer
    filterset_class = DeviceHealthFilterSet
    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = [StrictFilterBackend]

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "scope": roles.visible_namespaces(self.request.user)}


class HealthTimelineView(generics.ListAPIView):
    """Changes of device health, newest first, with the claims and pods on the device at that moment."""

    queryset = HealthChange.objects.select_related("cluster").order_by("-at", "-id")
    serializer_class = HealthChangeSerializer
    filterset_class = HealthChangeFilterSet
    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = [StrictFilterBackend]

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "scope": roles.visible_namespaces(self.request.user)}
