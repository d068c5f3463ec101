"""Sync under trouble: 410, restarts, replays, malformed data, API errors, discovery changes."""

import json

import pytest
import yaml

from claims.models import Pod, ResourceClaim
from mirror.models import Cluster, SyncState
from mirror.sync.runner import Supervisor
from tests.sync_fixtures import (
    allocation,
    assert_mirror_equals_server,
    make_claim,
    make_class,
    make_node,
    make_pod,
    make_slice,
    state,
    wait_for,
)


def connected(cluster, kind):
    return lambda: state(cluster, kind).status == SyncState.Status.CONNECTED


@pytest.mark.sqlite_default
def test_410_while_away_relists_and_reconciles(cluster, devcluster, fast_sync, run_watcher):
    for i in range(12):
        devcluster.store.create("resourceclaims", make_claim("ns", f"c{i}"))
    w = run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(connected(cluster, "ResourceClaim"))
    w.stop()
    # While nobody watches: deletes, a change, a re-creation under the same name, then compaction.
    for i in range(5):
        devcluster.store.delete("resourceclaims", "ns", f"c{i}")
    devcluster.store.create("resourceclaims", make_claim("ns", "c0"))  # same name, new uid
    claim = devcluster.store.get("resourceclaims", "ns", "c7")
    claim["status"] = {"allocation": allocation("node-a")}
    devcluster.store.update("resourceclaims", claim, subresource="status")
    devcluster.store.create("resourceclaims", make_claim("ns", "fresh"))
    devcluster.compact()
    relists = state(cluster, "ResourceClaim").relist_count

    run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(lambda: state(cluster, "ResourceClaim").relist_count == relists + 1, message="a relist")
    assert not ResourceClaim.objects.filter(cluster=cluster, name__in=["c1", "c2", "c3", "c4"]).exists()
    assert ResourceClaim.objects.get(cluster=cluster, name="c7").state == "allocated"


def test_410_error_event_mid_watch_relists(cluster, devcluster, fast_sync, run_watcher):
    devcluster.store.create("deviceclasses", make_class("a.example.com"))
    run_watcher(cluster, "DeviceClass")
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    assert devcluster.wait_for_watches("deviceclasses")
    devcluster.store.create("deviceclasses", make_class("b.example.com"))
    devcluster.expire_watches("deviceclasses")  # an ERROR event with code 410 ends the stream
    devcluster.store.delete("deviceclasses", None, "a.example.com")
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    wait_for(lambda: state(cluster, "DeviceClass").relist_count >= 1, message="relist after ERROR 410")


def test_api_server_restart_mid_watch(cluster, devcluster, fast_sync, run_watcher):
    devcluster.store.create("nodes", make_node("n1"))
    run_watcher(cluster, "Node")
    assert_mirror_equals_server(cluster, devcluster, ["Node"])
    assert devcluster.wait_for_watches("nodes")
    devcluster.stop()
    devcluster.store.create("nodes", make_node("n2"))  # happens while the server is down
    node = devcluster.store.get("nodes", None, "n1")
    node["spec"]["unschedulable"] = True
    devcluster.store.update("nodes", node)
    wait_for(lambda: state(cluster, "Node").status == SyncState.Status.ERROR, message="the outage to be recorded")
    assert state(cluster, "Node").last_error_at is not None
    devcluster.start()  # same port, same store
    assert_mirror_equals_server(cluster, devcluster, ["Node"])
    wait_for(connected(cluster, "Node"))
    # It resumed from its resourceVersion (history still there): no relist was needed.
    assert state(cluster, "Node").relist_count == 0


def test_duplicate_and_out_of_order_events_change_nothing(cluster, devcluster, fast_sync, run_watcher):
    devcluster.store.create("resourceclaims", make_claim("ns", "keep"))
    devcluster.store.create("resourceclaims", make_claim("ns", "gone"))
    run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    assert devcluster.wait_for_watches("resourceclaims")
    old_keep = devcluster.store.get("resourceclaims", "ns", "keep")
    old_gone = devcluster.store.get("resourceclaims", "ns", "gone")
    new_keep = dict(old_keep, status={"allocation": allocation("node-x")})
    new_keep = devcluster.store.update("resourceclaims", new_keep, subresource="status")
    devcluster.store.delete("resourceclaims", "ns", "gone")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    # Replays: the same MODIFIED again, the older version, the deleted object coming back.
    devcluster.inject_watch_line("resourceclaims", json.dumps({"type": "MODIFIED", "object": new_keep}))
    devcluster.inject_watch_line("resourceclaims", json.dumps({"type": "MODIFIED", "object": old_keep}))
    devcluster.inject_watch_line("resourceclaims", json.dumps({"type": "ADDED", "object": old_gone}))
    devcluster.store.create("resourceclaims", make_claim("ns", "after"))  # proves the injected lines were consumed
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    row = ResourceClaim.objects.get(cluster=cluster, name="keep")
    assert row.state == "allocated" and row.raw == new_keep


