"""FilterSet bases and the filter backend shared by every list endpoint."""

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ErrorDetail, ValidationError

from mirror.models import Cluster

from .params import (
    DB_INT_MAX,
    MAX_SEARCH_LENGTH,
    AttributeFilterField,
    CapacityFilterField,
    StrictBooleanField,
    whole_number,
)

# Parameters every list endpoint understands besides its filters.
COMMON_PARAMS = {"page", "page_size", "cursor", "raw", "format"}  # cursor: keyset paging (mirror/api/pagination.py)

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


def search_filter(method, help_text):
    """The list's search box (`q`), the same on its page and its endpoint: a text of at most
    MAX_SEARCH_LENGTH characters, matched by the FilterSet's `method`."""
    return django_filters.CharFilter(method=method, max_length=MAX_SEARCH_LENGTH, help_text=help_text)


class ApiFilterSet(django_filters.FilterSet):
    """Adds a stable order: whatever `ordering` asks for (or the model's default), then the id; and
    keeps number filters within what the database can compare (a larger id is a 400, not a driver
    error)."""

    @classmethod
    def get_filters(cls):
        filters = super().get_filters()
        for f in filters.values():
            if isinstance(f, django_filters.NumberFilter):
                f.extra.setdefault("min_value", -DB_INT_MAX - 1)
                f.extra.setdefault("max_value", DB_INT_MAX)
        return filters

    def filter_queryset(self, queryset):
        self._rejected = []
        queryset = super().filter_queryset(queryset)
        for name, message in self._rejected:  # after the filters: the form's data is read while they run
            self.form.add_error(name, message)
        ordering = list(queryset.query.order_by) or list(queryset.model._meta.ordering)
        return queryset.order_by(*ordering, "pk")

    def reject(self, name, message, queryset):
        """For a filter that finds its value wrong while filtering (a name no row has): the value's
        error, as the form's own (a 400 in the API, the message on a page), and no rows."""
        self._rejected.append((name, message))
        return queryset.none()


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
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if not filterset.is_valid():
            raise filter_errors(filterset)
        filtered = filterset.qs
        if filterset.errors:  # found while filtering (a name no device publishes, a value of the wrong type)
            raise filter_errors(filterset)
        return filtered


def filter_errors(filterset):
    """The 400 for an invalid filterset, its messages formatted as Django formats them.

    django-filter's own translation applies `message % params` even without params, so a message
    quoting the value `%` (`?tainted=%`) raised a TypeError: a 500 instead of the 400."""
    return ValidationError(
        {
            field: [ErrorDetail(e["message"], code=e["code"] or "invalid") for e in errors]
            for field, errors in filterset.form.errors.get_json_data().items()
        }
    )


def check_params(request, known):
    for key, values in request.query_params.lists():
        if key not in known:
            raise ValidationError(
                {key: [f"Unknown parameter {key!r}; this endpoint accepts: {', '.join(sorted(known))}."]}
            )
        if any("\x00" in v for v in values):
            raise ValidationError({key: ["NUL characters are not allowed."]})


def int_param(params, name, default, low, high=DB_INT_MAX):
    """A whole-number query parameter within [low, high], or a 400 naming it (and the range)."""
    text = params.get(name)
    if text in (None, ""):
        return default
    value = whole_number(text.strip(), low, high)
    if value is None:
        raise ValidationError({name: [f"Must be a whole number from {low} to {high}."]})
    return value
