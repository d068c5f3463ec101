"""Page-number pagination; the list views always order with an `id` tiebreak, so pages are stable."""

from django.core.paginator import Page, Paginator
from django.db.models import Count, Window
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination


class StablePagePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        # DRF falls back to the default on junk; tools should hear about their typo instead.
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            from rest_framework.exceptions import ValidationError

            raise ValidationError({"page_size": [f"Must be a whole number from 1 to {self.max_page_size}."]})
        return int(raw)


class IdsFirstPagination(StablePagePagination):
    """One query for the page's ids and the total (COUNT(*) OVER ()), then the page's rows by id.

    For big filtered tables (devices) this scans the table once instead of twice (count, then
    page), sorts only ids (PostgreSQL would otherwise sort whole wide rows, spilling to disk) and
    evaluates per-row annotations (device state) for the page only.
    """

    def paginate_queryset(self, queryset, request, view=None):
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
