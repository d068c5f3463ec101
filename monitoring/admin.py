from django.contrib import admin

from .models import PrometheusSource


@admin.register(PrometheusSource)
class PrometheusSourceAdmin(admin.ModelAdmin):
    list_display = ("cluster", "url", "enabled", "last_success_at", "devices_matched", "last_error_at")
    fields = (
        "cluster",
        "url",
        "auth_header",
        "series_selector",
        "enabled",
        "last_poll_at",
        "last_success_at",
        "devices_matched",
        "series_unmatched",
        "last_error",
        "last_error_at",
    )
    readonly_fields = (
        "last_poll_at",
        "last_success_at",
        "devices_matched",
        "series_unmatched",
        "last_error",
        "last_error_at",
    )
