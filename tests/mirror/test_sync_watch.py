"""List+watch against the built-in API server over HTTP with the real kubernetes client."""

import pytest

from claims.models import ClaimStateChange, ResourceClaim
from inventory.models import Device
from mirror.models import SyncState
from tests.sync_fixtures import (
    allocation,
    assert_mirror_equals_server,
    make_claim,
    make_class,
    make_node,
    make_slice,
    state,
    wait_for,
)


def seed(server, nodes=10, claims=20):
    for i in range(nodes):
        server.store.create("nodes", make_node(f"node-{i}"))
        server.store.create("resourceslices", make_slice(f"node-{i}", gpus=4))
    server.store.create("deviceclasses", make_class())
    for i in range(claims):
        server.store.create("resourceclaims", make_claim("team-a" if i % 2 else "team-b", f"claim-{i}"))


@pytest.mark.sqlite_default
def test_initial_list_spans_pages_then_every_event_type(cluster, devcluster, fast_sync, run_watcher):
    seed(devcluster)  # 10 slices, 20 claims: several pages of 7
    slices = run_watcher(cluster, "ResourceSlice")
    claims = run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceSlice", "ResourceClaim"])
    assert Device.objects.filter(cluster=cluster).count() == 40
    list_requests = [p for m, p in devcluster.requests if "resourceclaims" in p and "watch" not in p and "limit=7" in p]
    assert len(list_requests) >= 3, list_requests  # 20 claims in pages of 7
    wait_for(lambda: state(cluster, "ResourceClaim").status == SyncState.Status.CONNECTED, message="claims connected")

    # ADDED, MODIFIED (status: allocated, then reserved), DELETED
    devcluster.store.create("resourceclaims", make_claim("team-a", "new-claim"))
    claim = devcluster.store.get("resourceclaims", "team-b", "claim-0")
    claim["status"] = {"allocation": allocation("node-1")}
    devcluster.store.update("resourceclaims", claim, subresource="status")
    claim = devcluster.store.get("resourceclaims", "team-b", "claim-0")
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u-1"}]
    devcluster.store.update("resourceclaims", claim, subresource="status")
    devcluster.store.delete("resourceclaims", "team-a", "claim-1")
    s = devcluster.store.get("resourceslices", None, "node-3-gpu.example.com")
    s["spec"]["devices"] = s["spec"]["devices"][:1]
    devcluster.store.update("resourceslices", s)
    assert_mirror_equals_server(cluster, devcluster, ["ResourceSlice", "ResourceClaim"])

    row = ResourceClaim.objects.get(cluster=cluster, namespace="team-b", name="claim-0")
    assert row.state == "reserved" and row.node_name == "node-1"
    assert [r.device for r in row.results.all()] == ["gpu-0"]
    assert [c.uid for c in row.consumers.all()] == ["u-1"]
    assert Device.objects.filter(slice__name="node-3-gpu.example.com").count() == 1
    history = list(
        ClaimStateChange.objects.filter(cluster=cluster, name="claim-0").values_list("old_state", "new_state")
    )
    assert history == [("", "pending"), ("pending", "allocated"), ("allocated", "reserved")]
    assert ClaimStateChange.objects.filter(cluster=cluster, name="claim-1", new_state="deleted").exists()
    st = state(cluster, "ResourceClaim")
    assert st.events_applied >= 4 and st.lease_holder == claims.watcher.holder
    slices.stop()
    claims.stop()


def test_bookmarks_advance_the_stored_resource_version(cluster, devcluster, fast_sync, run_watcher):
    devcluster.store.create("deviceclasses", make_class())
    run_watcher(cluster, "DeviceClass")
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    wait_for(lambda: state(cluster, "DeviceClass").status == SyncState.Status.CONNECTED, message="list finished")
    listed_rv = int(state(cluster, "DeviceClass").resource_version)
    # Changes to other kinds move the server's resourceVersion; only bookmarks tell the class watcher.
    for i in range(5):
        devcluster.store.create("nodes", make_node(f"n-{i}"))
    target = devcluster.store.resource_version
    wait_for(
        lambda: int(state(cluster, "DeviceClass").resource_version or 0) >= target, message="bookmark to reach the DB"
    )
    assert target > listed_rv
