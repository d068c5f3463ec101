"""The detector's Celery tasks and the debounced trigger the sync calls after relevant changes."""

import pytest
import redis
from django.conf import settings as django_settings

from claims import stuck, tasks
from claims.models import Finding

from .ops_fixtures import apply, claim_raw, cluster, node_raw, slice_raw  # noqa: F401


@pytest.fixture(autouse=True)
def zero_grace(settings):
    settings.GPUDASH_STUCK = {k: 0 for k in stuck.DEFAULTS} | {"DEBOUNCE_SECONDS": 30}


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


def test_request_detection_is_debounced_and_ignores_unrelated_kinds(cluster, clean_debounce, monkeypatch):
    queued = []
    # The broker is outside this test: record what would be queued instead of sending it.
    monkeypatch.setattr(tasks.detect_stuck_claims_for_cluster, "apply_async", lambda **kw: queued.append(kw))
    monkeypatch.setattr(tasks.threading, "Timer", lambda delay, fn, args: _Recorder(queued, delay, args))
    assert tasks.request_detection(cluster, kinds=["DeviceClass"]) is False
    assert tasks.request_detection(cluster, kinds=["ResourceClaim", "DeviceClass"]) is True
    assert tasks.request_detection(cluster, kinds=["Pod"]) is False  # inside the window
    assert len(queued) == 1
    first = queued[0]
    assert (first.get("args") or first.get("fn_args")) == [cluster.id]
    assert first.get("countdown", first.get("delay")) == 30


class _Recorder:
    def __init__(self, queued, delay, args):
        queued.append({"fn_args": list(args), "delay": delay})
        self.daemon = False

    def start(self):
        pass
