"""Read endpoints for clusters, nodes, device classes, resource slices and devices."""

from django.db.models import Case, Count, IntegerField, OuterRef, Prefetch, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce
from rest_framework import viewsets

from inventory import accelerators, classmatch
from inventory import tasks as class_counts
from inventory.filtersets import (
    ClusterFilterSet,
    DeviceClassFilterSet,
    DeviceFilterSet,
    NodeFilterSet,
    ResourceSliceFilterSet,
)
from inventory.models import Device, DeviceClass, Node, NodeDeviceSummary, ResourceSlice
from mirror.api.filters import StrictFilterBackend
from mirror.api.pagination import IdsFirstPagination, StablePagePagination
from mirror.api.permissions import IsViewer
from mirror.api.serializers import annotations
from mirror.api.views import MirrorViewSet
from mirror.models import Cluster, SyncState

from . import serializers

__all__ = ("ClusterViewSet", "NodeViewSet", "DeviceClassViewSet", "ResourceSliceViewSet", "DeviceViewSet")


class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    """Clusters the dashboard mirrors, with the watch status of every kind."""

    queryset = Cluster.objects.prefetch_related(Prefetch("sync_states", queryset=SyncState.objects.order_by("kind")))
    serializer_class = serializers.ClusterSerializer
    filterset_class = ClusterFilterSet
    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = [StrictFilterBackend]


class NodeViewSet(MirrorViewSet):
    queryset = Node.objects.select_related("cluster")
    serializer_class = serializers.NodeSerializer
    filterset_class = NodeFilterSet

    def base_queryset(self):
        from inventory import fleet

        devices = (
            Device.objects.filter(cluster_id=OuterRef("cluster_id"), node_name=OuterRef("name"))
            .order_by()
            .values("node_name")
            .annotate(n=Count("*"))
            .values("n")
        )
        # Physical GPUs from the per-node summary (inventory/devicekinds.py); free ones only on a Ready node.
        summary = (
            NodeDeviceSummary.objects.filter(cluster_id=OuterRef("cluster_id"), node_name=OuterRef("name"))
            .order_by()
            .values("node_name")
        )
        gpus = summary.annotate(n=Sum("n_gpus")).values("n")
        free = summary.annotate(n=Sum("n_gpus_free")).values("n")
        return self.queryset.annotate(
            device_count=Coalesce(Subquery(devices, output_field=IntegerField()), Value(0)),
            gpus=Coalesce(Subquery(gpus, output_field=IntegerField()), Value(0)),
            free_gpus=Case(
                When(ready=False, then=Value(0)),
                default=Coalesce(Subquery(free, output_field=IntegerField()), Value(0)),
            ),
            accelerator_rows=accelerators.rows_json(),  # device plugin, HAMi: in this query, not one per node
            partition_rows=fleet.partition_rows_json(),  # MIG capacity per profile, likewise
        )


class DeviceClassViewSet(MirrorViewSet):
    """Device classes, with how many devices of their cluster each matches (CEL, counted in the background)."""

    queryset = DeviceClass.objects.select_related("cluster")
    serializer_class = serializers.DeviceClassSerializer
    filterset_class = DeviceClassFilterSet

    def get_queryset(self):
        # Selectors live in `raw`, so it is always loaded here (classes are few).
        qs = self.base_queryset()
        return qs

    def get_serializer(self, *args, **kwargs):
        # Counts are stored by the background recount (inventory/tasks.py); say which are out of date.
        if args:
            objs = args[0] if isinstance(args[0], (list, tuple)) else [args[0]]
            if all(isinstance(o, DeviceClass) for o in objs):
                versions = classmatch.inventory_versions({o.cluster_id for o in objs})
                kwargs.setdefault("context", self.get_serializer_context())
                current = {o.pk for o in objs if classmatch.is_current(o, versions)}
                kwargs["context"]["class_matches_current"] = current
                for cluster_id in sorted({o.cluster_id for o in objs if o.pk not in current}):
                    class_counts.request_after_commit(cluster_id)
        return super().get_serializer(*args, **kwargs)


class ResourceSliceViewSet(MirrorViewSet):
    queryset = ResourceSlice.objects.select_related("cluster")
    serializer_class = serializers.ResourceSliceSerializer
    filterset_class = ResourceSliceFilterSet

    # device_count is a column the sync writes with the slice (no count over the device table).


class DeviceViewSet(MirrorViewSet):
    """Devices with their state (free/allocated/shared/admin/tainted) derived from allocation results."""

    queryset = Device.objects.select_related("cluster")
    serializer_class = serializers.DeviceSerializer
    filterset_class = DeviceFilterSet
    pagination_class = IdsFirstPagination

    def get_serializer_class(self):
        return serializers.DeviceDetailSerializer if self.action == "retrieve" else serializers.DeviceSerializer

    def base_queryset(self):
        return self.queryset.with_state().defer("attributes").annotate(**annotations("devices"))  # health
