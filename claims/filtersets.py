"""django-filter FilterSets for the workload side: claims, templates, pods, audit log."""

import json

import django_filters
from django.db import connection
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast

from mirror.api.filters import ApiFilterSet, NamespacedFilterSet, search_filter
from mirror.models import Cluster

from .models import AuditEntry, ClaimConsumer, Finding, Pod, PodClaimRef, ResourceClaim, ResourceClaimTemplate

__all__ = (
    "ResourceClaimFilterSet",
    "ResourceClaimTemplateFilterSet",
    "PodFilterSet",
    "AuditEntryFilterSet",
    "FindingFilterSet",
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
