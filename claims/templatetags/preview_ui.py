"""Template helpers of the preview page."""

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from mirror.templatetags.gpudash_ui import device_url_maker

register = template.Library()


@register.simple_tag
def preview_strip(row, cluster_name):
    """A node's devices as fleet-map cells (same colours), the engine's chosen ones ringed.
    Built in Python like the map's cells: 50 nodes x up to ~100 devices per page."""
    parts = []
    url_of = device_url_maker(cluster_name)
    for d in row.get("strip") or []:
        classes = ["cell", f"s-{d['state']}"] + [f"f-{f}" for f in d["flags"]] + (["pv-chosen"] if d["chosen"] else [])
        title = [d["name"], "CHOSEN" if d["chosen"] else "", d["label"], d["holder"]]
        url = url_of(d["driver"], d["pool"], d["name"])
        parts.append(
            f'<a class="{" ".join(classes)}" href="{escape(url)}" title="{escape(" · ".join(t for t in title if t))}" data-device="{escape(d["name"])}"></a>'
        )
    return mark_safe("".join(parts))


@register.filter
def show_value(listing, page):
    return f"{listing.key}:{page}"


@register.filter
def ticks(text, limit=None):
    """An engine reason with its `backticked` names (requests, classes, selectors) as <code>, clipped
    to `limit` characters with a visible note: a reason can list hundreds of invalid pools, and
    100 such rows would make a page of megabytes."""
    text = str(text or "")
    clipped = ""
    if limit and len(text) > int(limit):
        clipped = f' <span class="pv-clipped" title="the full text is in the REST answer (POST /api/v1/preview)">… ({len(text) - int(limit):,} more characters)</span>'
        text = text[: int(limit)]
    parts = text.split("`")
    if len(parts) % 2 == 0:  # unbalanced (or cut inside a name): no <code>
        return mark_safe(escape(text) + clipped)
    return mark_safe(
        "".join(f"<code>{escape(p)}</code>" if i % 2 else escape(p) for i, p in enumerate(parts)) + clipped
    )
