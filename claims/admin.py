"""Admin for the workload side: read-only (mirrored from clusters or written by gpudash itself)."""

from django.apps import apps
from django.contrib import admin

from mirror.admin import KubeObjectAdmin, ReadOnlyAdmin

from .models import (
    AllocationResult,
    AuditEntry,
    ClaimConsumer,
    ClaimStateChange,
    Finding,
    Pod,
    PodClaimRef,
    ResourceClaim,
    ResourceClaimTemplate,
)


@admin.register(ResourceClaim)
class ResourceClaimAdmin(KubeObjectAdmin):
    list_display = ("name", "namespace", "cluster", "state", "node_name", "resource_version")
    list_filter = ("cluster", "state")


@admin.register(ResourceClaimTemplate)
class ResourceClaimTemplateAdmin(KubeObjectAdmin):
    pass


@admin.register(Pod)
class PodAdmin(KubeObjectAdmin):
    list_display = ("name", "namespace", "cluster", "phase", "node_name", "resource_version")
    list_filter = ("cluster", "phase")


@admin.register(AllocationResult)
class AllocationResultAdmin(ReadOnlyAdmin):
    list_display = ("claim", "request", "driver", "pool", "device", "cluster")


@admin.register(ClaimConsumer)
class ClaimConsumerAdmin(ReadOnlyAdmin):
    list_display = ("claim", "resource", "name", "uid")


@admin.register(PodClaimRef)
class PodClaimRefAdmin(ReadOnlyAdmin):
    list_display = ("pod", "pod_claim_name", "claim_name", "template_name")


@admin.register(ClaimStateChange)
class ClaimStateChangeAdmin(ReadOnlyAdmin):
    list_display = ("at", "namespace", "name", "old_state", "new_state", "node_name", "cluster")
    list_filter = ("cluster", "new_state")
    search_fields = ("name", "namespace", "uid")


@admin.register(Finding)
class FindingAdmin(ReadOnlyAdmin):
    list_display = ("rule", "severity", "namespace", "claim_name", "first_seen", "cleared_at", "cluster")
    list_filter = ("cluster", "rule", "severity")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "username", "action", "cluster_name", "namespace", "claim_name", "outcome", "dry_run")
    list_filter = ("action", "outcome", "dry_run")


# Models other parts add later (e.g. detector bookkeeping) still show up, read-only.
for _model in apps.get_app_config("claims").get_models():
    if not admin.site.is_registered(_model):
        admin.site.register(_model, ReadOnlyAdmin)
