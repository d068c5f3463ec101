"""Sortable list pages, NetBox style: `?ordering=<column>` or `?ordering=-<column>` in the URL.

The same parameter and the same library as the API's list endpoints (django-filter's OrderingFilter
parses and validates it, comma-separated columns included), so a page's order can be copied into an
API call. A column sorts in SQL (an order expression over the page's queryset, NULLs last either
way) or, where its value is computed per row from other tables (a node's device counts, a pool's
summary), in Python over the filtered rows before paging: `Sorting.python` says which.
Ties keep the page's default order, then the primary key, so pages stay stable.
"""

from dataclasses import dataclass, field

import django_filters
from django.db.models import F
from django.db.models.expressions import BaseExpression
from django.utils.translation import gettext as _

PARAM = "ordering"


@dataclass
class Sorting:
    """What a list page was asked to sort by: [(column, descending)], and the error for a bad value."""

    model: type
    columns: dict  # column -> SQL expression or field name, or None where Python sorts it
    default: tuple  # SQL order of the unsorted page (field names / expressions), before the pk
    order: list = field(default_factory=list)
    error: str = ""
    # column -> function() -> True when the column has one value over the list's rows (its cluster when
    # one cluster is shown): ordering by it then changes nothing, and leaving it out of the ORDER BY
    # lets the index of the default order (or of the next column) serve the page.
    constant: dict = field(default_factory=dict)

    @property
    def python(self):
        """True when a requested column is computed per row (sorted in Python, not SQL)."""
        return any(self.columns[c] is None for c, _ in self.order)

    @property
    def primary(self):
        return self.order[0] if self.order else (None, False)

    def apply(self, queryset, tiebreak=("pk",)):
        """The queryset in the requested SQL order (the default order where Python sorts), then
        `tiebreak` (a grouped `values()` query passes its own unique key: "pk" would split its groups)."""
        exprs = []
        if not self.python:
            for column, desc in self.order:
                if column in self.constant and self.constant[column]():
                    continue
                expr = self.columns[column]
                nullable = isinstance(expr, BaseExpression) or self._nullable(expr)
                expr = expr if isinstance(expr, BaseExpression) else F(expr)
                if not nullable:  # plain ASC/DESC: an index scanned either way serves it
                    exprs.append(expr.desc() if desc else expr.asc())
                else:
                    exprs.append(expr.desc(nulls_last=True) if desc else expr.asc(nulls_last=True))
        return queryset.order_by(*exprs, *self.default, *tiebreak)

    def _nullable(self, name):
        try:
            return self.model._meta.get_field(name).null
        except Exception:  # a related path or an annotation: assume it may be NULL
            return True

    def sort_rows(self, rows, keys):
        """Sort `rows` in place by the requested columns; `keys`: column -> function(row) -> value.
        Rows whose value is None go last either way, as in SQL above."""
        for column, desc in reversed(self.order):
            key = keys[column]
            present = [r for r in rows if key(r) is not None]
            missing = [r for r in rows if key(r) is None]
            present.sort(key=key, reverse=desc)
            rows[:] = present + missing
        return rows


def sorting(request, model, columns, default=(), constant=None):
    """Parse `?ordering=` against `columns` (see Sorting) for a list of `model` rows. An unknown column is an error message
    for the page (shown above the table, the default order kept), never a crash or a silent no-op."""
    filterset = _filterset(tuple(columns))(request.GET, queryset=model._default_manager.none())  # only its form is used
    result = Sorting(model=model, columns=dict(columns), default=tuple(default), constant=dict(constant or {}))
    if not filterset.is_valid():
        result.error = _("Cannot sort by %(value)s: choose from %(columns)s (prefix - for descending).") % {
            "value": repr(request.GET.get(PARAM)),
            "columns": ", ".join(columns),
        }
        return result
    for value in filterset.form.cleaned_data.get(PARAM) or []:
        desc = value.startswith("-")
        result.order.append((value.lstrip("-"), desc))
    return result


_FILTERSETS = {}


def _filterset(names):
    if names not in _FILTERSETS:
        _FILTERSETS[names] = type(
            "SortFilterSet",
            (django_filters.FilterSet,),
            {PARAM: django_filters.OrderingFilter(fields=[(n, n) for n in names])},
        )
    return _FILTERSETS[names]
