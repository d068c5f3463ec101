"""Celery tasks of monitoring, run by beat: the utilization poll (every GPUDASH_UTILIZATION_POLL
seconds), the fleet-history sample (every minute) and the history prune (hourly)."""

from celery import shared_task

from .utilization import poll_all


@shared_task(name="monitoring.tasks.poll_utilization", ignore_result=True, expires=120)
def poll_utilization():
    return {name: {"matched": r.matched, "error": r.error} for name, r in poll_all().items()}


@shared_task(name="monitoring.tasks.sample_history", ignore_result=True, expires=50)
def sample_history():
    from .history import sample

    return sample()


@shared_task(name="monitoring.tasks.prune_history", ignore_result=True, expires=1800)
def prune_history():
    from inventory import vanished

    from . import history, utilization

    return {
        "history": history.prune(),
        "utilization": utilization.prune(),
        "vanished": vanished.prune(history.retention_days()),
    }
