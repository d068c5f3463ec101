"""django-filter FilterSets for the inventory side: nodes, classes, slices, devices."""

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

from mirror.api.filters import (
    ApiFilterSet,
    AttributeFilter,
    CapacityFilter,
    KubeObjectFilterSet,
    StrictBooleanFilter,
    search_filter,
)
from mirror.api.params import MAX_SEARCH_LENGTH
from mirror.api.serializers import LIST_ANNOTATIONS
from mirror.models import Cluster

from . import devicefilter
from .devicestate import FLAGS, STATES
from .models import Device, DeviceClass, Node, ResourceSlice
from .querysets import DEVICE_STATES

# What a device row's Python check of the filter language reads (the clauses SQL cannot answer).
_FILTER_FIELDS = ("id", "driver", "pool", "name", "node_name", "attributes", "capacity")

# Device health (the health app's notion, worst first): what the devices' `health` column and filter
# take. The health app registers the column's expression (mirror.api.serializers.register_annotations);
# without it every device is healthy.
HEALTH_STATES = ("unhealthy", "degraded", "unknown", "healthy")

__all__ = ("ClusterFilterSet", "NodeFilterSet", "DeviceClassFilterSet", "ResourceSliceFilterSet", "DeviceFilterSet")


class ClusterFilterSet(ApiFilterSet):
    name = django_filters.CharFilter()
    enabled = StrictBooleanFilter()
    ordering = django_filters.OrderingFilter(fields=("name", "created"))

    class Meta:
        model = Cluster
        fields = ("name", "enabled")


class NodeFilterSet(KubeObjectFilterSet):
    ready = StrictBooleanFilter()
    unschedulable = StrictBooleanFilter()
    # "Nodes with ≥ N free GPUs of model X" (fleet.node_gpu_q), the three read together in filter_queryset.
    min_free_gpus = django_filters.NumberFilter(
        method="filter_gpus",
        min_value=0,
        max_value=100000,
        decimal_places=0,
        error_messages={
            "invalid": "Free GPUs must be a whole number.",
            "max_decimal_places": "Free GPUs must be a whole number.",
        },
        help_text="At least this many free whole GPUs (a GPU with a partition in use is not free).",
    )
    gpu_model = django_filters.CharFilter(
        method="filter_gpus", help_text="Of this model (productName; device-plugin nodes: their GPU product label)."
    )
    gpu_source = django_filters.ChoiceFilter(
        choices=[("any", "any"), ("dra", "dra"), ("device-plugin", "device-plugin")],
        method="filter_gpus",
        error_messages={"invalid_choice": "Unknown GPU source %(value)r: use any, dra or device-plugin."},
        help_text="Count DRA devices, device-plugin GPUs, or either (default; a node with both is not counted twice).",
    )
    q = search_filter("filter_q", "Text the node's name contains (any case).")
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "name", "creation_timestamp", "gpus", "free_gpus")
    )

    def filter_gpus(self, queryset, name, value):
        return queryset  # all three together in filter_queryset

    def filter_q(self, queryset, name, value):
        return queryset.filter(name__icontains=value)

    def filter_queryset(self, queryset):
        from . import fleet

        queryset = super().filter_queryset(queryset)
        data = self.form.cleaned_data
        if data.get("min_free_gpus") is None and not data.get("gpu_model"):
            return queryset
        n = data.get("min_free_gpus")
        flt = {
            "min_free": int(n) if n is not None else 1,
            "model": data.get("gpu_model") or "",
            "source": data.get("gpu_source") or "any",
        }
        return queryset.filter(fleet.node_gpu_q(flt))

    class Meta:
        model = Node
        fields = ("cluster", "name", "uid", "ready", "unschedulable")


class DeviceClassFilterSet(KubeObjectFilterSet):
    ordering = django_filters.OrderingFilter(fields=(("cluster__name", "cluster"), "name", "creation_timestamp"))

    class Meta:
        model = DeviceClass
        fields = ("cluster", "name", "uid")


class ResourceSliceFilterSet(KubeObjectFilterSet):
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter()
    node = django_filters.CharFilter(field_name="node_name", help_text="spec.nodeName of the slice.")
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), "name", "driver", "pool", ("node_name", "node"), "creation_timestamp")
    )

    class Meta:
        model = ResourceSlice
        fields = ("cluster", "name", "uid", "driver", "pool", "node")


