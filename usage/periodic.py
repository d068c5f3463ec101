"""The ledger prune inside the web process in the embedded mode (no REDIS_URL, so no Celery beat):
hourly, on a thread of its own, as monitoring/periodic.py does for the fleet history."""

import logging
import threading

from django.db import close_old_connections, connection

log = logging.getLogger(__name__)

EVERY = 3600.0

_thread = None
_stop = threading.Event()


def run(stop):
    from .prune import prune

    try:
        while not stop.is_set():
            try:
                close_old_connections()
                prune()
            except Exception:  # retried on the next period
                log.exception("periodic ledger prune failed")
                connection.close()
            stop.wait(EVERY)
    finally:
        connection.close()


def start_in_process():
    """Start the thread unless it runs (idempotent); returns it."""
    global _thread
    if _thread is None or not _thread.is_alive():
        _stop.clear()
        _thread = threading.Thread(target=run, args=(_stop,), name="gpudash-usage-periodic", daemon=True)
        _thread.start()
    return _thread


def stop_in_process(timeout=10.0):
    _stop.set()
    if _thread is not None:
        _thread.join(timeout)