def test_apply_guard_keeps_newer_version(cluster):
    from mirror.sync.apply import apply_object, delete_object

    claim = make_claim("ns", "c")
    claim["metadata"].update(uid="u1", resourceVersion="10")
    assert apply_object(cluster, "ResourceClaim", claim) is not None
    older = json.loads(json.dumps(claim))
    older["metadata"]["resourceVersion"] = "9"
    older["status"] = {"allocation": allocation("n")}
    assert apply_object(cluster, "ResourceClaim", older) is None  # never back in time
    assert apply_object(cluster, "ResourceClaim", claim) is None  # duplicate
    assert ResourceClaim.objects.get(cluster=cluster, name="c").state == "pending"
    stale_delete = dict(claim, metadata=dict(claim["metadata"], uid="other-incarnation"))
    assert delete_object(cluster, "ResourceClaim", stale_delete) is False
    assert delete_object(cluster, "ResourceClaim", claim) is True


@pytest.mark.sqlite_default
def test_malformed_objects_are_counted_and_never_stop_the_stream(cluster, devcluster, fast_sync, run_watcher, caplog):
    run_watcher(cluster, "ResourceClaim")
    wait_for(connected(cluster, "ResourceClaim"))
    assert devcluster.wait_for_watches("resourceclaims")
    bad_lines = [
        "{this is not json",
        json.dumps({"type": "ADDED", "object": {"kind": "ResourceClaim", "metadata": {"namespace": "ns"}}}),  # no name
        json.dumps(
            {
                "type": "ADDED",
                "object": {
                    "kind": "ResourceClaim",
                    "metadata": {"namespace": "ns", "name": "x", "resourceVersion": "1"},
                    "spec": "wrong",
                },
            }
        ),
        json.dumps({"type": "ADDED", "object": {"kind": "ResourceClaim", "metadata": {"name": 42, "namespace": "ns"}}}),
    ]
    for line in bad_lines:
        devcluster.inject_watch_line("resourceclaims", line)
    devcluster.store.create("resourceclaims", make_claim("ns", "good"))
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(lambda: state(cluster, "ResourceClaim").malformed_count == 4, message="4 malformed counted")
    assert "this is not json" in caplog.text and "metadata.name missing" in caplog.text


def test_a_slice_with_devices_of_the_wrong_json_type_is_malformed_and_the_rest_lands(
    cluster, devcluster, fast_sync, run_watcher, caplog
):
    """A server answering garbage: device attributes as a list, a capacity entry that is a string. Each
    such slice is reported (named field) and skipped; it never fails the batch or a later preview."""
    from inventory.models import Device, ResourceSlice

    run_watcher(cluster, "ResourceSlice")
    wait_for(connected(cluster, "ResourceSlice"))
    assert devcluster.wait_for_watches("resourceslices")
    listed = make_slice("a", gpus=1)
    bad_attributes = make_slice("b", gpus=1)
    bad_attributes["spec"]["devices"][0]["attributes"] = [{"model": "H100"}]
    bad_capacity = make_slice("c", gpus=1)
    bad_capacity["spec"]["devices"][0]["capacity"] = {"memory": "80Gi"}
    for obj in (bad_attributes, bad_capacity):
        devcluster.inject_watch_line("resourceslices", json.dumps({"type": "ADDED", "object": obj}))
    devcluster.store.create("resourceslices", listed)
    assert_mirror_equals_server(cluster, devcluster, ["ResourceSlice"])
    wait_for(lambda: state(cluster, "ResourceSlice").malformed_count == 2, message="2 malformed counted")
    assert "device gpu-0: attributes must be a map, not list" in caplog.text
    assert "device gpu-0: capacity['memory'] must be an object, not str" in caplog.text
    assert list(ResourceSlice.objects.filter(cluster=cluster).values_list("name", flat=True)) == [
        listed["metadata"]["name"]
    ]
    assert Device.objects.filter(cluster=cluster).count() == 1


