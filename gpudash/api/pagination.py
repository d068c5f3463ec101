"""Page-number pagination, with a keyset (cursor) mode; the list views always order with an `id`
tiebreak, so pages are stable.

`?page=N` (the default) answers `{count, next, previous, results}`. `?cursor=` (empty for the first
page, then the `next` link's value) answers `{next, results}`: no count, and each page is read
where the previous one ended (WHERE (a, b, id) > (last row's values) ORDER BY a, b, id LIMIT n) instead
of counting the whole filtered set and skipping `offset` rows, so a page costs the same at any depth
and any fleet size. Keyset paging needs every ordering column to be NOT NULL (a NULL has no place
in the comparison); an ordering with a nullable column (creation_timestamp, say) is refused with a
400 naming it. Hand-written: DRF's CursorPagination keys on the first ordering field alone (plus
an offset among equal values), which degrades to offset paging for orderings like (cluster, node,
driver, pool, name, id) whose first column has few values.
"""

import base64
import binascii
import json

from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, Window
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param


class StablePagePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    cursor_query_param = "cursor"

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        # DRF falls back to the default on junk; tools should hear about their typo instead.
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({"page_size": [f"Must be a whole number from 1 to {self.max_page_size}."]})
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        self.keyset = self.cursor_query_param in request.query_params
        if not self.keyset:
            return self.paginate_pages(queryset, request, view)
        if self.page_query_param in request.query_params:
            raise ValidationError({self.cursor_query_param: ["Use either page or cursor, not both."]})
        return self.paginate_keyset(queryset, request)

    def paginate_pages(self, queryset, request, view=None):
        return super().paginate_queryset(queryset, request, view)

    # -- keyset mode ------------------------------------------------------------------------------
    def paginate_keyset(self, queryset, request):
        self.request = request
        page_size = self.get_page_size(request)
        keys = keyset_order(queryset)
        paths = [p for p, _ in keys]
        token = request.query_params[self.cursor_query_param]
        if token:
            queryset = queryset.filter(after_q(keys, decode_cursor(token, keys, queryset.model)))
        rows = list(queryset.values_list("pk", *paths)[: page_size + 1])
        page, more = rows[:page_size], len(rows) > page_size
        # The page's rows (with the view's annotations and prefetches) for the page's ids only.
        by_id = queryset.order_by().in_bulk([r[0] for r in page])
        self.next_cursor = encode_cursor(keys, page[-1][1:]) if more else None
        return [by_id[r[0]] for r in page if r[0] in by_id]

    def get_next_link(self):
        if not self.keyset:
            return super().get_next_link()
        if self.next_cursor is None:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), self.page_query_param)
        return replace_query_param(url, self.cursor_query_param, self.next_cursor)

    def get_paginated_response(self, data):
        if not self.keyset:
            return super().get_paginated_response(data)
        return Response({"next": self.get_next_link(), "results": data})

    def get_schema_operation_parameters(self, view):
        return super().get_schema_operation_parameters(view) + [{
            "name": self.cursor_query_param, "required": False, "in": "query",
            "description": "Keyset paging instead of page numbers: empty for the first page, then the value in `next`. "
                           "The answer is {next, results} (no count). Refused (400) for an ordering with a nullable column.",
            "schema": {"type": "string"},
        }]


def keyset_order(queryset):
    """[(lookup path, descending)] of the queryset's ORDER BY; 400 when it cannot be paged by key."""
    keys = []
    for item in queryset.query.order_by:
        if not isinstance(item, str) or item == "?":
            raise ValidationError({"cursor": ["This list's order cannot be paged by cursor; use page numbers."]})
        path = item.lstrip("-")
        field = _field(queryset.model, path)
        if field is None or field.null:
            raise ValidationError({"cursor": [f"Ordering by {path.replace('__', '.')} (a column that may be empty) cannot be paged by cursor; use page numbers or another ordering."]})
        keys.append((path, item.startswith("-")))
    if not keys or keys[-1][0] not in ("pk", "id"):
        raise ValidationError({"cursor": ["This list's order has no unique tiebreak; use page numbers."]})
    return keys


def _field(model, path):
    """The model field a lookup path names (following foreign keys), or None. A path ending at a
    relation by name (`cluster`) orders by the related model's ordering, not by a column: None;
    the column itself (`cluster_id`) is fine."""
    parts = path.split("__")
    field = None
    for i, part in enumerate(parts):
        try:
            field = model._meta.pk if part == "pk" else model._meta.get_field(part)
        except FieldDoesNotExist:
            return None
        last = i == len(parts) - 1
        if field.is_relation:
            if not (field.many_to_one or field.one_to_one) or field.related_model is None:
                return None
            if last:
                return field if part == field.attname else None
            model = field.related_model
        elif not last:
            return None
    return field


def after_q(keys, values):
    """Rows after `values` in the order `keys`: (a > x) OR (a = x AND b > y) OR ..., with a plain
    bound on the first column in front so the planner can start an index range there."""
    first, desc = keys[0]
    q = Q()
    for i, (path, desc_i) in enumerate(keys):
        equal = {p: v for (p, _), v in zip(keys[:i], values[:i])}
        q |= Q(**equal, **{f"{path}__{'lt' if desc_i else 'gt'}": values[i]})
    return Q(**{f"{first}__{'lte' if desc else 'gte'}": values[0]}) & q


def encode_cursor(keys, values):
    doc = {"o": [("-" if d else "") + p for p, d in keys], "v": [v.isoformat() if hasattr(v, "isoformat") else v for v in values]}
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token, keys, model):
    """The row values a cursor token carries, typed by the model's fields; 400 on anything else."""
    bad = ValidationError({"cursor": ["Invalid cursor: use the value of a `next` link of this list with the same ordering."]})
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if not isinstance(doc, dict) or doc.get("o") != [("-" if d else "") + p for p, d in keys] or not isinstance(doc.get("v"), list) or len(doc["v"]) != len(keys):
        raise bad
    try:
        return [_field(model, p).to_python(v) for (p, _), v in zip(keys, doc["v"])]
    except Exception:  # a value its column cannot hold (to_python raises ValidationError or TypeError)
        raise bad from None


class IdsFirstPagination(StablePagePagination):
    """One query for the page's ids and the total (COUNT(*) OVER ()), then the page's rows by id.

    For big filtered tables (devices) this scans the table once instead of twice (count, then
    page), sorts only ids (PostgreSQL would otherwise sort whole wide rows, spilling to disk) and
    evaluates per-row annotations (device state) for the page only.
    """

    def paginate_pages(self, queryset, request, view=None):
        page_size = self.get_page_size(request)
        raw_page = request.query_params.get(self.page_query_param, "1")
        if not raw_page.isdigit() or int(raw_page) < 1:
            raise NotFound("Invalid page.")
        number = int(raw_page)
        offset = (number - 1) * page_size
        rows = list(
            queryset.annotate(_total=Window(Count("*"))).values_list("pk", "_total")[offset : offset + page_size]
        )
        total = rows[0][1] if rows else queryset.count()
        if not rows and number > 1:
            raise NotFound("Invalid page.")
        ids = [pk for pk, _ in rows]
        by_id = queryset.order_by().in_bulk(ids)
        paginator = Paginator([], page_size)
        paginator.count = total  # a cached_property: set it instead of counting again
        self.page = Page([by_id[pk] for pk in ids if pk in by_id], number, paginator)
        self.request = request
        return list(self.page)
