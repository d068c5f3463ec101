"""How the ledger's folds are asked for with Redis: one delayed Celery task per cluster and window
(mirror/debounce.py), and beat's periodic fold of every queue. A real worker folding a real sync's
events is in tests/mirror/test_sync_celery.py."""

import base64
import json
import time
from datetime import datetime, timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from mirror.models import Cluster
from usage import tasks
from usage.ledger import queue_events
from usage.models import AllocationInterval, LedgerEvent


def _raw(pods):
    status = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "n", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods],
    }
    return {"metadata": {"namespace": "ml", "name": "c", "uid": "u"}, "status": status}


def test_beat_folds_every_queue_each_minute(db):
    entry = django_settings.CELERY_BEAT_SCHEDULE["fold-ledgers"]
    assert entry == {"task": "usage.tasks.fold_all_ledgers", "schedule": 60.0}
    at = timezone.now() - timedelta(minutes=5)
    clusters = [Cluster.objects.create(name=name) for name in ("a", "b")]
    for cluster in clusters:
        queue_events(cluster, [("u", None, _raw(["p1"]), at, True)])  # queued only: no fold asked for
    assert LedgerEvent.objects.count() == 2
    assert tasks.fold_all_ledgers.apply().get() == {str(c.pk): 1 for c in clusters}
    assert not LedgerEvent.objects.exists()
    assert sorted(AllocationInterval.objects.values_list("cluster__name", "started_at")) == [("a", at), ("b", at)]


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="the Celery broker is Redis only when REDIS_URL is set")
@pytest.mark.django_db(transaction=True)
def test_a_batch_asks_once_per_window_for_a_delayed_fold_on_the_broker(settings):
    from gpudash.celery import app

    settings.USAGE_FOLD_SECONDS = 30
    cluster = Cluster.objects.create(name="queued")
    key = f"gpudash:ledger-fold:{cluster.id}"
    conn = redis.Redis.from_url(django_settings.REDIS_URL)
    conn.delete(key)
    app.control.purge()  # tasks queued by watchers of earlier tests
    asked_at = time.time()
    t1 = timezone.now() - timedelta(minutes=2)
    t2 = t1 + timedelta(minutes=1)
    try:
        # What the sync calls per batch (hooks.ledger_claims): queued, and a fold asked for after the commit.
        tasks.on_claims(cluster, [("u", None, _raw(["p1"]), t1, True)])
        tasks.on_claims(cluster, [("u", None, _raw(["p2"]), t2, True)])  # inside the window: no second fold
        queued = conn.lrange(app.conf.task_default_queue, 0, -1)
    finally:
        app.control.purge()
        conn.delete(key)
    ours = [json.loads(m) for m in queued]
    ours = [m for m in ours if m["headers"]["task"] == "usage.tasks.fold_ledger"]
    assert len(ours) == 1
    args, kwargs, _ = json.loads(base64.b64decode(ours[0]["body"]))
    assert (args, kwargs) == ([cluster.id], {})
    eta = datetime.fromisoformat(ours[0]["headers"]["eta"]).timestamp()
    assert asked_at + 29 <= eta <= time.time() + 31  # after the window: a burst of batches folds once
    # What that task does when it runs: both batches in one fold.
    assert tasks.fold_ledger.apply(args=[cluster.id]).get() == 2
    got = AllocationInterval.objects.filter(cluster=cluster).order_by("started_at")
    assert list(got.values_list("consumers", "started_at", "ended_at")) == [(["p1"], t1, t2), (["p2"], t2, None)]


def test_metrics_show_what_waits_to_be_folded(db):
    from django.test import Client

    from usage.ledger import fold

    def gauges():
        text = Client().get("/metrics").content.decode()
        return {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("gpudash_ledger_")
        }

    waiting = Cluster.objects.create(name="waiting")
    Cluster.objects.create(name="idle")
    queue_events(waiting, [("u", None, _raw(["p1"]), timezone.now() - timedelta(seconds=90), True)])
    queue_events(waiting, [("u", None, None, timezone.now(), True)])
    got = gauges()
    assert got['gpudash_ledger_queued_events{cluster="waiting"}'] == 2
    assert 90 <= got['gpudash_ledger_queue_age_seconds{cluster="waiting"}'] < 200
    assert got['gpudash_ledger_queued_events{cluster="idle"}'] == 0
    assert got['gpudash_ledger_queue_age_seconds{cluster="idle"}'] == 0
    assert fold(waiting) == 2
    assert gauges()['gpudash_ledger_queued_events{cluster="waiting"}'] == 0
