"""Page-number pagination, with a keyset (cursor) mode; the list views always order with an `id`
tiebreak, so pages are stable.

`?page=N` (the default) answers `{count, next, previous, results}`. The count is exact up to
EXACT_COUNT_LIMIT rows (counted with a LIMIT, so it never scans more); above it the answer carries
the planner's estimate (at least the limit + 1) and `"count_estimated": true`, and `next` is known
from one extra row fetched, not from the count. `?cursor=` (empty for the first
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

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import IntegerField, Q
from django.db.models.expressions import RawSQL
from django.utils.functional import cached_property
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from .params import DB_INT_MAX, whole_number


def last_page_number(page_size):
    """The highest page number whose OFFSET the database can take (a signed 64-bit integer)."""
    return DB_INT_MAX // page_size + 1


def exact_count_limit():
    return int(getattr(settings, "GPUDASH_API_EXACT_COUNT_LIMIT", 10_000))


def _rows_only(queryset):
    """The queryset reduced to what a count needs: its ids (a values() queryset, e.g. grouped rows, as is)."""
    queryset = queryset.order_by()
    return queryset if queryset._fields else queryset.values("pk")


def planner_rows(queryset):
    """PostgreSQL's estimate of the queryset's rows (EXPLAIN, nothing executed); an exact count elsewhere."""
    queryset = _rows_only(queryset)
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return queryset.count()
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def bounded_total(total, queryset, limit):
    """(count, estimated) from a count taken with LIMIT limit + 1."""
    if total <= limit:
        return total, False
    return max(limit + 1, planner_rows(queryset)), True


class KnownPage(Page):
    """A page that knows whether another follows from an extra row read, not from the count (which
    may be an estimate)."""

    def __init__(self, object_list, number, paginator, more):
        super().__init__(object_list, number, paginator)
        self.more = more

    def has_next(self):
        return self.more


class BoundedCountPaginator(Paginator):
    """Django's Paginator with the bounded count (see the module docstring)."""

    estimated = False

    @cached_property
    def count(self):
        limit = exact_count_limit()
        n, self.estimated = bounded_total(_rows_only(self.object_list)[: limit + 1].count(), self.object_list, limit)
        return n

    def validate_number(self, number):
        self.count  # noqa: B018  (counting tells whether the count is an estimate)
        if not self.estimated:
            return super().validate_number(number)
        # The last page is not known from an estimate: any page from 1 on, an empty one is the end.
        try:
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if number < 1:
            raise EmptyPage("That page number is less than 1")
        if number > last_page_number(self.per_page):  # its OFFSET would not fit the database's integer
            raise EmptyPage("That page contains no results")
        return number

    def get_page(self, number):
        """The UI's lenient lookup (a bad or past-the-end page number shows a page, never an error)."""
        try:
            return super().get_page(number)
        except EmptyPage:  # past the end of an estimated count: Django's fallback page was empty too
            return self.page(1)

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        rows = list(self.object_list[bottom : bottom + self.per_page + 1])
        if not rows and number > 1:
            raise EmptyPage("That page contains no results")
        return KnownPage(rows[: self.per_page], number, self, more=len(rows) > self.per_page)


class StablePagePagination(PageNumberPagination):
    django_paginator_class = BoundedCountPaginator
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    cursor_query_param = "cursor"

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        # DRF falls back to the default on junk; tools should hear about their typo instead.
        size = whole_number(raw, 1, self.max_page_size)
        if size is None:
            raise ValidationError({"page_size": [f"Must be a whole number from 1 to {self.max_page_size}."]})
        return size

    def check_page_number(self, request):
        """A page number too large for the database's OFFSET is a 400 naming the limit (a page past
        the end of the rows stays a 404; a page that is no number at all too, as DRF answers)."""
        raw = request.query_params.get(self.page_query_param, "")
        if raw.isascii() and raw.isdigit():
            last = last_page_number(self.get_page_size(request))
            if whole_number(raw, 0, last) is None:
                raise ValidationError(
                    {self.page_query_param: [f"Must be a whole number from 1 to {last} (at this page_size)."]}
                )

    def paginate_queryset(self, queryset, request, view=None):
        self.keyset = self.cursor_query_param in request.query_params
        if not self.keyset:
            self.check_page_number(request)
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
            response = super().get_paginated_response(data)
            if getattr(self.page.paginator, "estimated", False):
                response.data["count_estimated"] = True
            return response
        return Response({"next": self.get_next_link(), "results": data})

    def get_paginated_response_schema(self, schema):
        """Page numbers' body, plus `count_estimated`; with `cursor` there is no count (nor previous)."""
        out = super().get_paginated_response_schema(schema)
        out["required"] = ["results"]
        out["properties"]["count"]["description"] = (
            "Exact up to 10,000 rows, else an estimate (count_estimated). Absent with cursor."
        )
        out["properties"]["count_estimated"] = {
            "type": "boolean",
            "description": "Present (true) when count is the planner's estimate.",
        }
        return out

    def get_schema_operation_parameters(self, view):
        return super().get_schema_operation_parameters(view) + [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "Keyset paging instead of page numbers: empty for the first page, then the value in `next`. "
                "The answer is {next, results} (no count). Refused (400) for an ordering with a nullable column.",
                "schema": {"type": "string"},
            }
        ]