def test_newer_fields_unknown_to_the_client_survive(cluster, devcluster, fast_sync, run_watcher):
    listed = make_claim("ns", "listed")
    listed["spec"]["devices"]["futureKnob"] = {"level": 3}
    listed["metadata"]["annotations"] = {"a": "b"}
    devcluster.store.create("resourceclaims", listed)
    run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    watched = make_claim("ns", "watched")
    watched["spec"]["devices"]["requests"][0]["exactly"]["fancyNewSelector"] = ["x", {"y": 1}]
    watched["status"] = {"futureStatus": {"healthy": True}}
    devcluster.store.create("resourceclaims", watched)
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    assert ResourceClaim.objects.get(name="listed").raw["spec"]["devices"]["futureKnob"] == {"level": 3}
    row = ResourceClaim.objects.get(name="watched")
    assert row.raw["spec"]["devices"]["requests"][0]["exactly"]["fancyNewSelector"] == ["x", {"y": 1}]
    assert row.raw["status"]["futureStatus"] == {"healthy": True}
    assert row.raw == devcluster.store.get("resourceclaims", "ns", "watched")


def test_only_dra_pods_are_mirrored(cluster, devcluster, fast_sync, run_watcher):
    store = devcluster.store
    store.create("pods", make_pod("ns", "plain"))
    store.create("pods", make_pod("ns", "uses-claim", claim="c1", node="n1"))
    store.create(
        "pods", make_pod("kube-system", "driver", labels={"app.kubernetes.io/name": "nvidia-dra-driver-gpu"}, node="n1")
    )
    run_watcher(cluster, "Pod")

    def mirrored(obj):
        return bool(obj["spec"].get("resourceClaims")) or "dra" in obj["metadata"].get("labels", {}).get(
            "app.kubernetes.io/name", ""
        )  # noqa: E731

    assert_mirror_equals_server(cluster, devcluster, ["Pod"], only=mirrored)
    assert set(Pod.objects.filter(cluster=cluster).values_list("name", flat=True)) == {"uses-claim", "driver"}
    driver = store.get("pods", "kube-system", "driver")
    driver["metadata"]["labels"] = {"app": "something-else"}  # stops qualifying
    store.update("pods", driver)
    store.create("pods", make_pod("ns", "later", claim="c2"))
    assert_mirror_equals_server(cluster, devcluster, ["Pod"], only=mirrored)
    assert not Pod.objects.filter(name="driver").exists()
    assert list(Pod.objects.get(name="uses-claim").claim_refs.values_list("claim_name", flat=True)) == ["c1"]


def test_errors_are_recorded_and_retried(cluster, devcluster, fast_sync, run_watcher):
    devcluster.store.create("resourceslices", make_slice("n1"))
    devcluster.fail_next(3, status=500, path_prefix="/apis/resource.k8s.io/v1/resourceslices")
    run_watcher(cluster, "ResourceSlice")
    wait_for(lambda: "500" in state(cluster, "ResourceSlice").last_error, message="the 500 recorded")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceSlice"])
    wait_for(connected(cluster, "ResourceSlice"))

    devcluster.garbage_next(2, path_prefix="/apis/resource.k8s.io/v1/resourceslices", watch=False)
    devcluster.store.create("resourceslices", make_slice("n2"))
    devcluster.store.compact()
    devcluster.expire_watches("resourceslices")  # forces a LIST, which gets garbage twice
    wait_for(lambda: "not JSON" in state(cluster, "ResourceSlice").last_error, message="the garbage body recorded")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceSlice"])
    wait_for(connected(cluster, "ResourceSlice"))


def test_auth_failure_recorded_then_fixed_kubeconfig_recovers(transactional_db, tmp_path, fast_sync, run_watcher):
    from devcluster.server import DevCluster

    server = DevCluster(token="right-token", bookmark_interval=0.3)
    server.enforce_rules = True
    server.start()
    try:
        server.store.create("deviceclasses", make_class())
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        doc = yaml.safe_load(path.read_text())
        doc["users"][0]["user"]["token"] = "wrong-token"
        path.write_text(yaml.safe_dump(doc))
        cluster = Cluster.objects.create(name="auth", kubeconfig=str(path))
        run_watcher(cluster, "DeviceClass")
        wait_for(lambda: "401" in state(cluster, "DeviceClass").last_error, message="the 401 recorded")
        assert state(cluster, "DeviceClass").status == SyncState.Status.ERROR
        server.write_kubeconfig(path)  # the right token again: the watcher re-reads it
        assert_mirror_equals_server(cluster, server, ["DeviceClass"])
    finally:
        server.stop()


