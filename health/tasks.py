"""Beat task: the health timeline's hourly prune (the sync also prunes it, at most hourly)."""

from celery import shared_task


@shared_task(name="health.tasks.prune_timeline", ignore_result=True, expires=1800)
def prune_timeline():
    from .timeline import prune

    return prune()
