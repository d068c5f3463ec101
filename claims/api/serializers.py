"""Normalised views of claims, claim templates, pods and audit entries."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from claims.models import (
    AllocationResult,
    AuditEntry,
    ClaimConsumer,
    ClaimDeviceStatus,
    PodClaimRef,
    PodResourceHealth,
    ResourceClaim,
    resolve_devices,
)
from mirror.api.serializers import NamespacedSerializer

__all__ = (
    "ResourceClaimSerializer",
    "ResourceClaimTemplateSerializer",
    "PodSerializer",
    "AuditEntrySerializer",
    "DeviceStatusSerializer",
    "DeviceHealthSerializer",
)


class AllocationResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = AllocationResult
        fields = ("request", "driver", "pool", "device", "admin_access", "share_id", "consumed_capacity")


class ConsumerSerializer(serializers.ModelSerializer):
    class Meta:
        model = ClaimConsumer
        fields = ("api_group", "resource", "name", "uid")


class ConditionSerializer(serializers.Serializer):
    """A metav1.Condition as the driver wrote it."""

    type = serializers.CharField()
    status = serializers.CharField(help_text="True, False or Unknown.")
    reason = serializers.CharField()
    message = serializers.CharField(required=False)
    lastTransitionTime = serializers.CharField(help_text="RFC 3339, as served.")  # noqa: N815 (the API's name)
    observedGeneration = serializers.IntegerField(required=False)  # noqa: N815


class NetworkDataSerializer(serializers.Serializer):
    interface_name = serializers.CharField(help_text="networkData.interfaceName; empty when not reported.")
    ips = serializers.ListField(child=serializers.CharField(), help_text="networkData.ips, in CIDR form.")
    hardware_address = serializers.CharField(help_text="networkData.hardwareAddress (e.g. a MAC address).")


class ClaimDeviceStatusSerializer(serializers.ModelSerializer):
    """One status.devices[] entry: what the driver reports about a device it prepared for the claim."""

    conditions = ConditionSerializer(many=True, read_only=True)
    data = serializers.JSONField(read_only=True, allow_null=True, help_text="The driver's opaque data, as written.")
    network_data = NetworkDataSerializer(source="*", read_only=True)
    ready = serializers.BooleanField(
        read_only=True, allow_null=True, help_text="The Ready condition's status; null without such a condition."
    )
    error = serializers.CharField(
        read_only=True, help_text="Why the entry could not be read as served; empty when it could."
    )

    class Meta:
        model = ClaimDeviceStatus
        fields = ("driver", "pool", "device", "share_id", "ready", "conditions", "data", "network_data", "error")


class DeviceKeySerializer(serializers.Serializer):
    driver = serializers.CharField()
    pool = serializers.CharField()
    device = serializers.CharField()


class ResourceHealthSerializer(serializers.ModelSerializer):
    """One resource of a container's allocatedResourcesStatus: the kubelet's word on its health."""

    health = serializers.CharField(read_only=True, help_text="Healthy, Unhealthy or Unknown (as served).")
    device = serializers.SerializerMethodField(
        help_text="The device the resource ID stands for (see docs/device-health.md); null when not known."
    )

    class Meta:
        model = PodResourceHealth
        fields = (
            "container",
            "init_container",
            "resource_name",
            "claim_name",
            "request",
            "resource_claim_name",
            "resource_id",
            "health",
            "message",
            "device",
            "error",
        )

    @extend_schema_field(DeviceKeySerializer(allow_null=True))
    def get_device(self, row):
        key = getattr(row, "device_key", None)
        return None if key is None else dict(zip(("driver", "pool", "device"), key, strict=True))


class OwnerPodSerializer(serializers.Serializer):
    uid = serializers.CharField(source="owner_pod_uid")
    name = serializers.CharField(source="owner_pod_name")


class ResourceClaimSerializer(NamespacedSerializer):
    state = serializers.ChoiceField(choices=ResourceClaim.State.choices, read_only=True)
    stuck = serializers.BooleanField(read_only=True, help_text="An active stuck-claim finding exists for this claim.")
    allocated = serializers.BooleanField(read_only=True)
    node = serializers.CharField(
        source="node_name", read_only=True, help_text="Node the allocation is pinned to, if one."
    )
    allocation_timestamp = serializers.DateTimeField(read_only=True, allow_null=True)
    device_classes = serializers.ListField(child=serializers.CharField(), read_only=True)
    finalizers = serializers.ListField(child=serializers.CharField(), read_only=True)
    owner_pod = OwnerPodSerializer(source="*", read_only=True)
    pod_claim_name = serializers.CharField(read_only=True)
    results = AllocationResultSerializer(many=True, read_only=True)
    reserved_for = ConsumerSerializer(source="consumers", many=True, read_only=True)
    device_statuses = ClaimDeviceStatusSerializer(
        many=True, read_only=True, help_text="status.devices: what the drivers report about the allocated devices."
    )


class ResourceClaimTemplateSerializer(NamespacedSerializer):
    device_classes = serializers.ListField(child=serializers.CharField(), read_only=True)


class PodClaimRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = PodClaimRef
        fields = ("pod_claim_name", "template_name", "claim_name")


class HamiAssignedDeviceSerializer(serializers.Serializer):
    container = serializers.IntegerField(
        help_text="Index in the pod's containers, init containers first (HAMi's order)."
    )
    uuid = serializers.CharField(help_text="The physical GPU's UUID.")
    type = serializers.CharField(help_text="HAMi's device type (e.g. NVIDIA).")
    memory = serializers.IntegerField(help_text="GPU memory assigned, MiB.")
    cores = serializers.IntegerField(help_text="GPU compute assigned, percent of the GPU.")


class PodHamiSerializer(serializers.Serializer):
    annotation = serializers.CharField(help_text="The annotation read, e.g. hami.io/vgpu-devices-allocated.")
    devices = HamiAssignedDeviceSerializer(many=True, help_text="One entry per vGPU HAMi assigned.")
    problem = serializers.CharField(
        help_text="What could not be read (those records are left out of `devices`); empty when all was read."
    )


class PodSerializer(NamespacedSerializer):
    phase = serializers.CharField(read_only=True)
    node = serializers.CharField(source="node_name", read_only=True)
    scheduled_status = serializers.CharField(read_only=True)
    scheduled_reason = serializers.CharField(read_only=True)
    scheduled_message = serializers.CharField(read_only=True)
    owner_kind = serializers.CharField(read_only=True)
    owner_name = serializers.CharField(read_only=True)
    claims = PodClaimRefSerializer(source="claim_refs", many=True, read_only=True)
    resource_health = serializers.SerializerMethodField(
        help_text="Per container, claim request and resource: the health the kubelet reports (allocatedResourcesStatus)."
    )
    hami = serializers.SerializerMethodField(
        help_text="The vGPUs HAMi's scheduler assigned (its allocation annotation); null for a pod HAMi did not schedule."
    )

    @extend_schema_field(ResourceHealthSerializer(many=True))
    def get_resource_health(self, pod):
        rows = list(pod.resource_health.all())
        if any(not hasattr(r, "device_key") for r in rows):  # a list page resolves its pods' rows at once
            resolve_devices(rows)
        return ResourceHealthSerializer(rows, many=True).data

    @extend_schema_field(PodHamiSerializer(allow_null=True))
    def get_hami(self, pod):
        return {k: pod.hami.get(k) for k in ("annotation", "devices", "problem")} if pod.hami else None


class DeviceStatusSerializer(ClaimDeviceStatusSerializer):
    """A status.devices[] entry with its claim: GET /api/v1/device-status/."""

    cluster = serializers.CharField(source="cluster.name", read_only=True)
    namespace = serializers.CharField(read_only=True)
    claim = serializers.CharField(source="claim.name", read_only=True)
    node = serializers.CharField(source="claim.node_name", read_only=True)

    class Meta(ClaimDeviceStatusSerializer.Meta):
        fields = ("id", "cluster", "namespace", "claim", "node", *ClaimDeviceStatusSerializer.Meta.fields)


class DeviceHealthSerializer(ResourceHealthSerializer):
    """A health report with its pod: GET /api/v1/device-health/."""

    cluster = serializers.CharField(source="cluster.name", read_only=True)
    namespace = serializers.CharField(read_only=True)
    pod = serializers.CharField(source="pod.name", read_only=True)
    node = serializers.CharField(source="pod.node_name", read_only=True)

    class Meta(ResourceHealthSerializer.Meta):
        fields = ("id", "cluster", "namespace", "pod", "node", *ResourceHealthSerializer.Meta.fields)


class AuditEntrySerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name", read_only=True)

    class Meta:
        model = AuditEntry
        fields = (
            "id",
            "at",
            "username",
            "cluster",
            "cluster_id",
            "namespace",
            "claim_name",
            "claim_uid",
            "action",
            "rule",
            "dry_run",
            "outcome",
            "reason",
            "reason_message",
            "request",
            "response",
            "before",
            "after",
            "kube_identity",
        )
