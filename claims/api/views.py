"""Read endpoints for claims, claim templates, pods using claims, and the audit log."""

from django.db.models import Prefetch
from rest_framework import viewsets

from claims.filtersets import (
    AuditEntryFilterSet,
    DeviceHealthFilterSet,
    DeviceStatusFilterSet,
    PodFilterSet,
    ResourceClaimFilterSet,
    ResourceClaimTemplateFilterSet,
    stuck_exists,
)
from claims.models import (
    AuditEntry,
    ClaimDeviceStatus,
    Pod,
    PodClaimRef,
    PodResourceHealth,
    ResourceClaim,
    ResourceClaimTemplate,
    resolve_devices,
)
from mirror.api.filters import StrictFilterBackend
from mirror.api.pagination import StablePagePagination
from mirror.api.permissions import IsViewer
from mirror.api.views import MirrorViewSet
from mirror.roles import scope_queryset

from . import serializers

__all__ = (
    "ResourceClaimViewSet",
    "ResourceClaimTemplateViewSet",
    "PodViewSet",
    "AuditEntryViewSet",
    "DeviceStatusViewSet",
    "DeviceHealthViewSet",
)


class ResourceClaimViewSet(MirrorViewSet):
    """ResourceClaims with allocation results, consumers and whether a stuck-claim finding is active."""

    queryset = ResourceClaim.objects.select_related("cluster").prefetch_related(
        "results", "consumers", Prefetch("device_statuses", queryset=ClaimDeviceStatus.objects.order_by("id"))
    )
    serializer_class = serializers.ResourceClaimSerializer
    filterset_class = ResourceClaimFilterSet
    namespaced = True

    def base_queryset(self):
        return self.queryset.annotate(stuck=stuck_exists())


class ResourceClaimTemplateViewSet(MirrorViewSet):
    queryset = ResourceClaimTemplate.objects.select_related("cluster")
    serializer_class = serializers.ResourceClaimTemplateSerializer
    filterset_class = ResourceClaimTemplateFilterSet
    namespaced = True


class PodViewSet(MirrorViewSet):
    """Pods that use claims (and DRA driver pods), with their claim references."""

    queryset = Pod.objects.select_related("cluster").prefetch_related(
        Prefetch("claim_refs", queryset=PodClaimRef.objects.order_by("id")),
        Prefetch("resource_health", queryset=PodResourceHealth.objects.order_by("id")),
    )
    serializer_class = serializers.PodSerializer
    filterset_class = PodFilterSet
    namespaced = True

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:  # the devices of every health report on the page, in one query
            resolve_devices([row for pod in page for row in pod.resource_health.all()], always_query=bool(page))
        return page


class DeviceStatusViewSet(MirrorViewSet):
    """Claim device status entries (status.devices), one per claim and device: filter by device,
    node, claim or readiness to see what the drivers report about a device."""

    queryset = ClaimDeviceStatus.objects.select_related("cluster", "claim")
    serializer_class = serializers.DeviceStatusSerializer
    filterset_class = DeviceStatusFilterSet
    namespaced = True
    has_raw = False


class DeviceHealthViewSet(MirrorViewSet):
    """The kubelet's device health reports (pods' allocatedResourcesStatus), each with the device its
    resource ID stands for; filter by device, node, pod, claim or health."""

    queryset = PodResourceHealth.objects.select_related("cluster", "pod")
    serializer_class = serializers.DeviceHealthSerializer
    filterset_class = DeviceHealthFilterSet
    namespaced = True
    has_raw = False

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        return page if page is None else resolve_devices(list(page))

    def get_object(self):
        return resolve_devices([super().get_object()])[0]


class AuditEntryViewSet(viewsets.ReadOnlyModelViewSet):
    """Every attempted write to a cluster (release actions, ...), newest first; read-only."""

    queryset = AuditEntry.objects.all()
    serializer_class = serializers.AuditEntrySerializer
    filterset_class = AuditEntryFilterSet
    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = [StrictFilterBackend]

    def get_queryset(self):
        return scope_queryset(self.queryset.all(), self.request.user)
