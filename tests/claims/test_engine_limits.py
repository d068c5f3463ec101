"""The engine's time limits as the Django side applies them (settings.GPUDASH_ENGINE_LIMITS): a
preview and its headroom share one deadline, the background class recount stops at its own."""

import pytest
from django.test import override_settings

from claims.preview import run_preview
from dra.deadline import Deadline
from inventory import classmatch
from inventory.models import DeviceClass
from tests.ui_fixtures import load_fleet

pytestmark = pytest.mark.django_db

CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: team-a}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
"""


def limits(**kw):
    base = {
        "PREVIEW_DEADLINE": 20.0,
        "FILTER_TIMEOUT": 10.0,
        "STUCK_EXPLAIN_DEADLINE": 5.0,
        "CLASS_COUNT_DEADLINE": 30.0,
    }
    return override_settings(GPUDASH_ENGINE_LIMITS=dict(base, **kw))


def test_preview_within_its_deadline_says_so():
    cluster = load_fleet()
    out = run_preview(cluster, yaml_text=CLAIM, with_headroom=True)
    assert out["summary"]["deadline"] == {"seconds": 20.0, "reached": False, "undecidedNodes": 0}
    assert out["summary"]["fits"] > 0 and out["headroom"]["deadlineReached"] is False


def test_preview_past_its_deadline_decides_nothing_and_headroom_gets_nothing_left():
    cluster = load_fleet()
    out = run_preview(cluster, yaml_text=CLAIM, with_headroom=True, deadline=1e-9)  # gone before the first node
    assert out["summary"]["fits"] == 0
    assert out["summary"]["deadline"]["undecidedNodes"] == out["summary"]["nodes"] > 0
    assert all(e["error"] is None and "deadline" in e["reason"] for e in out["nodes"])
    assert out["headroom"]["deadlineReached"] is True and out["headroom"]["copies"] == 0


def test_zero_means_no_preview_deadline():
    cluster = load_fleet()
    with limits(PREVIEW_DEADLINE=0):
        out = run_preview(cluster, yaml_text=CLAIM)
    assert "deadline" not in out["summary"] and out["summary"]["fits"] > 0


def test_class_recount_stops_at_its_deadline():
    cluster = load_fleet()
    classes = list(DeviceClass.objects.filter(cluster=cluster).order_by("name"))
    classmatch.annotate_matches(classes, Deadline(0))
    assert {(c.match_count, c.match_error) for c in classes} == {
        (None, "not counted: the recount's time limit of 0 s passed")
    }
    with limits(CLASS_COUNT_DEADLINE=1e-9):  # passes while the devices are read
        stored = classmatch.refresh_cluster(cluster.id)
    assert {c.match_error for c in stored} == {"not counted: the recount's time limit of 1e-09 s passed"}
    counted = classmatch.refresh_cluster(cluster.id)  # the default limit: counts
    assert all(c.match_count is not None and c.match_error == "" for c in counted)
