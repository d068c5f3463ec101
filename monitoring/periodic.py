"""Monitoring's periodic jobs inside the web process: the embedded mode (no REDIS_URL, so no Celery
beat) samples the fleet history every minute, prunes it hourly and polls utilization, on one thread.

`manage.py serve` starts it next to the in-process watchers; with Redis, beat sends the same jobs
(monitoring/tasks.py) to the workers instead.
"""

import logging
import threading
import time

from django.db import close_old_connections, connection

from .conf import setting

log = logging.getLogger(__name__)

_thread = None
_stop = threading.Event()


# Jobs of the floors above (usage: the report rollup), registered from their AppConfig.ready():
# (name, period in seconds, aligned, job), run on this thread like monitoring's own.
_registered = []


def register_job(name, every, job, aligned=False):
    if all(j[0] != name for j in _registered):
        _registered.append((name, float(every), aligned, job))


def _jobs():
    """(name, period in seconds, aligned to the wall-clock minute, job)."""
    from inventory import vanished

    from . import history, utilization

    return (
        ("history sample", 60.0, True, history.sample),
        (
            "history prune",
            3600.0,
            False,
            lambda: (history.prune(), utilization.prune(), vanished.prune(history.retention_days())),
        ),
        ("utilization poll", max(float(setting("POLL_SECONDS", 60)), 10.0), False, utilization.poll_all),
        *_registered,
    )


def run(stop):
    due = {}
    try:
        while not stop.is_set():
            for name, every, aligned, job in _jobs():
                if time.monotonic() < due.get(name, 0):
                    continue
                # The sample runs once in every wall-clock minute (a fixed 60 s period would drift
                # and now and then skip one); the others on their period from the last run.
                due[name] = time.monotonic() + (61 - time.time() % 60 if aligned else every)
                try:
                    close_old_connections()
                    job()
                except Exception:  # a failing job must not end the others; it is retried on its period
                    log.exception("periodic %s failed", name)
                    connection.close()
            stop.wait(max(min(due.values()) - time.monotonic(), 0.5))
    finally:
        connection.close()


def start_in_process():
    """Start the thread unless it runs (idempotent); returns it."""
    global _thread
    if _thread is None or not _thread.is_alive():
        _stop.clear()
        _thread = threading.Thread(target=run, args=(_stop,), name="gpudash-monitoring-periodic", daemon=True)
        _thread.start()
    return _thread


def stop_in_process(timeout=10.0):
    _stop.set()
    if _thread is not None:
        _thread.join(timeout)
