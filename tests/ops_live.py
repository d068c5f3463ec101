"""The built-in API server for the operations tests: a Cluster row pointing at it, seeding, and a re-sync
through the real watcher code (one list-and-reconcile per kind)."""

import threading

import pytest

from claims import stuck
from mirror.models import Cluster

from .ops_fixtures import claim_raw, node_raw, pod_raw, slice_raw

SYNCED_KINDS = ("Node", "ResourceSlice", "ResourceClaim", "Pod")


@pytest.fixture
def server():
    from devcluster.server import DevCluster

    srv = DevCluster()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def live_cluster(server, tmp_path, transactional_db, settings):
    settings.GPUDASH_STUCK = dict.fromkeys(stuck.DEFAULTS, 0)
    path = server.write_kubeconfig(tmp_path / "kubeconfig", context="devcluster")
    return Cluster.objects.create(name="dev", kubeconfig=str(path), context="devcluster")


def resync(cluster, kinds=SYNCED_KINDS):
    """List and reconcile every kind once with the sync's own Watcher (in a thread: it closes its DB connection)."""
    from mirror.sync.watcher import Watcher

    for kind in kinds:
        watcher = Watcher(cluster.pk, kind, once=True)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        thread.join(30)
        assert not thread.is_alive(), f"re-sync of {kind} did not finish"


def seed(store, *, claim=None, pods=(), nodes=("node-1",), devices=("gpu-0", "gpu-1")):
    """Create nodes, their slices, the claim and pods in the API server's store (status included)."""
    for node in nodes:
        store.create("nodes", node_raw(node))
        store.create("resourceslices", slice_raw(node, devices))
    created = {}
    if claim is not None:
        created["claim"] = store.create("resourceclaims", _fresh(claim))
    for pod in pods:
        created[pod["metadata"]["name"]] = store.create("pods", _fresh(pod))
    return created


def _fresh(raw):
    meta = {k: v for k, v in raw["metadata"].items() if k not in ("resourceVersion", "deletionTimestamp")}
    return {**raw, "metadata": meta}


__all__ = ("claim_raw", "node_raw", "pod_raw", "resync", "seed", "server", "live_cluster")