class DeviceFilterField(forms.CharField):
    """The devices list's filter language (inventory/devicefilter.py): `productName = NVIDIA H100
    80GB HBM3; memory >= 40Gi`, parsed into clauses; a syntax error names the clause."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", MAX_SEARCH_LENGTH)
        super().__init__(**kwargs)

    def clean(self, value):
        text = super().clean(value)
        try:
            return devicefilter.parse(text)
        except devicefilter.FilterError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None


@extend_schema_field({"type": "string"})
class DeviceLanguageFilter(django_filters.Filter):
    field_class = DeviceFilterField


def _choice_error(what, choices):
    return {"invalid_choice": f"Unknown {what} %(value)r: use one of {', '.join(choices)}."}


class DeviceFilterSet(ApiFilterSet):
    cluster = django_filters.ModelChoiceFilter(
        field_name="cluster", to_field_name="name", queryset=Cluster.objects.all(), help_text="Cluster name."
    )
    node = django_filters.CharFilter(field_name="node_name", help_text="Node the device lives on.")
    driver = django_filters.CharFilter()
    pool = django_filters.CharFilter()
    name = django_filters.CharFilter(help_text="Device name within its pool.")
    slice = django_filters.NumberFilter(field_name="slice_id", help_text="Id of the ResourceSlice.")
    state = django_filters.ChoiceFilter(
        choices=[(s, s) for s in DEVICE_STATES],
        method="filter_state",
        help_text="free, allocated (exclusively, stuck claims included), shared (only capacity shares, or "
        "partitions whose shared counters held siblings use up), admin (only admin-access results), "
        "tainted (not held; a NoSchedule/NoExecute taint or a NotReady node keeps new claims off it).",
    )
    fleet_state = django_filters.ChoiceFilter(
        choices=[(s, s) for s in STATES],
        method="filter_fleet_state",
        error_messages=_choice_error("state", STATES),
        help_text="The dashboard's state vocabulary (the pages' `state`): free, allocated, admin, partial, tainted, "
        "unhealthy (node NotReady), stuck.",
    )
    flag = django_filters.ChoiceFilter(
        choices=[(f, f) for f in FLAGS],
        method="filter_flag",
        error_messages=_choice_error("flag", FLAGS),
        help_text="Carries this secondary flag whatever its state: tainted, unhealthy (node NotReady), admin "
        "(watched with admin access).",
    )
    tainted = StrictBooleanFilter(help_text="Has a NoSchedule or NoExecute taint, whatever the state.")
    health = django_filters.ChoiceFilter(
        choices=[(h, h) for h in HEALTH_STATES],
        method="filter_health",
        error_messages=_choice_error("health", HEALTH_STATES),
        help_text="Device health: unhealthy, degraded, unknown, or healthy (nothing reports trouble); "
        "GET /api/v1/health/devices says why.",
    )
    kind = django_filters.ChoiceFilter(
        choices=[("gpu", "gpu"), ("partition", "partition"), ("other", "other")],
        help_text="gpu (a whole GPU), partition (a MIG slice of one), other (NICs ...): inventory/devicekinds.py.",
    )
    attribute = AttributeFilter(
        method="filter_attribute",
        help_text="NAME:VALUE, repeatable (all must match). NAME bare = the device's driver domain, "
        "e.g. gpu.nvidia.com/productName:NVIDIA H100 80GB HBM3.",
    )
    capacity = CapacityFilter(
        method="filter_capacity",
        help_text="NAME OP QUANTITY with OP one of = != < <= > >=, repeatable, e.g. gpu.nvidia.com/memory>=40Gi.",
    )
    # Last: the clauses SQL cannot answer are checked in Python on what every other filter left.
    q = DeviceLanguageFilter(
        method="filter_language",
        help_text="The devices page's filter language: clauses `name op value` separated by `;`, a newline or "
        "`and`, op one of = == != >= <= > < ~ (contains), e.g. `productName = NVIDIA H100 80GB HBM3; memory >= 40Gi` "
        "(docs/ui.md).",
    )
    ordering = django_filters.OrderingFilter(
        fields=(("cluster__name", "cluster"), ("node_name", "node"), "driver", "pool", "name")
    )

    class Meta:
        model = Device
        fields = ()

    def filter_state(self, queryset, name, value):
        return queryset.in_state(value) if value else queryset

    def filter_fleet_state(self, queryset, name, value):
        return queryset.in_fleet_state(value) if value else queryset

    def filter_flag(self, queryset, name, value):
        return queryset.with_flag(value) if value else queryset

    def filter_health(self, queryset, name, value):
        if not value:
            return queryset
        make = LIST_ANNOTATIONS.get("devices", {}).get("health")
        if make is None:
            return queryset if value == "healthy" else queryset.none()
        # An alias of its own: the API's queryset already carries the `health` column.
        return queryset.alias(health_filter=make()).filter(health_filter=value)

    def filter_language(self, queryset, name, clauses):
        if not clauses:
            return queryset
        try:
            queryset, residual = devicefilter.apply_sql(queryset, clauses)
            if residual:
                rows = queryset.order_by().values(*_FILTER_FIELDS).iterator(chunk_size=2000)
                # The matching ids as one parameter (mirror/lookups.py): they may be many thousands.
                queryset = queryset.filter(pk__any_of=[d["id"] for d in devicefilter.filter_devices(rows, residual)])
        except devicefilter.FilterError as exc:  # a name no device publishes, a value of the wrong type
            return self.reject(name, str(exc), queryset)
        return queryset

    def filter_attribute(self, queryset, name, parsed):
        for n, (attr, candidates) in enumerate(parsed):
            if not Device.objects.attribute_known(attr):
                raise ValidationError({"attribute": [f"No device publishes an attribute named {attr!r}."]})
            queryset = queryset.with_attribute(attr, candidates, n=n)
        return queryset

    def filter_capacity(self, queryset, name, parsed):
        for n, (cap, op, number) in enumerate(parsed):
            if not Device.objects.capacity_known(cap):
                raise ValidationError({"capacity": [f"No device publishes a capacity named {cap!r}."]})
            queryset = queryset.with_capacity(cap, op, number, n=n)
        return queryset
