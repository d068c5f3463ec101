"""Template helpers for device kinds (inventory/devicekinds.py); the map's outage cells are drawn by
mirror/templatetags/gpudash_ui.py (unpublished_cells)."""

from django import template
from django.utils.translation import gettext

register = template.Library()


@register.filter
def kind_label(kind):
    return {"gpu": gettext("whole GPU"), "partition": gettext("partition"), "other": gettext("other device")}.get(
        kind, kind
    )
