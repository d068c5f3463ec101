"""Celery tasks of the sync: beat runs `ensure_watchers` every 15 s on some worker."""

from celery import shared_task

from .runner import ensure_supervisor


@shared_task(name="gpudash.sync.tasks.ensure_watchers", ignore_result=True)
def ensure_watchers():
    """Start this worker process's watchers unless they run; leases decide which worker applies.

    Every worker that receives it keeps a standby watcher per (cluster, kind), so when the worker
    holding a lease dies another takes over as soon as the lease expires (seconds, not a beat period).
    """
    supervisor = ensure_supervisor()
    return {"holder": supervisor.holder, "watchers": supervisor.summary()}
