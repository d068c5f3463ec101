"""Template helpers for device kinds and outages (inventory/devicekinds.py, fleet.unpublished_devices)."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext, ngettext

register = template.Library()

_MAX_GREY_CELLS = 256  # a page of the map stays small however large a silent pool was


@register.simple_tag
def unpublished_cells(count, since_text):
    """Grey, dashed cells for the devices a node's driver last published and publishes no more."""
    count = min(int(count or 0), _MAX_GREY_CELLS)
    if not count:
        return ""
    title = ngettext(
        "%(n)d device last published, not published since %(since)s",
        "%(n)d devices last published, not published since %(since)s",
        count,
    ) % {"n": count, "since": since_text}
    cell = format_html('<i class="cell unpublished" title="{}"></i>', title)
    return mark_safe(cell * count)


@register.filter
def kind_label(kind):
    return {"gpu": gettext("whole GPU"), "partition": gettext("partition"), "other": gettext("other device")}.get(
        kind, kind
    )
