"""Celery tasks running the stuck-claim detector: every minute (beat) and shortly after relevant changes; the
preview workers' task is defined beside its sender (claims/preview_service/remote.py)."""

import logging

from celery import shared_task

from claims.preview_service.remote import run_preview_job  # noqa: F401  (autodiscovery registers it from here)
from mirror.debounce import ClusterDebounce

log = logging.getLogger(__name__)

# Kinds whose changes can start or end a stuck condition.
RELEVANT_KINDS = frozenset({"ResourceClaim", "Pod", "Node", "ResourceSlice"})


@shared_task(name="claims.tasks.detect_stuck_claims", ignore_result=True)
def detect_stuck_claims():
    """Run the detector for every enabled cluster (the periodic run)."""
    from .stuck import detect_all

    return detect_all()


@shared_task(name="claims.tasks.detect_stuck_claims_for_cluster", ignore_result=True)
def detect_stuck_claims_for_cluster(cluster_id):
    from mirror.models import Cluster

    from .stuck import detect

    cluster = Cluster.objects.filter(id=cluster_id, enabled=True).first()
    if cluster is None:
        return None
    return detect(cluster)


def _debounce_seconds():
    from .stuck import thresholds

    return thresholds()["DEBOUNCE_SECONDS"]


def request_detection(cluster, kinds=None):
    """Ask for a detector run soon after the sync applied changes of `kinds` (None = any).

    Cheap enough to call after every applied batch: at most one run per cluster per DEBOUNCE_SECONDS,
    started after the window so a burst of events is judged once, on its final state.
    """
    if kinds is not None and not (set(kinds) & RELEVANT_KINDS):
        return False
    return _debounce.request(cluster, _debounce_seconds())


_debounce = ClusterDebounce("stuck-detect", detect_stuck_claims_for_cluster)
_last_request = _debounce.last_request  # tests reset the process-local windows through this
