"""The Events mirror: core/v1 Events about mirrored objects, listed and watched like every kind (own lease and
resume point), bounded in count and age; events about other kinds and unmirrored pods are not kept."""

from datetime import timedelta

import pytest
from django.utils import timezone

from mirror.kube import KubeClient
from mirror.models import KubeEvent, SyncState
from mirror.sync.discovery import discover
from tests.sync_fixtures import cluster, devcluster, fast_sync, run_watcher, state, wait_for  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def iso(seconds_ago=0):
    return (timezone.now() - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name, dra=True):
    spec = {"containers": [{"name": "main", "image": "busybox"}], "nodeName": "n1"}
    if dra:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": {"phase": "Pending"}}


def event(name, kind, obj, seconds_ago=0, namespace="ml", reason="Something", count=1):
    return {
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": kind, "name": obj, "namespace": "" if kind == "Node" else namespace},
        "type": "Warning",
        "reason": reason,
        "message": f"{reason} about {obj}",
        "count": count,
        "lastTimestamp": iso(seconds_ago),
        "source": {"component": "kubelet"},
    }


def mirrored(cluster):
    return dict(KubeEvent.objects.filter(cluster=cluster).values_list("name", "count"))


def test_events_are_listed_watched_filtered_and_bounded(cluster, devcluster, fast_sync, run_watcher, settings):
    settings.GPUDASH_SYNC = {**settings.GPUDASH_SYNC, "EVENTS_MAX_PER_CLUSTER": 4, "EVENTS_MAX_AGE_SECONDS": 3600}
    store = devcluster.store
    store.create("nodes", {"metadata": {"name": "n1"}})
    store.create("pods", pod("train"))
    store.create("pods", pod("web", dra=False))  # not a DRA pod: neither it nor its events are mirrored
    pods = run_watcher(cluster, "Pod")
    wait_for(lambda: state(cluster, "Pod").status == SyncState.Status.CONNECTED, message="the pod watcher")
    for raw in (
        event("train.1", "Pod", "train", seconds_ago=30, reason="FailedPrepareDynamicResources"),
        event("web.1", "Pod", "web"),
        event("n1.1", "Node", "n1", seconds_ago=10, namespace="default", reason="NodeNotReady"),
        event("claim.1", "ResourceClaim", "train-gpu"),
        event("rs.1", "ReplicaSet", "web-5d9", reason="SuccessfulCreate"),
        event("train.old", "Pod", "train", seconds_ago=7200),
    ):  # older than the age bound
        store.create("events", raw)

    # The kind is discovered like the others (core v1, every namespace).
    kube = KubeClient.for_cluster(cluster)
    try:
        assert discover(cluster, kube)["Event"] == "v1"
    finally:
        kube.close()

    events = run_watcher(cluster, "Event")
    wait_for(lambda: mirrored(cluster) == {"train.1": 1, "n1.1": 1, "claim.1": 1}, message="the listed events")
    row = KubeEvent.objects.get(cluster=cluster, name="train.1")
    assert (row.involved_kind, row.involved_namespace, row.involved_name, row.reason, row.type, row.reporter) == (
        "Pod",
        "ml",
        "train",
        "FailedPrepareDynamicResources",
        "Warning",
        "kubelet",
    )
    assert row.raw["message"] == "FailedPrepareDynamicResources about train" and row.raw["kind"] == "Event"

    # Watched: an update, a delete, new ones; the count bound keeps the newest.
    store.patch("events", "ml", "train.1", {"count": 5, "lastTimestamp": iso()}, "application/merge-patch+json")
    store.delete("events", "ml", "claim.1")
    wait_for(lambda: mirrored(cluster) == {"train.1": 5, "n1.1": 1}, message="the watched update and delete")
    for i in range(4):
        store.create("events", event(f"train.new{i}", "Pod", "train", reason="Scheduled"))
    wait_for(
        lambda: len(mirrored(cluster)) == 4 and "n1.1" not in mirrored(cluster) and "train.new3" in mirrored(cluster),
        message="the oldest event pruned at the count bound",
    )

    # Each kind keeps its own lease and resume point: the pod watcher is untouched by the event watcher.
    pod_state, event_state = state(cluster, "Pod"), state(cluster, "Event")
    assert pod_state.pk != event_state.pk
    assert pod_state.status == event_state.status == SyncState.Status.CONNECTED
    assert pod_state.lease_holder and event_state.lease_holder and pod_state.lease_holder != event_state.lease_holder
    assert event_state.resource_version and int(event_state.resource_version) >= int(
        store.get("events", "ml", "train.new3")["metadata"]["resourceVersion"]
    )
    events.stop()
    pods.stop()
