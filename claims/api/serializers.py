"""Normalised views of claims, claim templates, pods and audit entries."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from claims.models import AllocationResult, AuditEntry, ClaimConsumer, PodClaimRef, ResourceClaim
from mirror.api.serializers import NamespacedSerializer

__all__ = ("ResourceClaimSerializer", "ResourceClaimTemplateSerializer", "PodSerializer", "AuditEntrySerializer")


class AllocationResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = AllocationResult
        fields = ("request", "driver", "pool", "device", "admin_access", "share_id", "consumed_capacity")


class ConsumerSerializer(serializers.ModelSerializer):
    class Meta:
        model = ClaimConsumer
        fields = ("api_group", "resource", "name", "uid")


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
    hami = serializers.SerializerMethodField(
        help_text="The vGPUs HAMi's scheduler assigned (its allocation annotation); null for a pod HAMi did not schedule."
    )

    @extend_schema_field(PodHamiSerializer(allow_null=True))
    def get_hami(self, pod):
        return {k: pod.hami.get(k) for k in ("annotation", "devices", "problem")} if pod.hami else None


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
