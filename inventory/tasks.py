"""Background work for the inventory pages: recounting the devices each DeviceClass matches.

Counting evaluates every class's CEL selectors over the cluster's devices (seconds on a large fleet),
so it never runs in a request: the sync apply path calls `request_class_counts` after committing
DeviceClass or ResourceSlice changes, and the classes page calls it when what it shows is out of
date. Requests are debounced per cluster, like the stuck-claim detector's (claims/tasks.py).
"""

import logging
import threading
import time

from celery import shared_task
from django.conf import settings

log = logging.getLogger(__name__)

# Kinds whose changes can change how many devices a class matches.
RELEVANT_KINDS = frozenset({"DeviceClass", "ResourceSlice"})
# A burst of slice changes (a node joining, a driver republishing) is counted once, at its end.
DEFAULT_DEBOUNCE_SECONDS = 10

_last_request = {}
_lock = threading.Lock()


def debounce_seconds():
    return float(getattr(settings, "GPUDASH_CLASS_COUNT_DEBOUNCE_SECONDS", DEFAULT_DEBOUNCE_SECONDS))


@shared_task(name="inventory.tasks.count_class_matches", ignore_result=True)
def count_class_matches(cluster_id):
    """Count and store the matches of every class of the cluster (inventory/classmatch.py)."""
    from .classmatch import refresh_cluster
    from .models import Cluster

    if not Cluster.objects.filter(id=cluster_id).exists():
        return 0
    started = time.monotonic()
    classes = refresh_cluster(cluster_id)
    if classes:
        _publish(classes)
    log.info("cluster %s: counted the devices of %d device classes in %.1f s", cluster_id, len(classes), time.monotonic() - started)
    return len(classes)


def _publish(classes):
    """Let open classes pages re-fetch their table once the counts are stored."""
    from gpudash.sync.publish import Change, publish_on_commit

    from .models import Cluster

    names = dict(Cluster.objects.filter(id__in={c.cluster_id for c in classes}).values_list("id", "name"))
    publish_on_commit([Change(c.cluster_id, names.get(c.cluster_id, ""), "DeviceClass", "MODIFIED", c.namespace, c.name, c.uid) for c in classes])


def _first_in_window(cluster_id, window):
    """True for the first request of a debounce window (Redis when configured, so all workers share it)."""
    if settings.REDIS_URL:
        import redis

        try:
            conn = redis.Redis.from_url(settings.REDIS_URL)
            return bool(conn.set(f"gpudash:class-count:{cluster_id}", "1", nx=True, px=max(int(window * 1000), 1)))
        except redis.RedisError:
            log.warning("redis unavailable for the class count debounce; falling back to this process", exc_info=True)
    with _lock:
        now = time.monotonic()
        if now - _last_request.get(cluster_id, -1e9) < window:
            return False
        _last_request[cluster_id] = now
        return True


def request_class_counts(cluster, kinds=None):
    """Ask for a recount of the cluster's class matches soon (at most one per debounce window,
    started at the window's end so a burst is counted once, on its final state). Cheap: call it
    after every committed batch. Returns True when a run was scheduled."""
    if kinds is not None and not (set(kinds) & RELEVANT_KINDS):
        return False
    cluster_id = getattr(cluster, "id", cluster)
    window = debounce_seconds()
    if not _first_in_window(cluster_id, window):
        return False
    if settings.REDIS_URL:
        count_class_matches.apply_async(args=[cluster_id], countdown=window)
    else:
        # No broker (embedded mode): count in this process, off the caller's thread.
        timer = threading.Timer(window, _run_in_thread, args=[cluster_id])
        timer.daemon = True
        timer.start()
    return True


def request_after_commit(cluster, kinds=None):
    """`request_class_counts` once the current transaction commits (never for a rolled-back write)."""
    from django.db import transaction

    transaction.on_commit(lambda: _request_quietly(cluster, kinds))


def _request_quietly(cluster, kinds):
    try:
        request_class_counts(cluster, kinds)
    except Exception:  # a broker hiccup must not fail the write that asked; the next change asks again
        log.warning("could not request a device class recount for cluster %s", getattr(cluster, "id", cluster), exc_info=True)


def _run_in_thread(cluster_id):
    from django.db import connection

    try:
        count_class_matches(cluster_id)
    except Exception:
        log.exception("device class count failed for cluster %s", cluster_id)
    finally:
        connection.close()  # this thread's own connection; left open it would outlive the timer
