"""Fixtures and helpers for the sync tests: a devcluster over real HTTP, a Cluster row for it,
watchers in threads, and one exact comparison of the mirror with the API server."""

import threading
import time
import uuid

import pytest

from mirror.models import Cluster, SyncState
from mirror.sync.kinds import KINDS_BY_NAME

PLURALS = {
    "Node": "nodes",
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "Pod": "pods",
    "DeviceTaintRule": "devicetaintrules",
}


@pytest.fixture
def devcluster():
    from devcluster.server import DevCluster

    server = DevCluster(bookmark_interval=0.3)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def cluster(devcluster, tmp_path, transactional_db):
    path = devcluster.write_kubeconfig(tmp_path / "kubeconfig", context="devcluster")
    return Cluster.objects.create(name="dev", kubeconfig=str(path), context="devcluster")


@pytest.fixture
def fast_sync(settings):
    """Short leases, timeouts and backoff so scenarios finish in seconds."""
    settings.GPUDASH_SYNC = {
        **settings.GPUDASH_SYNC,
        "LIST_PAGE_SIZE": 7,
        "WATCH_TIMEOUT_SECONDS": 5,
        "LEASE_SECONDS": 2.0,
        "BACKOFF_MAX_SECONDS": 0.5,
        "DISCOVERY_INTERVAL_SECONDS": 1.0,
        "PUBLISH_COALESCE_SECONDS": 0.02,
    }
    return settings.GPUDASH_SYNC


def wait_for(predicate, timeout=20.0, interval=0.05, message="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last: {last!r})")


class WatcherThread:
    """A Watcher in a thread; stop() ends it and waits."""

    def __init__(self, cluster, kind, holder=None, version=None):
        from mirror.sync.watcher import Watcher

        self.watcher = Watcher(cluster.pk, kind, version=version, holder=holder)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.watcher.stop.set()
        self.watcher.close_stream()
        self.thread.join(15)
        assert not self.thread.is_alive(), "watcher did not stop"


@pytest.fixture
def run_watcher():
    started = []

    def start(cluster, kind, holder=None, version=None):
        wt = WatcherThread(cluster, kind, holder=holder, version=version).start()
        started.append(wt)
        return wt

    yield start
    for wt in started:
        if wt.thread.is_alive():
            wt.stop()


def state(cluster, kind):
    """The SyncState row, or an unsaved default while the watcher has not created it yet."""
    return SyncState.objects.filter(cluster=cluster, kind=kind).first() or SyncState(cluster=cluster, kind=kind)


def db_view(cluster, kind):
    model = KINDS_BY_NAME[kind].model
    return {
        (ns, name): (uid, rv)
        for ns, name, uid, rv in model.objects.filter(cluster=cluster).values_list(
            "namespace", "name", "uid", "resource_version"
        )
    }


def server_view(server, kind, only=None):
    items = server.store.list(PLURALS[kind])
    if only is not None:
        items = [i for i in items if only(i)]
    return {
        (i["metadata"].get("namespace") or "", i["metadata"]["name"]): (
            i["metadata"]["uid"],
            i["metadata"]["resourceVersion"],
        )
        for i in items
    }


def mirror_matches(cluster, server, kind, only=None):
    return db_view(cluster, kind) == server_view(server, kind, only)


def assert_mirror_equals_server(cluster, server, kinds, timeout=20.0, only=None):
    """The database holds exactly the API server's objects: every (namespace, name) with its uid and resourceVersion."""
    for kind in kinds:
        try:
            wait_for(
                lambda: mirror_matches(cluster, server, kind, only), timeout=timeout, message=f"{kind} mirror to match"
            )
        except AssertionError:
            db, srv = db_view(cluster, kind), server_view(server, kind, only)
            missing = {k: v for k, v in srv.items() if db.get(k) != v}
            extra = {k: v for k, v in db.items() if k not in srv}
            raise AssertionError(
                f"{kind}: mirror differs from the API server; missing/outdated {list(missing.items())[:5]} "
                f"({len(missing)}), extra {list(extra.items())[:5]} ({len(extra)})"
            ) from None


# --- objects --------------------------------------------------------------------------------------


def make_node(name, ready=True):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]
        },
    }


def make_slice(node, gpus=2, driver="gpu.example.com"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": "H100"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(gpus)
            ],
        },
    }


def make_claim(namespace, name, device_class="gpu.example.com"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }


def allocation(node, device="gpu-0", driver="gpu.example.com"):
    return {
        "devices": {"results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        },
    }


def make_pod(namespace, name, claim=None, labels=None, node=""):
    spec = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def make_class(name="gpu.example.com"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
    }


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
