"""FilterSets of the health endpoints (GET /api/v1/health/devices, /api/v1/health/timeline)."""

import django_filters

from mirror.api.filters import ApiFilterSet

from .models import STATES, DeviceHealth, HealthChange

STATE_CHOICES = [(s, s) for s in STATES]
_STATE_ERROR = {"invalid_choice": f"Must be one of {', '.join(STATES)}, not %(value)r."}


class _DeviceFilters(ApiFilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="Cluster name.")
    driver = django_filters.CharFilter(help_text="Driver name.")
    pool = django_filters.CharFilter(help_text="Pool name.")
    device = django_filters.CharFilter(help_text="Device name.")
    node = django_filters.CharFilter(field_name="node_name", help_text="Node name.")


class DeviceHealthFilterSet(_DeviceFilters):
    state = django_filters.ChoiceFilter(
        choices=[c for c in STATE_CHOICES if c[0] != "healthy"],
        error_messages={"invalid_choice": "Must be one of unhealthy, degraded, unknown, not %(value)r."},
        help_text="unhealthy, degraded or unknown (healthy devices have no row).",
    )
    source = django_filters.CharFilter(help_text="Source of the main reason: pod-report, slice-taint, taint-rule.")

    class Meta:
        model = DeviceHealth
        fields = ()


class HealthChangeFilterSet(_DeviceFilters):
    to_state = django_filters.ChoiceFilter(
        choices=STATE_CHOICES, error_messages=_STATE_ERROR, help_text="The state the device changed to."
    )
    from_state = django_filters.ChoiceFilter(
        choices=STATE_CHOICES, error_messages=_STATE_ERROR, help_text="The state the device changed from."
    )
    source = django_filters.CharFilter(help_text="pod-report, slice-taint, taint-rule, or empty (back to healthy).")
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte", help_text="Changes at or after.")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt", help_text="Changes before.")

    class Meta:
        model = HealthChange
        fields = ()
