"""Read endpoints for claims, claim templates, pods using claims, and the audit log."""

from django.db.models import Prefetch
from rest_framework import viewsets

from claims.filtersets import (
    AuditEntryFilterSet,
    PodFilterSet,
    ResourceClaimFilterSet,
    ResourceClaimTemplateFilterSet,
    stuck_exists,
)
from claims.models import AuditEntry, Pod, PodClaimRef, ResourceClaim, ResourceClaimTemplate
from mirror.api.filters import StrictFilterBackend
from mirror.api.pagination import StablePagePagination
from mirror.api.permissions import IsViewer
from mirror.api.views import MirrorViewSet
from mirror.roles import scope_queryset

from . import serializers

__all__ = ("ResourceClaimViewSet", "ResourceClaimTemplateViewSet", "PodViewSet", "AuditEntryViewSet")


class ResourceClaimViewSet(MirrorViewSet):
    """ResourceClaims with allocation results, consumers and whether a stuck-claim finding is active."""

    queryset = ResourceClaim.objects.select_related("cluster").prefetch_related("results", "consumers")
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
        Prefetch("claim_refs", queryset=PodClaimRef.objects.order_by("id"))
    )
    serializer_class = serializers.PodSerializer
    filterset_class = PodFilterSet
    namespaced = True


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
