"""Celery tasks of usage: the ledger's fold (debounced after the sync's batches, and every minute by
beat) and prune (hourly, by beat)."""

from celery import shared_task
from django.conf import settings
from django.db import transaction

from mirror.debounce import ClusterDebounce

from . import ledger


@shared_task(name="usage.tasks.prune_ledger", ignore_result=True, expires=1800)
def prune_ledger():
    from .prune import prune

    intervals, gaps = prune()
    return {"intervals": intervals, "gaps": gaps}


@shared_task(name="usage.tasks.fold_ledger", ignore_result=True)
def fold_ledger(cluster_id):
    """Fold one cluster's queued claim events into the ledger (usage/ledger.py fold)."""
    return ledger.fold_cluster(cluster_id)


@shared_task(name="usage.tasks.fold_all_ledgers", ignore_result=True, expires=50)
def fold_all_ledgers():
    """Beat's safety net: fold whatever a lost debounced request left queued."""
    return {str(k): v for k, v in ledger.fold_all().items()}


def on_claims(cluster, ops):
    """hooks.ledger_claims: queue a batch's claim events and, once the batch commits, ask for a fold."""
    if ledger.queue_events(cluster, ops):
        transaction.on_commit(lambda: request_fold(cluster))


def request_fold(cluster):
    """Ask for a fold of the cluster's queue at the end of the debounce window (USAGE_FOLD_SECONDS):
    cheap enough to call after every batch; a burst of batches is folded in one go."""
    return _debounce.request(cluster, float(getattr(settings, "USAGE_FOLD_SECONDS", 5.0)))


_debounce = ClusterDebounce("ledger-fold", fold_ledger)
