"""Badges of the device status (a driver's Ready condition) and device health (the kubelet's report)."""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

register = template.Library()


@register.filter
def ready_badge(ready):
    """The Ready condition of a device status entry: True, False or None (no such condition)."""
    if ready is True:
        return format_html('<span class="badge ok ready-true">{}</span>', pgettext("device status", "ready"))
    if ready is False:
        return format_html(
            '<span class="badge s-unhealthy ready-false">{}</span>', pgettext("device status", "not ready")
        )
    return format_html('<span class="badge ready-none">{}</span>', _("no Ready condition"))


@register.filter
def health_badge(health):
    """A resource's health as the kubelet reports it: Healthy, Unhealthy, Unknown (or unreadable)."""
    words = {
        "Healthy": ("ok", pgettext("device health", "Healthy")),
        "Unhealthy": ("s-unhealthy", pgettext("device health", "Unhealthy")),
        "Unknown": ("", pgettext("device health", "Unknown")),
    }
    css, text = words.get(health, ("", health or "—"))
    return format_html('<span class="badge health {}" data-health="{}">{}</span>', css, health or "", text)
