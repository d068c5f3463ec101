"""The detector's Celery tasks and the debounced trigger the sync calls after relevant changes."""

import base64
import json
import time
from datetime import datetime

import pytest
import redis
from django.conf import settings as django_settings

from claims import stuck, tasks
from claims.models import Finding
from tests.ops_fixtures import apply, claim_raw, cluster, node_raw, slice_raw  # noqa: F401


@pytest.fixture(autouse=True)
def zero_grace(settings):
    settings.GPUDASH_STUCK = dict.fromkeys(stuck.DEFAULTS, 0) | {"DEBOUNCE_SECONDS": 30}


@pytest.fixture
def clean_debounce(cluster):
    if django_settings.REDIS_URL:
        redis.Redis.from_url(django_settings.REDIS_URL).delete(f"gpudash:stuck-detect:{cluster.id}")
    tasks._last_request.clear()
    yield
    if django_settings.REDIS_URL:
        redis.Redis.from_url(django_settings.REDIS_URL).delete(f"gpudash:stuck-detect:{cluster.id}")


def test_periodic_task_runs_the_detector_for_every_cluster(cluster):
    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1"))
    apply(cluster, "ResourceClaim", claim_raw("a", devices=["gpu-0"]))
    apply(cluster, "ResourceClaim", claim_raw("b", devices=["gpu-0"]))
    result = tasks.detect_stuck_claims.apply().get()
    assert result[cluster.name]["opened"] >= 2
    assert Finding.objects.filter(rule=stuck.DOUBLE_ALLOCATION).active().count() == 2
    assert tasks.detect_stuck_claims_for_cluster.apply(args=[cluster.id]).get()["updated"] >= 2


def test_beat_schedule_has_the_detector():
    entry = django_settings.CELERY_BEAT_SCHEDULE["detect-stuck-claims"]
    assert entry == {"task": "claims.tasks.detect_stuck_claims", "schedule": 60.0}


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="the Celery broker is Redis only when REDIS_URL is set")
def test_request_detection_queues_one_delayed_run_on_the_broker(cluster, clean_debounce):
    from gpudash.celery import app

    app.control.purge()  # tasks queued by watchers of earlier tests
    asked_at = time.time()
    assert tasks.request_detection(cluster, kinds=["DeviceClass"]) is False  # not a kind that can make a claim stuck
    assert tasks.request_detection(cluster, kinds=["ResourceClaim", "DeviceClass"]) is True
    assert tasks.request_detection(cluster, kinds=["Pod"]) is False  # inside the 30 s window
    queued = redis.Redis.from_url(django_settings.REDIS_URL).lrange(app.conf.task_default_queue, 0, -1)
    app.control.purge()
    ours = [json.loads(m) for m in queued]
    ours = [m for m in ours if m["headers"]["task"] == "claims.tasks.detect_stuck_claims_for_cluster"]
    assert len(ours) == 1
    args, kwargs, _ = json.loads(base64.b64decode(ours[0]["body"]))
    assert (args, kwargs) == ([cluster.id], {})
    eta = datetime.fromisoformat(ours[0]["headers"]["eta"]).timestamp()
    assert asked_at + 29 <= eta <= time.time() + 31  # started after the window, so a burst is judged once


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_debounced_run_happens_in_this_process(settings):
    """The embedded default (no REDIS_URL): the watchers' process runs the detector itself, after the window."""
    from mirror.models import Cluster

    settings.REDIS_URL = ""
    settings.GPUDASH_STUCK = dict.fromkeys(stuck.DEFAULTS, 0) | {"DEBOUNCE_SECONDS": 0.3}
    tasks._last_request.clear()
    cluster = Cluster.objects.create(name="embedded")
    apply(cluster, "Node", node_raw("node-1"))
    apply(cluster, "ResourceSlice", slice_raw("node-1"))
    apply(cluster, "ResourceClaim", claim_raw("a", devices=["gpu-0"]))
    apply(cluster, "ResourceClaim", claim_raw("b", devices=["gpu-0"]))
    assert tasks.request_detection(cluster, kinds=["ResourceClaim"]) is True
    assert tasks.request_detection(cluster, kinds=["ResourceClaim"]) is False
    deadline = time.monotonic() + 20
    while Finding.objects.filter(cluster=cluster, rule=stuck.DOUBLE_ALLOCATION).active().count() < 2:
        assert time.monotonic() < deadline, "the in-process detector run did not record the double allocation"
        time.sleep(0.1)
