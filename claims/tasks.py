"""Celery tasks running the stuck-claim detector: every minute (beat) and shortly after relevant changes."""

import logging
import threading
import time

from celery import shared_task
from django.conf import settings

log = logging.getLogger(__name__)

# Kinds whose changes can start or end a stuck condition.
RELEVANT_KINDS = frozenset({"ResourceClaim", "Pod", "Node", "ResourceSlice"})

_last_request = {}
_lock = threading.Lock()


@shared_task(name="claims.tasks.detect_stuck_claims", ignore_result=True)
def detect_stuck_claims():
    """Run the detector for every enabled cluster (the periodic run)."""
    from .stuck import detect_all

    return detect_all()


@shared_task(name="claims.tasks.detect_stuck_claims_for_cluster", ignore_result=True)
def detect_stuck_claims_for_cluster(cluster_id):
    from inventory.models import Cluster

    from .stuck import detect

    cluster = Cluster.objects.filter(id=cluster_id, enabled=True).first()
    if cluster is None:
        return None
    return detect(cluster)


def _debounce_seconds():
    from .stuck import thresholds

    return thresholds()["DEBOUNCE_SECONDS"]


def _first_in_window(cluster_id, window):
    """True for the first request of a debounce window (Redis when configured, so all workers share it)."""
    if settings.REDIS_URL:
        import redis

        try:
            conn = redis.Redis.from_url(settings.REDIS_URL)
            return bool(conn.set(f"gpudash:stuck-detect:{cluster_id}", "1", nx=True, px=max(int(window * 1000), 1)))
        except redis.RedisError:
            log.warning("redis unavailable for the detector debounce; falling back to this process", exc_info=True)
    with _lock:
        now = time.monotonic()
        if now - _last_request.get(cluster_id, -1e9) < window:
            return False
        _last_request[cluster_id] = now
        return True


def request_detection(cluster, kinds=None):
    """Ask for a detector run soon after the sync applied changes of `kinds` (None = any).

    Cheap enough to call after every applied batch: at most one run per cluster per DEBOUNCE_SECONDS,
    started after the window so a burst of events is judged once, on its final state.
    """
    if kinds is not None and not (set(kinds) & RELEVANT_KINDS):
        return False
    cluster_id = getattr(cluster, "id", cluster)
    window = _debounce_seconds()
    if not _first_in_window(cluster_id, window):
        return False
    if settings.REDIS_URL:
        detect_stuck_claims_for_cluster.apply_async(args=[cluster_id], countdown=window)
    else:
        # No broker (embedded mode): the watchers run in this process, so does the detector, off their thread.
        timer = threading.Timer(window, _run_in_thread, args=[cluster_id])
        timer.daemon = True
        timer.start()
    return True


def _run_in_thread(cluster_id):
    from django.db import connection

    try:
        detect_stuck_claims_for_cluster(cluster_id)
    except Exception:
        log.exception("stuck-claim detector failed for cluster %s", cluster_id)
    finally:
        connection.close()  # this thread's own connection; left open it would outlive the timer
