from django.contrib import admin

from .models import AllocationInterval, LedgerGap


@admin.register(AllocationInterval)
class AllocationIntervalAdmin(admin.ModelAdmin):
    # The ledger is written by the sync only: shown, never edited.
    list_display = (
        "namespace",
        "claim_name",
        "driver",
        "pool",
        "device",
        "share_id",
        "units",
        "unit_rule",
        "pod_name",
        "started_at",
        "ended_at",
    )
    list_filter = ("unit_rule", "admin_access", "start_exact", "end_exact")
    search_fields = ("namespace", "claim_name", "device", "pod_name", "workload_name")
    date_hierarchy = "started_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(LedgerGap)
class LedgerGapAdmin(admin.ModelAdmin):
    list_display = ("cluster", "started_at", "ended_at", "reason")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
