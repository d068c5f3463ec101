"""django-filter FilterSets for the workload side: claims, templates, pods, audit log."""

import json

import django_filters
from django.db import connection
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast

from mirror.api.filters import ApiFilterSet, NamespacedFilterSet, search_filter
from mirror.models import Cluster

from .models import (
    AllocationResult,
    AuditEntry,
    ClaimConsumer,
    ClaimDeviceStatus,
    Finding,
    Pod,
    PodClaimRef,
    PodResourceHealth,
    ResourceClaim,
    ResourceClaimTemplate,
)

__all__ = (
    "ResourceClaimFilterSet",
    "ResourceClaimTemplateFilterSet",
    "PodFilterSet",
    "AuditEntryFilterSet",
    "FindingFilterSet",
    "DeviceStatusFilterSet",
    "DeviceHealthFilterSet",
    "stuck_exists",
)

CLAIM_STATES = [s.value for s in ResourceClaim.State] + ["stuck"]


def stuck_exists():
    """A claim is stuck while the detector has an active (uncleared) finding on it."""
    return Exists(
        Finding.objects.stuck()
        .filter(cluster_id=OuterRef("cluster_id"), claim_uid=OuterRef("uid"))
        .exclude(claim_uid="")
    )


def json_list_contains(queryset, field, value):
    """Rows whose JSON list `field` holds the string `value`."""
    if connection.vendor == "postgresql":
        return queryset.filter(**{f"{field}__contains": [value]})
    # SQLite has no JSON containment; the stored text of a list of strings has each as "value".
    return queryset.annotate(**{f"_{field}_text": Cast(field, TextField())}).filter(
        **{f"_{field}_text__contains": json.dumps(value)}
    )


class ResourceClaimFilterSet(NamespacedFilterSet):
    state = django_filters.ChoiceFilter(
        choices=[(s, s) for s in CLAIM_STATES],
        method="filter_state",
        help_text="pending, allocated, reserved (in use by a pod), deleting, or stuck (an active finding).",
    )
    node = django_filters.CharFilter(field_name="node_name", help_text="Node the allocation is pinned to.")
    device_class = django_filters.CharFilter(
        method="filter_device_class", help_text="A DeviceClass the claim requests."
    )
    pod = django_filters.CharFilter(
        method="filter_pod", help_text="Name of a pod that references, owns or reserves the claim."
    )
    q = search_filter("filter_q", "Text the claim's name or its owner pod's name contains (any case).")
    ordering = django_filters.OrderingFilter(
        fields=(
            ("cluster__name", "cluster"),
            "namespace",
            "name",
            "state",
            "creation_timestamp",
            "allocation_timestamp",
        )
    )

    class Meta:
        model = ResourceClaim
        fields = ("cluster", "namespace", "name", "uid")

    def filter_state(self, queryset, name, value):
        if value == "stuck":
            return queryset.filter(stuck_exists())
        return queryset.filter(state=value) if value else queryset

    def filter_device_class(self, queryset, name, value):
        return json_list_contains(queryset, "device_classes", value)

    def filter_q(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(owner_pod_name__icontains=value))

    def filter_pod(self, queryset, name, value):
        referenced = PodClaimRef.objects.filter(
            cluster_id=OuterRef("cluster_id"),
            namespace=OuterRef("namespace"),
            claim_name=OuterRef("name"),
            pod__name=value,
        )
        reserved = ClaimConsumer.objects.filter(claim_id=OuterRef("pk"), resource="pods", name=value)
        return queryset.filter(Q(owner_pod_name=value) | Exists(referenced) | Exists(reserved))


class ResourceClaimTemplateFilterSet(NamespacedFilterSet):
    device_class = django_filters.CharFilter(
        method="filter_device_class", help_text="A DeviceClass the template requests."
    )
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "namespace", "name", "creation_timestamp")
    )

    class Meta:
        model = ResourceClaimTemplate
        fields = ("cluster", "namespace", "name", "uid")

    def filter_device_class(self, queryset, name, value):
        return json_list_contains(queryset, "device_classes", value)


class PodFilterSet(NamespacedFilterSet):
    phase = django_filters.ChoiceFilter(
        choices=[(p, p) for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown")]
    )
    node = django_filters.CharFilter(field_name="node_name")
    claim = django_filters.CharFilter(method="filter_claim", help_text="Name of a claim the pod uses.")
    q = search_filter("filter_q", "Text the pod's name contains (any case).")
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "namespace", "name", "phase", ("node_name", "node"), "creation_timestamp")
    )

    class Meta:
        model = Pod
        fields = ("cluster", "namespace", "name", "uid")

    def filter_q(self, queryset, name, value):
        return queryset.filter(name__icontains=value)

    def filter_claim(self, queryset, name, value):
        return queryset.filter(Exists(PodClaimRef.objects.filter(pod_id=OuterRef("pk"), claim_name=value)))


