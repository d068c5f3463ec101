"""Background work for the inventory pages: recounting the devices each DeviceClass matches.

Counting evaluates every class's CEL selectors over the cluster's devices (seconds on a large fleet),
so it never runs in a request: the sync apply path calls `request_class_counts` after committing
DeviceClass or ResourceSlice changes, and the classes page calls it when what it shows is out of
date. Requests are debounced per cluster, like the stuck-claim detector's (claims/tasks.py).
"""

import logging
import time

from celery import shared_task
from django.conf import settings

from mirror.debounce import ClusterDebounce

log = logging.getLogger(__name__)

# Kinds whose changes can change how many devices a class matches.
RELEVANT_KINDS = frozenset({"DeviceClass", "ResourceSlice"})
# A burst of slice changes (a node joining, a driver republishing) is counted once, at its end.
DEFAULT_DEBOUNCE_SECONDS = 10


def debounce_seconds():
    return float(getattr(settings, "GPUDASH_CLASS_COUNT_DEBOUNCE_SECONDS", DEFAULT_DEBOUNCE_SECONDS))


@shared_task(name="inventory.tasks.count_class_matches", ignore_result=True)
def count_class_matches(cluster_id):
    """Count and store the matches of every class of the cluster (inventory/classmatch.py)."""
    from mirror.models import Cluster

    from .classmatch import refresh_cluster

    if not Cluster.objects.filter(id=cluster_id).exists():
        return 0
    started = time.monotonic()
    classes = refresh_cluster(cluster_id)
    if classes:
        _publish(classes)
    log.info(
        "cluster %s: counted the devices of %d device classes in %.1f s",
        cluster_id,
        len(classes),
        time.monotonic() - started,
    )
    return len(classes)


def _publish(classes):
    """Let open classes pages re-fetch their table once the counts are stored."""
    from mirror.models import Cluster
    from mirror.sync.publish import Change, publish_on_commit

    names = dict(Cluster.objects.filter(id__in={c.cluster_id for c in classes}).values_list("id", "name"))
    publish_on_commit(
        [
            Change(c.cluster_id, names.get(c.cluster_id, ""), "DeviceClass", "MODIFIED", c.namespace, c.name, c.uid)
            for c in classes
        ]
    )


def request_class_counts(cluster, kinds=None):
    """Ask for a recount of the cluster's class matches soon (at most one per debounce window,
    started at the window's end so a burst is counted once, on its final state). Cheap: call it
    after every committed batch. Returns True when a run was scheduled."""
    if kinds is not None and not (set(kinds) & RELEVANT_KINDS):
        return False
    return _debounce.request(cluster, debounce_seconds())


def request_after_commit(cluster, kinds=None):
    """`request_class_counts` once the current transaction commits (never for a rolled-back write)."""
    from django.db import transaction

    transaction.on_commit(lambda: _request_quietly(cluster, kinds))


def _request_quietly(cluster, kinds):
    try:
        request_class_counts(cluster, kinds)
    except Exception:  # a broker hiccup must not fail the write that asked; the next change asks again
        log.warning(
            "could not request a device class recount for cluster %s", getattr(cluster, "id", cluster), exc_info=True
        )


_debounce = ClusterDebounce("class-count", count_class_matches)
_last_request = _debounce.last_request  # tests reset the process-local windows through this
