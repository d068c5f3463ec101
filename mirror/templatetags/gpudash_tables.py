"""Sortable column headers for the list pages (mirror/tables.py parses what they link to)."""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext as _

from mirror.tables import PARAM

register = template.Library()


@register.simple_tag(takes_context=True)
def sort_header(context, column, label, css=""):
    """`<th>` whose link sorts the list by `column`: ascending first, then descending on a second click.

    The link keeps the page's other parameters (filters, cluster) and drops the page number (a new
    order starts at page 1) and `fragment` (live updates re-render a region with the page's query).
    `aria-sort` tells screen readers which column the list is sorted by.
    """
    current, desc, query = _sort_query(context, column)
    if current == column:
        aria, arrow = ("descending", " ▼") if desc else ("ascending", " ▲")
        return format_html(
            '<th class="{}" aria-sort="{}" data-sort="{}"><a href="?{}">{}</a><span aria-hidden="true">{}</span></th>',
            css,
            aria,
            column,
            query.urlencode(),
            label,
            arrow,
        )
    return format_html('<th class="{}" data-sort="{}"><a href="?{}">{}</a></th>', css, column, query.urlencode(), label)


@register.simple_tag(takes_context=True)
def sort_link(context, column, label):
    """A sort link outside a table (the fleet map's rows are not a table, so no `<th>`/`aria-sort`):
    the same URL as sort_header's; the current one has `aria-current` and says its direction in words."""
    current, desc, query = _sort_query(context, column)
    if current == column:
        words, arrow = (_("sorted descending"), " ▼") if desc else (_("sorted ascending"), " ▲")
        return format_html(
            '<a href="?{}" data-sort="{}" aria-current="true">{}<span aria-hidden="true">{}</span><span class="visually-hidden"> ({})</span></a>',
            query.urlencode(),
            column,
            label,
            arrow,
            words,
        )
    return format_html('<a href="?{}" data-sort="{}">{}</a>', query.urlencode(), column, label)


def _sort_query(context, column):
    """(current column, descending, the query string a click on `column` asks for)."""
    request = context["request"]
    sorting = context.get("sorting")
    current, desc = sorting.primary if sorting is not None else (None, False)
    query = request.GET.copy()
    for key in ("page", "fragment", "cursor"):
        query.pop(key, None)
    query[PARAM] = f"-{column}" if current == column and not desc else column
    return current, desc, query