def keyset_order(queryset):
    """[(lookup path, descending)] of the queryset's ORDER BY; 400 when it cannot be paged by key."""
    keys = []
    for item in queryset.query.order_by:
        if not isinstance(item, str) or item == "?":
            raise ValidationError({"cursor": ["This list's order cannot be paged by cursor; use page numbers."]})
        path = item.lstrip("-")
        field = _field(queryset.model, path)
        if field is None or field.null:
            raise ValidationError(
                {
                    "cursor": [
                        f"Ordering by {path.replace('__', '.')} (a column that may be empty) cannot be paged by cursor; use page numbers or another ordering."
                    ]
                }
            )
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
    doc = {
        "o": [("-" if d else "") + p for p, d in keys],
        "v": [v.isoformat() if hasattr(v, "isoformat") else v for v in values],
    }
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token, keys, model):
    """The row values a cursor token carries, typed by the model's fields; 400 on anything else."""
    bad = ValidationError(
        {"cursor": ["Invalid cursor: use the value of a `next` link of this list with the same ordering."]}
    )
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if (
        not isinstance(doc, dict)
        or doc.get("o") != [("-" if d else "") + p for p, d in keys]
        or not isinstance(doc.get("v"), list)
        or len(doc["v"]) != len(keys)
    ):
        raise bad
    try:
        return [_field(model, p).to_python(v) for (p, _), v in zip(keys, doc["v"])]
    except Exception:  # a value its column cannot hold (to_python raises ValidationError or TypeError)
        raise bad from None


class IdsFirstPagination(StablePagePagination):
    """One query for the page's ids and the bounded total (an uncorrelated scalar subquery counting
    at most EXACT_COUNT_LIMIT + 1 matching ids, evaluated once), then the page's rows by id.

    For big filtered tables (devices) this reads the page's ids in index order and stops (instead of
    counting and sorting every match, as COUNT(*) OVER () did), sorts only ids when no index serves
    the order, and evaluates per-row annotations (device state) for the page only.
    """

    def paginate_pages(self, queryset, request, view=None):
        page_size = self.get_page_size(request)
        number = whole_number(request.query_params.get(self.page_query_param, "1"), 1)  # in range: check_page_number
        if number is None:
            raise NotFound("Invalid page.")
        offset = (number - 1) * page_size
        limit = exact_count_limit()
        # SELECT COUNT(*) FROM (<the filtered ids> LIMIT limit + 1): what a sliced .count() runs, here
        # as an uncorrelated scalar subquery of the ids query (one round trip, evaluated once).
        sql, params = queryset.order_by().values("pk")[: limit + 1].query.sql_with_params()
        total = RawSQL(f"SELECT COUNT(*) FROM ({sql}) AS bounded_ids", params, output_field=IntegerField())
        rows = list(queryset.annotate(_total=total).values_list("pk", "_total")[offset : offset + page_size + 1])
        if not rows and number > 1:
            raise NotFound("Invalid page.")
        count, estimated = bounded_total(rows[0][1] if rows else 0, queryset, limit)
        ids = [pk for pk, _ in rows[:page_size]]
        by_id = queryset.order_by().in_bulk(ids)
        paginator = Paginator([], page_size)
        paginator.count = count  # a cached_property: set it instead of counting again
        paginator.estimated = estimated
        self.page = KnownPage([by_id[pk] for pk in ids if pk in by_id], number, paginator, more=len(rows) > page_size)
        self.request = request
        return list(self.page)
