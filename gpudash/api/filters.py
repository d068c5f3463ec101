"""FilterSet bases and the filter backend shared by every list endpoint."""

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

from inventory.models import Cluster

from .params import AttributeFilterField, CapacityFilterField, StrictBooleanField

# Parameters every list endpoint understands besides its filters.
COMMON_PARAMS = {"page", "page_size", "cursor", "raw", "format"}  # cursor: keyset paging (gpudash/api/pagination.py)

_REPEATABLE_SCHEMA = {"type": "array", "items": {"type": "string"}}


@extend_schema_field(_REPEATABLE_SCHEMA)
class AttributeFilter(django_filters.Filter):
    field_class = AttributeFilterField


@extend_schema_field(_REPEATABLE_SCHEMA)
class CapacityFilter(django_filters.Filter):
    field_class = CapacityFilterField


@extend_schema_field({"type": "boolean"})
class StrictBooleanFilter(django_filters.Filter):
    field_class = StrictBooleanField


class ApiFilterSet(django_filters.FilterSet):
    """Adds a stable order: whatever `ordering` asks for (or the model's default), then the id."""

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        ordering = list(queryset.query.order_by) or list(queryset.model._meta.ordering)
        return queryset.order_by(*ordering, "pk")


class KubeObjectFilterSet(ApiFilterSet):
    """Filters every mirrored Kubernetes object has."""

    cluster = django_filters.ModelChoiceFilter(
        field_name="cluster", to_field_name="name", queryset=Cluster.objects.all(), help_text="Cluster name."
    )
    name = django_filters.CharFilter(help_text="Exact object name.")
    uid = django_filters.CharFilter(help_text="Kubernetes metadata.uid.")


class NamespacedFilterSet(KubeObjectFilterSet):
    namespace = django_filters.CharFilter(help_text="Exact namespace.")


class StrictFilterBackend(DjangoFilterBackend):
    """Rejects unknown parameters and NUL bytes instead of silently ignoring them (a typo'd filter
    would otherwise return everything)."""

    def filter_queryset(self, request, queryset, view):
        known = set(COMMON_PARAMS) | set(getattr(view, "extra_query_params", ()))
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            known |= set(filterset_class.base_filters)
        check_params(request, known)
        return super().filter_queryset(request, queryset, view)


def check_params(request, known):
    for key, values in request.query_params.lists():
        if key not in known:
            raise ValidationError({key: [f"Unknown parameter {key!r}; this endpoint accepts: {', '.join(sorted(known))}."]})
        if any("\x00" in v for v in values):
            raise ValidationError({key: ["NUL characters are not allowed."]})


def int_param(params, name, default, low, high):
    """An integer query parameter within [low, high] (high None: no upper bound), or a 400 naming it."""
    text = params.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValidationError({name: [f"Must be an integer, got {text!r}."]}) from None
    if value < low or (high is not None and value > high):
        raise ValidationError({name: [f"Must be between {low} and {high}." if high is not None else f"Must be at least {low}."]})
    return value
