"""Celery task of the usage reports, run by beat every 10 minutes (settings.CELERY_BEAT_SCHEDULE):
the daily rollup and the utilization sums (usage/rollup.py). Imported by UsageConfig.ready()."""

from celery import shared_task


@shared_task(name="usage.report_tasks.roll_up", ignore_result=True, expires=540)
def roll_up():
    from .rollup import run

    return run()
