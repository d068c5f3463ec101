"""Normalised views of clusters, nodes, device classes, slices and devices."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from inventory import accelerators
from inventory.devicestate import STATES
from inventory.filtersets import HEALTH_STATES
from inventory.querysets import DEVICE_STATES
from mirror import holdings, roles
from mirror.api.serializers import KubeObjectSerializer, RawOptionalMixin
from mirror.models import Cluster, SyncState

__all__ = (
    "ClusterSerializer",
    "NodeSerializer",
    "DeviceClassSerializer",
    "ResourceSliceSerializer",
    "DeviceSerializer",
    "DeviceDetailSerializer",
)

# Watch states in which the mirror of that kind is as good as it gets.
HEALTHY_SYNC = {SyncState.Status.CONNECTED, SyncState.Status.SNAPSHOT, SyncState.Status.NOT_SERVED}


class SyncStateSerializer(serializers.ModelSerializer):
    class Meta:
        model = SyncState
        fields = (
            "kind",
            "status",
            "api_version",
            "resource_version",
            "object_count",
            "connected_since",
            "last_event_at",
            "last_list_at",
            "last_error",
            "last_error_at",
            "relist_count",
            "malformed_count",
        )


class ClusterSerializer(serializers.ModelSerializer):
    connected = serializers.SerializerMethodField(
        help_text="Every mirrored kind is connected (or a snapshot / not served)."
    )
    writable = serializers.BooleanField(read_only=True, help_text="Release actions may write to this cluster.")
    sync = SyncStateSerializer(source="sync_states", many=True, read_only=True, help_text="Watch status per kind.")

    class Meta:
        model = Cluster
        fields = (
            "id",
            "name",
            "enabled",
            "read_only",
            "is_snapshot",
            "writable",
            "server_version",
            "features",
            "served_resource_versions",
            "discovered_at",
            "created",
            "connected",
            "sync",
        )

    def get_connected(self, cluster) -> bool:
        states = list(cluster.sync_states.all())  # prefetched
        return bool(states) and all(s.status in HEALTHY_SYNC for s in states)


class NodeAcceleratorSerializer(serializers.Serializer):
    source = serializers.ChoiceField(
        choices=["device-plugin", "hami"],
        help_text="device-plugin: an extended resource a device plugin advertises; hami: HAMi vGPU sharing.",
    )
    resource = serializers.CharField(
        help_text="The extended resource, e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/gpumem."
    )
    kind = serializers.ChoiceField(
        choices=["gpu", "partition", "share", "memory", "cores"],
        help_text="gpu: whole GPUs; partition: MIG slices (never whole GPUs); share: time-sliced replicas or HAMi vGPU slots; "
        "memory: HAMi GPU memory (MiB); cores: HAMi GPU compute (percent, 100 per GPU).",
    )
    model = serializers.CharField(
        help_text="GPU model where known (GPU feature discovery label, HAMi's registration); empty if not."
    )
    allocatable = serializers.IntegerField(help_text="What the node offers.")
    requested = serializers.IntegerField(
        help_text="What its bound, non-terminal pods use: HAMi's assignments where HAMi scheduled them, else their requests."
    )
    gpus = serializers.IntegerField(
        help_text="Physical GPUs behind it (HAMi's registered GPUs; a whole-GPU resource's count; 0 for partitions and shares)."
    )


class DevicePluginSummarySerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="Whole GPUs the node advertises (kind gpu).")
    free = serializers.IntegerField(help_text="Of those, not requested by bound, non-terminal pods.")
    partitions = serializers.IntegerField(help_text="MIG partitions advertised (never counted as GPUs).")
    partitions_free = serializers.IntegerField()
    shares = serializers.IntegerField(help_text="Time-sliced replicas advertised (e.g. nvidia.com/gpu.shared).")


class HamiPodShareSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="namespace/name; empty for a pod in a namespace the caller may not see.")
    container = serializers.IntegerField(
        allow_null=True,
        help_text="Index in the pod's containers, init containers first (HAMi's order); "
        "null for a pod in a namespace the caller may not see.",
    )
    memory = serializers.IntegerField(help_text="GPU memory assigned, MiB.")
    cores = serializers.IntegerField(help_text="GPU compute assigned, percent.")


HAMI_SHARE_FIELDS = ("pod", "container", "memory", "cores")  # HamiPodShareSerializer's
HAMI_PROBLEM_FIELDS = ("pod", "text")  # HamiProblemSerializer's


class HamiDeviceSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="GPU UUID, from HAMi's registration annotation.")
    index = serializers.IntegerField()
    model = serializers.CharField()
    health = serializers.BooleanField()
    slots = serializers.IntegerField(help_text="vGPU slots (deviceSplitCount).")
    slots_used = serializers.IntegerField()
    memory = serializers.IntegerField(help_text="MiB.")
    memory_used = serializers.IntegerField(help_text="MiB assigned to pods.")
    cores = serializers.IntegerField(help_text="Percent (100 = the whole GPU).")
    cores_used = serializers.IntegerField()
    pods = HamiPodShareSerializer(
        many=True, help_text="Pods HAMi assigned this GPU to (its vgpu-devices-allocated annotation)."
    )


class HamiProblemSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="namespace/name; empty for a pod in a namespace the caller may not see.")
    text = serializers.CharField(
        help_text="What could not be read; that pod's requests count instead of an assignment."
    )


class NodeHamiSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="Physical GPUs HAMi registered.")
    shares = serializers.IntegerField(help_text="vGPU slots.")
    shares_used = serializers.IntegerField()
    memory = serializers.IntegerField(help_text="MiB.")
    memory_used = serializers.IntegerField()
    cores = serializers.IntegerField(help_text="Percent, 100 per GPU.")
    cores_used = serializers.IntegerField()
    devices = HamiDeviceSerializer(many=True)
    problems = HamiProblemSerializer(
        many=True,
        help_text="Pods whose assignment annotation could not be read, or names a GPU the node does not register.",
    )


class NodeSerializer(KubeObjectSerializer):
    ready = serializers.BooleanField(allow_null=True, read_only=True)
    ready_changed_at = serializers.DateTimeField(allow_null=True, read_only=True)
    unschedulable = serializers.BooleanField(read_only=True)
    taints = serializers.ListField(child=serializers.DictField(), read_only=True)
    device_count = serializers.IntegerField(read_only=True, help_text="Devices published for this node.")
    gpus = serializers.IntegerField(
        read_only=True, help_text="Physical GPUs DRA publishes for this node (a GPU and its partitions count once)."
    )
    free_gpus = serializers.IntegerField(
        read_only=True, help_text="Of those, GPUs with no device held or tainted (0 on a NotReady node)."
    )
    partitions = serializers.SerializerMethodField(
        help_text="Partition-aware capacity (MIG on shared counters): `profiles` {profile: {free, total}}, per "
        "profile how many more partitions one claim could get on this node now (profiles are alternatives, never "
        "summed; free 0 on a NotReady node), of how many with nothing in use; `stranded`, whole GPUs partly used "
        "by partitions. null on a node without partitions."
    )
    accelerators = serializers.SerializerMethodField(
        help_text="GPUs served outside DRA, per extended resource and model (never added to the DRA counts)."
    )
    device_plugin = serializers.SerializerMethodField(
        help_text="Totals of the device-plugin rows of `accelerators`; null when a device plugin advertises none here."
    )
    hami = serializers.SerializerMethodField(
        help_text="HAMi vGPU sharing on this node: registered GPUs, what HAMi assigned to which pods; null on a node HAMi does not manage."
    )

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_partitions(self, node):
        from inventory import fleet

        # Read from the list's own query (fleet.partition_rows_json): no query per node.
        return fleet.fold_partition_rows(getattr(node, "partition_rows", None), ready=node.ready is not False)

    def _sources(self, node):
        # Read from the list's own query (accelerators.rows_json): no query per node.
        if not hasattr(node, "_accelerator_sources"):
            node._accelerator_sources = accelerators.summarize_rows(getattr(node, "accelerator_rows", None))
        return node._accelerator_sources

    @extend_schema_field(NodeAcceleratorSerializer(many=True))
    def get_accelerators(self, node):
        return self._sources(node)[0]

    @extend_schema_field(DevicePluginSummarySerializer(allow_null=True))
    def get_device_plugin(self, node):
        return self._sources(node)[1]

    @extend_schema_field(NodeHamiSerializer(allow_null=True))
    def get_hami(self, node):
        hami = self._sources(node)[2]
        if hami is None:
            return None
        if "hami_scope" not in self.context:  # once per response, not per node
            request = self.context.get("request")
            self.context["hami_scope"] = roles.visible_namespaces(request.user) if request is not None else None
        hami = accelerators.scoped_hami(hami, self.context["hami_scope"])
        # Only the documented fields of each entry (the rows also hold the pod's namespace and name apart).
        return {
            **{k: v for k, v in hami.items() if k != "model"},
            "devices": [
                {**d, "pods": [{f: p[f] for f in HAMI_SHARE_FIELDS} for p in d["pods"]]} for d in hami["devices"]
            ],
            "problems": [{f: p[f] for f in HAMI_PROBLEM_FIELDS} for p in hami["problems"]],
        }


class DeviceClassSerializer(KubeObjectSerializer):
    extended_resource_name = serializers.CharField(read_only=True)
    selectors = serializers.ListField(child=serializers.DictField(), read_only=True)
    matching_devices = serializers.IntegerField(
        source="match_count",
        allow_null=True,
        read_only=True,
        help_text="Devices of the class's cluster its selectors matched when last counted (see matching_counted_at); "
        "null when not counted yet or when they cannot be evaluated.",
    )
    matching_error = serializers.SerializerMethodField(
        help_text="Why matching_devices is null, or on how many devices the selectors failed."
    )
    matching_counted_at = serializers.DateTimeField(
        source="match_computed_at",
        allow_null=True,
        read_only=True,
        help_text="When the count was made (in the background, after class and slice changes); null: not counted yet.",
    )
    matching_current = serializers.SerializerMethodField(
        help_text="False when the class or the cluster's slices changed since the count (a recount is queued)."
    )

    def get_matching_error(self, obj) -> str:
        if obj.match_computed_at is None:
            return "not counted yet (counted in the background after class and slice changes)"
        return obj.match_error

    def get_matching_current(self, obj) -> bool:
        return obj.pk in self.context.get("class_matches_current", ())


class ResourceSliceSerializer(KubeObjectSerializer):
    driver = serializers.CharField(read_only=True)
    pool = serializers.CharField(read_only=True)
    pool_generation = serializers.IntegerField(read_only=True)
    resource_slice_count = serializers.IntegerField(read_only=True)
    node = serializers.CharField(source="node_name", read_only=True)
    all_nodes = serializers.BooleanField(read_only=True)
    per_device_node_selection = serializers.BooleanField(read_only=True)
    node_selector = serializers.JSONField(read_only=True, allow_null=True)
    device_count = serializers.IntegerField(read_only=True)


class DeviceSerializer(RawOptionalMixin, serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    cluster_id = serializers.IntegerField(read_only=True)
    slice_id = serializers.IntegerField(read_only=True)
    driver = serializers.CharField(read_only=True)
    pool = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    node = serializers.CharField(source="node_name", read_only=True)
    state = serializers.ChoiceField(choices=DEVICE_STATES, read_only=True)
    fleet_state = serializers.ChoiceField(
        choices=STATES,
        read_only=True,
        help_text="The dashboard's full state (free, allocated, admin, partial, tainted, unhealthy, stuck); `state` is its v1 projection.",
    )
    tainted = serializers.BooleanField(read_only=True)
    health = serializers.ChoiceField(
        choices=HEALTH_STATES,
        read_only=True,
        default="healthy",
        help_text="Device health (GET /api/v1/health/devices says why): unhealthy, degraded, unknown, or healthy "
        "when nothing reports trouble.",
    )
    attributes = serializers.DictField(
        source="attribute_values",
        read_only=True,
        help_text="Plain attribute values; names bare for the driver's own domain, qualified otherwise.",
    )
    capacity = serializers.SerializerMethodField(help_text='Capacity quantities as published (e.g. "80Gi").')
    taints = serializers.ListField(child=serializers.DictField(), read_only=True)
    allow_multiple_allocations = serializers.BooleanField(read_only=True)
    binds_to_node = serializers.BooleanField(read_only=True)
    consumes_counters = serializers.ListField(child=serializers.DictField(), read_only=True)
    raw = serializers.JSONField(
        required=False, help_text="The device entry exactly as in the slice (only with ?raw=1)."
    )

    def get_capacity(self, device) -> dict[str, str]:
        from mirror.normalize import normalize_name

        return {
            normalize_name(name, device.driver): str(cap.get("value"))
            for name, cap in device.capacity.items()
            if isinstance(cap, dict)
        }


class AllocationSerializer(serializers.Serializer):
    claim_id = serializers.IntegerField()
    namespace = serializers.CharField(source="claim.namespace")
    claim = serializers.CharField(source="claim.name")
    request = serializers.CharField()
    admin_access = serializers.BooleanField()
    share_id = serializers.CharField()
    consumed_capacity = serializers.DictField()


class DeviceDetailSerializer(DeviceSerializer):
    allocations = serializers.SerializerMethodField(
        help_text="Allocation results naming this device (claims you may see)."
    )

    def get_allocations(self, device) -> list[dict]:
        # The claims side serves them (mirror/holdings.py): inventory does not read claims' tables itself.
        results = holdings.allocations(
            device.cluster_id, device.driver, device.pool, device.name, self.context["request"].user
        )
        return AllocationSerializer(results, many=True).data
