"""Per-cluster debounce for background jobs that the sync asks for after every batch.

The first request of a window schedules one run at the window's end (so a burst of changes is
judged once, on its final state); later requests in the window are dropped. With Redis the window
is shared by every worker and the run is a Celery task; without it (embedded mode) the run is a
timer thread in this process.
"""

import logging
import threading
import time

from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

# Timer threads of every debounce in this process whose run has not finished: {timer: (debounce, cluster id)}.
_pending = {}
_pending_lock = threading.Lock()


def stop_pending(timeout=10):
    """Cancel the in-process runs that have not started and wait up to `timeout` s for those running;
    their windows are forgotten. For a process (or a test) whose database is about to go away: a
    timer firing later would query tables that no longer exist."""
    with _pending_lock:
        timers = dict(_pending)
        _pending.clear()
    for timer, (debounce, cluster_id) in timers.items():
        timer.cancel()
        with debounce.lock:
            debounce.last_request.pop(cluster_id, None)
    for timer in timers:
        timer.join(timeout)
    return len(timers)


class ClusterDebounce:
    def __init__(self, name, task):
        self.name = name  # also the Redis key prefix
        self.task = task  # a Celery task taking the cluster id
        self.last_request = {}  # process-local windows (no Redis, or Redis unreachable)
        self.lock = threading.Lock()

    def first_in_window(self, cluster_id, window):
        if settings.REDIS_URL:
            import redis

            try:
                conn = redis.Redis.from_url(settings.REDIS_URL)
                return bool(conn.set(f"gpudash:{self.name}:{cluster_id}", "1", nx=True, px=max(int(window * 1000), 1)))
            except redis.RedisError:
                log.warning(
                    "redis unavailable for the %s debounce; falling back to this process", self.name, exc_info=True
                )
        with self.lock:
            now = time.monotonic()
            if now - self.last_request.get(cluster_id, -1e9) < window:
                return False
            self.last_request[cluster_id] = now
            return True

    def request(self, cluster, window):
        """Schedule a run for `cluster` unless one is already due in this window; True when scheduled."""
        cluster_id = getattr(cluster, "id", cluster)
        if not self.first_in_window(cluster_id, window):
            return False
        if settings.REDIS_URL:
            self.task.apply_async(args=[cluster_id], countdown=window)
        else:
            timer = threading.Timer(window, self._run_in_thread, args=[cluster_id])
            timer.daemon = True
            with _pending_lock:
                _pending[timer] = (self, cluster_id)
            timer.start()
        return True

    def _run_in_thread(self, cluster_id):
        try:
            self.task(cluster_id)
        except Exception:
            log.exception("%s failed for cluster %s", self.name, cluster_id)
        finally:
            connection.close()  # this thread's own connection; left open it would outlive the timer
            with _pending_lock:
                _pending.pop(threading.current_thread(), None)
