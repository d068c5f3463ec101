"""Celery tasks of the sync: beat runs `ensure_watchers` every 15 s on some worker."""

from celery import shared_task

from .runner import ensure_supervisor


@shared_task(name="mirror.sync.tasks.ensure_watchers", ignore_result=True)
def ensure_watchers():
    """Start this worker process's watchers unless they run.

    Each worker process heartbeats and takes only its share of the (cluster, kind) leases
    (mirror/sync/workers.py); the watchers of the rest stand by, so when a worker dies the others
    take its share within about one lease time (seconds, not a beat period).
    """
    supervisor = ensure_supervisor()
    return {"holder": supervisor.holder, "watchers": supervisor.summary()}
