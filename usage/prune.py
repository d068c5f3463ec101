"""Keeping the ledger bounded: intervals that ended more than USAGE_RETENTION_DAYS ago go, in batches
(a year of a large fleet is tens of millions of rows: one DELETE of millions would hold locks and
bloat the WAL for minutes; batches of ids by the end-time index keep each statement short)."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import AllocationInterval, LedgerGap

BATCH = 10_000


def retention_days():
    return int(getattr(settings, "USAGE_RETENTION_DAYS", 400))


def prune(now=None, batch=BATCH):
    """Delete intervals and gaps that ended before the retention cutoff. Returns (intervals, gaps)."""
    cutoff = (now or timezone.now()) - timedelta(days=retention_days())
    removed = 0
    while True:
        ids = list(
            AllocationInterval.objects.filter(ended_at__lt=cutoff).order_by().values_list("pk", flat=True)[:batch]
        )
        if not ids:
            break
        removed += AllocationInterval.objects.filter(pk__in=ids).delete()[0]
        if len(ids) < batch:
            break
    gaps, _ = LedgerGap.objects.filter(ended_at__lt=cutoff).delete()
    return removed, gaps