class DeviceStatusFilterSet(ApiFilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="cluster", to_field_name="name", queryset=Cluster.objects.all()
    )
    namespace = django_filters.CharFilter()
    claim = django_filters.CharFilter(field_name="claim__name", help_text="Name of the claim.")
    node = django_filters.CharFilter(
        field_name="claim__node_name", help_text="Node the claim's allocation is pinned to."
    )
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter()
    device = django_filters.CharFilter(help_text="Device name (with driver and pool: one device).")
    ready = django_filters.BooleanFilter(help_text="The Ready condition's status (true/false).")
    has_error = django_filters.BooleanFilter(
        method="filter_has_error", help_text="Entries that could not be read as served."
    )
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "namespace", ("claim__name", "claim"), "driver", "pool", "device")
    )

    class Meta:
        model = ClaimDeviceStatus
        fields = ()

    def filter_has_error(self, queryset, name, value):
        return queryset.exclude(error="") if value else queryset.filter(error="")


class DeviceHealthFilterSet(ApiFilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="cluster", to_field_name="name", queryset=Cluster.objects.all()
    )
    namespace = django_filters.CharFilter()
    pod = django_filters.CharFilter(field_name="pod__name", help_text="Name of the pod.")
    node = django_filters.CharFilter(field_name="pod__node_name", help_text="Node the pod runs on.")
    claim = django_filters.CharFilter(field_name="resource_claim_name", help_text="Name of the ResourceClaim.")
    health = django_filters.ChoiceFilter(choices=PodResourceHealth.Health.choices)
    driver = django_filters.CharFilter(method="filter_device", help_text="With pool and device: one device.")
    pool = django_filters.CharFilter(method="filter_device")
    device = django_filters.CharFilter(
        method="filter_device",
        help_text="Reports about this device: by the device its resource ID names, or through the claim's "
        "allocation for a CDI device ID.",
    )
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "namespace", ("pod__name", "pod"), "container", "health")
    )

    class Meta:
        model = PodResourceHealth
        fields = ()

    def filter_device(self, queryset, name, value):
        """driver/pool/device: the rows that name it, or whose claim holds such a device (a CDI ID,
        resolved after the page is read)."""
        claims = AllocationResult.objects.filter(**{name: value}).values("claim_id")
        holders = ResourceClaim.objects.filter(pk__in=claims).values_list("cluster_id", "namespace", "name")
        by_claim = Q(pk__in=[])
        for cluster_id, namespace, claim in holders:
            by_claim |= Q(cluster_id=cluster_id, namespace=namespace, resource_claim_name=claim, device="")
        return queryset.filter(Q(**{name: value}) | by_claim)


class AuditEntryFilterSet(ApiFilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="cluster", to_field_name="name", queryset=Cluster.objects.all()
    )
    namespace = django_filters.CharFilter()
    claim = django_filters.CharFilter(field_name="claim_name")
    username = django_filters.CharFilter()
    action = django_filters.CharFilter()
    outcome = django_filters.CharFilter()
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(fields=("at", "namespace", "action", "outcome"))

    class Meta:
        model = AuditEntry
        fields = ()


class FindingFilterSet(ApiFilterSet):
    """Stuck-claim findings: the Stuck page's filters and GET /api/v1/findings' (open ones unless
    `active` says otherwise)."""

    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="Cluster name.")
    rule = django_filters.CharFilter(method="filter_rule", help_text="A detector rule (claims/stuck.py).")
    severity = django_filters.CharFilter()
    namespace = django_filters.CharFilter()
    claim = django_filters.CharFilter(field_name="claim_name", help_text="Name of the claim.")
    active = django_filters.ChoiceFilter(
        choices=[("1", "1"), ("0", "0"), ("all", "all")],
        method="filter_active",
        error_messages={"invalid_choice": "Must be 1, 0 or all, not %(value)r."},
        help_text="1 (default) = open findings, 0 = cleared, all = both.",
    )

    class Meta:
        model = Finding
        fields = ()

    def filter_rule(self, queryset, name, value):
        from .stuck import RULE_TITLES

        if value not in RULE_TITLES:
            return self.reject(name, f"Unknown rule {value!r}; known: {', '.join(RULE_TITLES)}.", queryset)
        return queryset.filter(rule=value)

    def filter_active(self, queryset, name, value):
        return queryset  # with its default, in filter_queryset

    def filter_queryset(self, queryset):
        active = self.form.cleaned_data.get("active") or "1"
        if active != "all":
            queryset = queryset.filter(cleared_at__isnull=active == "1")
        return super().filter_queryset(queryset)