def test_discovery_without_resource_group_then_gaining_it(cluster, devcluster, fast_sync):
    devcluster.disable_group("resource.k8s.io")
    devcluster.store.create("nodes", make_node("n1"))
    devcluster.store.create("resourceclaims", make_claim("ns", "c"))
    supervisor = Supervisor(cluster_names=["dev"]).start()
    try:
        wait_for(
            lambda: SyncState.objects.filter(cluster=cluster, status=SyncState.Status.NOT_SERVED).count() == 5,
            message="5 resource.k8s.io kinds not served",
        )
        assert_mirror_equals_server(cluster, devcluster, ["Node"])
        cluster.refresh_from_db()
        assert "resource.k8s.io/v1" not in cluster.served_resource_versions and cluster.server_version
        devcluster.enable_group("resource.k8s.io")
        devcluster.enable_devicetaintrules(("v1beta2",))
        assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
        wait_for(
            lambda: state(cluster, "DeviceTaintRule").api_version == "resource.k8s.io/v1beta2",
            message="taint rules at v1beta2",
        )
        cluster.refresh_from_db()
        assert "resource.k8s.io/v1" in cluster.served_resource_versions
    finally:
        supervisor.stop()


def _requests_since(server, mark, plural):
    """(LIST paths, WATCH paths) of `plural` the server received after the first `mark` logged requests."""
    paths = [p for _, p in list(server.requests)[mark:] if f"/{plural}" in p]
    return [p for p in paths if "watch=" not in p], [p for p in paths if "watch=" in p]


def _resource_version_of(path):
    from urllib.parse import parse_qs, urlsplit

    return int(parse_qs(urlsplit(path).query)["resourceVersion"][0])


def test_clean_watch_end_resumes_from_the_last_version(cluster, devcluster, fast_sync, run_watcher):
    # A stream that ends with its terminating chunk (what the server does at timeoutSeconds) is a
    # normal reconnect: no error recorded, no relist, the next watch starts at the last version seen.
    devcluster.store.create("deviceclasses", make_class("a.example.com"))
    run_watcher(cluster, "DeviceClass")
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    wait_for(connected(cluster, "DeviceClass"))
    assert devcluster.wait_for_watches("deviceclasses")
    seen_rv = int(devcluster.store.create("deviceclasses", make_class("b.example.com"))["metadata"]["resourceVersion"])
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    mark = len(devcluster.requests)
    devcluster.close_watches("deviceclasses")
    wait_for(lambda: _requests_since(devcluster, mark, "deviceclasses")[1], message="the watch to be reopened")
    lists, watches = _requests_since(devcluster, mark, "deviceclasses")
    assert lists == [] and _resource_version_of(watches[0]) >= seen_rv
    devcluster.store.delete("deviceclasses", None, "a.example.com")
    assert_mirror_equals_server(cluster, devcluster, ["DeviceClass"])
    st = state(cluster, "DeviceClass")
    assert st.last_error == "" and st.relist_count == 0


def test_cut_watch_stream_is_an_error_resumed_without_relisting(cluster, devcluster, fast_sync, run_watcher):
    # A connection dropped mid-stream (no terminating chunk: "Response ended prematurely") is
    # recorded as an error; the events that did arrive are kept and the watch resumes after them.
    devcluster.store.create("resourceclaims", make_claim("ns", "before"))
    run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(connected(cluster, "ResourceClaim"))
    assert devcluster.wait_for_watches("resourceclaims")
    mark = len(devcluster.requests)
    delivered_rv = int(
        devcluster.store.create("resourceclaims", make_claim("ns", "sent-before-the-cut"))["metadata"][
            "resourceVersion"
        ]
    )
    devcluster.abort_watches("resourceclaims")  # after the event above: it is written, then the cut
    wait_for(lambda: "connection lost" in state(cluster, "ResourceClaim").last_error, message="the cut recorded")
    devcluster.store.create("resourceclaims", make_claim("ns", "after-the-cut"))
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(connected(cluster, "ResourceClaim"))
    lists, watches = _requests_since(devcluster, mark, "resourceclaims")
    assert lists == [], "a cut stream must not cost a relist"
    assert _resource_version_of(watches[0]) >= delivered_rv
    assert state(cluster, "ResourceClaim").relist_count == 0
