"""Celery task of the utilization poll: beat runs it every GPUDASH_UTILIZATION_POLL seconds."""

from celery import shared_task

from .utilization import poll_all


@shared_task(name="monitoring.tasks.poll_utilization", ignore_result=True, expires=120)
def poll_utilization():
    return {name: {"matched": r.matched, "error": r.error} for name, r in poll_all().items()}
