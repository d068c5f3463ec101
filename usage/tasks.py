"""Celery tasks of usage, run by beat: the ledger prune (hourly)."""

from celery import shared_task


@shared_task(name="usage.tasks.prune_ledger", ignore_result=True, expires=1800)
def prune_ledger():
    from .prune import prune

    intervals, gaps = prune()
    return {"intervals": intervals, "gaps": gaps}
