"""The sync mirrors what drivers and the kubelet say about prepared devices: a claim's
status.devices[] (ClaimDeviceStatus rows) and a pod's allocatedResourcesStatus[] (PodResourceHealth
rows), through list+watch of the built-in API server with the real kubernetes client: added,
changed, removed, malformed (kept with an error, never dropping the object), and after a relist."""

import pytest
from kubernetes import client

from claims.models import ClaimDeviceStatus, Pod, PodResourceHealth, ResourceClaim
from mirror.models import SyncState
from tests.sync_fixtures import allocation, assert_mirror_equals_server, make_claim, make_pod, state, wait_for

DRIVER = "gpu.example.com"


def connected(cluster, kind):
    return lambda: state(cluster, kind).status == SyncState.Status.CONNECTED


def allocated_claim(server, name, devices=("gpu-0", "gpu-1")):
    claim = make_claim("team-a", name)
    alloc = allocation("node-1")
    alloc["devices"]["results"] = [{"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": d} for d in devices]
    claim["status"] = {"allocation": alloc}
    return server.store.create("resourceclaims", claim)


def entry(device, ready=None, **extra):
    out = {"driver": DRIVER, "pool": "node-1", "device": device, **extra}
    if ready is not None:
        out["conditions"] = [
            {
                "type": "Ready",
                "status": ready,
                "reason": "Prepared" if ready == "True" else "Preparing",
                "message": "",
                "lastTransitionTime": "2026-03-01T10:00:00Z",
            }
        ]
    return out


def set_devices(server, name, devices):
    """Through the API (validated like a v1.36 apiserver), as a driver writes it."""
    api = client.ResourceV1Api(server.api_client())
    api.patch_namespaced_resource_claim_status(name, "team-a", {"status": {"devices": devices}})


def rows(cluster, name):
    return list(
        ClaimDeviceStatus.objects.filter(claim__cluster=cluster, claim__name=name)
        .order_by("id")
        .values_list("device", "ready", "error")
    )


def rows_match(cluster, name, expected):
    return lambda: rows(cluster, name) == expected


@pytest.mark.sqlite_default
def test_claim_device_status_added_changed_removed(cluster, devcluster, fast_sync, run_watcher):
    allocated_claim(devcluster, "train")
    run_watcher(cluster, "ResourceClaim")
    wait_for(connected(cluster, "ResourceClaim"))
    assert rows(cluster, "train") == []

    network = {"interfaceName": "net1", "ips": ["10.9.8.7/24"], "hardwareAddress": "aa:bb:cc:dd:ee:ff"}
    set_devices(
        devcluster,
        "train",
        [entry("gpu-0", "False", data={"uuid": "GPU-1234"}, networkData=network), entry("gpu-1")],
    )
    wait_for(rows_match(cluster, "train", [("gpu-0", False, ""), ("gpu-1", None, "")]), message="device status added")
    first = ClaimDeviceStatus.objects.get(claim__name="train", device="gpu-0")
    assert (first.driver, first.pool, first.share_id) == (DRIVER, "node-1", "")
    assert first.conditions[0]["reason"] == "Preparing" and first.conditions[0]["lastTransitionTime"]
    assert first.data == {"uuid": "GPU-1234"}
    assert (first.interface_name, first.ips, first.hardware_address) == ("net1", ["10.9.8.7/24"], "aa:bb:cc:dd:ee:ff")
    assert first.namespace == "team-a" and first.cluster_id == cluster.pk

    # changed: the driver says Ready
    set_devices(devcluster, "train", [entry("gpu-0", "True"), entry("gpu-1", "True")])
    wait_for(rows_match(cluster, "train", [("gpu-0", True, ""), ("gpu-1", True, "")]), message="device status changed")
    assert ClaimDeviceStatus.objects.get(claim__name="train", device="gpu-0").interface_name == ""

    # a reservation alone leaves the device status rows as they are (not rebuilt)
    ids = sorted(ClaimDeviceStatus.objects.filter(claim__name="train").values_list("id", flat=True))
    claim = devcluster.store.get("resourceclaims", "team-a", "train")
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u-1"}]
    devcluster.store.update("resourceclaims", claim, subresource="status")
    wait_for(lambda: ResourceClaim.objects.get(name="train").state == "reserved", message="reserved")
    assert sorted(ClaimDeviceStatus.objects.filter(claim__name="train").values_list("id", flat=True)) == ids

    # removed: one entry, then all (a merge patch replaces the list)
    set_devices(devcluster, "train", [entry("gpu-1", "True")])
    wait_for(rows_match(cluster, "train", [("gpu-1", True, "")]), message="one entry removed")
    set_devices(devcluster, "train", None)
    wait_for(rows_match(cluster, "train", []), message="every entry removed")

    # the claim deleted: its rows go with it
    set_devices(devcluster, "train", [entry("gpu-0", "True")])
    wait_for(rows_match(cluster, "train", [("gpu-0", True, "")]))
    devcluster.store.delete("resourceclaims", "team-a", "train")
    wait_for(lambda: not ClaimDeviceStatus.objects.filter(claim__cluster=cluster).exists(), message="rows deleted")


@pytest.mark.sqlite_default
def test_malformed_device_status_is_kept_with_an_error_and_the_claim_stays(cluster, devcluster, fast_sync, run_watcher):
    allocated_claim(devcluster, "odd")
    allocated_claim(devcluster, "fine")
    run_watcher(cluster, "ResourceClaim")
    wait_for(connected(cluster, "ResourceClaim"))
    # A server that does not validate (older, or a fake) sends what the v1.36 apiserver refuses:
    # planted in the store directly, delivered by the watch as any other change.
    claim = devcluster.store.get("resourceclaims", "team-a", "odd")
    claim["status"]["devices"] = [
        {"driver": DRIVER, "pool": "node-1", "device": "gpu-0", "conditions": "Ready", "networkData": {"ips": [7]}},
        "not an object",
        {"driver": DRIVER, "pool": "node-1", "device": "d" * 300},
        entry("gpu-1", "True"),
    ]
    devcluster.store.update("resourceclaims", claim, subresource="status")
    set_devices(devcluster, "fine", [entry("gpu-0", "True")])
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(lambda: len(rows(cluster, "odd")) == 4, message="four rows")
    bad, text, long, good = ClaimDeviceStatus.objects.filter(claim__name="odd").order_by("id")
    assert "conditions is not a list" in bad.error and "networkData.ips is not a string" in bad.error
    assert bad.conditions == [] and bad.ips == ["7"] and bad.device == "gpu-0"
    assert text.error == 'device status entry is not an object: "not an object"' and text.device == ""
    assert long.error == "device longer than 253 characters" and long.device == "d" * 253
    assert good.error == "" and good.ready is True
    assert rows(cluster, "fine") == [("gpu-0", True, "")]
    assert state(cluster, "ResourceClaim").malformed_count == 0  # nothing dropped


def test_device_status_follows_a_relist_after_410(cluster, devcluster, fast_sync, run_watcher):
    allocated_claim(devcluster, "a")
    allocated_claim(devcluster, "b")
    allocated_claim(devcluster, "c")
    set_devices(devcluster, "a", [entry("gpu-0", "True")])
    set_devices(devcluster, "b", [entry("gpu-0", "False")])
    w = run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(connected(cluster, "ResourceClaim"))
    assert rows(cluster, "a") == [("gpu-0", True, "")] and rows(cluster, "b") == [("gpu-0", False, "")]
    w.stop()
    # While nobody watches: a changed, b's status removed, c's added; then compaction.
    set_devices(devcluster, "a", [entry("gpu-0", "False"), entry("gpu-1", "True")])
    set_devices(devcluster, "b", None)
    set_devices(devcluster, "c", [entry("gpu-1", "True")])
    devcluster.compact()
    relists = state(cluster, "ResourceClaim").relist_count

    run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(lambda: state(cluster, "ResourceClaim").relist_count == relists + 1, message="a relist")
    assert rows(cluster, "a") == [("gpu-0", False, ""), ("gpu-1", True, "")]
    assert rows(cluster, "b") == []
    assert rows(cluster, "c") == [("gpu-1", True, "")]


# --- pods ---------------------------------------------------------------------------------------


def dra_pod(server, name, claim="train"):
    pod = make_pod("team-a", name, claim=claim, node="node-1")
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu", "request": "gpu"}]}
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]
    return server.store.create("pods", pod)


def resource(rid, health, message=None):
    out = {"resourceID": rid, "health": health}
    if message is not None:
        out["message"] = message
    return out


def set_health(server, name, main=None, init=None, resource_claim="train"):
    """As the kubelet writes it, through the API: pods/status with allocatedResourcesStatus."""
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": resource_claim}]}
    if main is not None:
        status["containerStatuses"] = [
            {"name": "main", "allocatedResourcesStatus": [{"name": "claim:gpu/gpu", "resources": main}]}
        ]
    if init is not None:
        status["initContainerStatuses"] = [
            {"name": "setup", "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": init}]}
        ]
    client.CoreV1Api(server.api_client()).patch_namespaced_pod_status(name, "team-a", {"status": status})


def health_rows(cluster, name):
    return list(
        PodResourceHealth.objects.filter(pod__cluster=cluster, pod__name=name)
        .order_by("id")
        .values_list("container", "init_container", "resource_id", "health", "message", "error")
    )


@pytest.mark.sqlite_default
def test_pod_device_health_added_changed_removed(cluster, devcluster, fast_sync, run_watcher):
    dra_pod(devcluster, "worker")
    run_watcher(cluster, "Pod")
    wait_for(connected(cluster, "Pod"))
    wait_for(lambda: Pod.objects.filter(cluster=cluster, name="worker").exists(), message="pod mirrored")
    assert health_rows(cluster, "worker") == []

    gpu0, gpu1 = f"{DRIVER}/node-1/gpu-0", f"{DRIVER}/node-1/gpu-1"
    set_health(
        devcluster,
        "worker",
        main=[resource(gpu0, "Healthy"), resource(gpu1, "Unknown")],
        init=[resource(gpu0, "Healthy")],
    )
    expected = [
        ("setup", True, gpu0, "Healthy", "", ""),
        ("main", False, gpu0, "Healthy", "", ""),
        ("main", False, gpu1, "Unknown", "", ""),
    ]
    wait_for(lambda: health_rows(cluster, "worker") == expected, message="health added")
    row = PodResourceHealth.objects.get(pod__name="worker", container="main", resource_id=gpu1)
    assert (row.resource_name, row.claim_name, row.request, row.resource_claim_name) == (
        "claim:gpu/gpu",
        "gpu",
        "gpu",
        "train",
    )
    assert (row.driver, row.pool, row.device) == (DRIVER, "node-1", "gpu-1")

    # changed: the kubelet reports an XID error on gpu-1 (the message field of v1.36)
    set_health(
        devcluster,
        "worker",
        main=[resource(gpu0, "Healthy"), resource(gpu1, "Unhealthy", "XID 79: GPU fell off the bus")],
    )
    wait_for(
        lambda: (
            ("main", False, gpu1, "Unhealthy", "XID 79: GPU fell off the bus", "") in health_rows(cluster, "worker")
        ),
        message="health changed",
    )

    # the container turning ready leaves the health rows as they are (not rebuilt)
    ids = list(PodResourceHealth.objects.filter(pod__name="worker").order_by("id").values_list("id", flat=True))
    served = devcluster.store.get("pods", "team-a", "worker")
    statuses = served["status"]["containerStatuses"]
    statuses[0]["ready"] = True
    client.CoreV1Api(devcluster.api_client()).patch_namespaced_pod_status(
        "worker", "team-a", {"status": {"containerStatuses": statuses}}
    )
    wait_for(
        lambda: Pod.objects.get(cluster=cluster, name="worker").raw["status"]["containerStatuses"][0]["ready"],
        message="ready mirrored",
    )
    assert list(PodResourceHealth.objects.filter(pod__name="worker").order_by("id").values_list("id", flat=True)) == ids

    # removed: the container status without allocatedResourcesStatus
    client.CoreV1Api(devcluster.api_client()).patch_namespaced_pod_status(
        "worker", "team-a", {"status": {"containerStatuses": [{"name": "main"}], "initContainerStatuses": []}}
    )
    wait_for(lambda: health_rows(cluster, "worker") == [], message="health removed")


@pytest.mark.sqlite_default
def test_malformed_pod_health_is_kept_with_an_error_and_the_pod_stays(cluster, devcluster, fast_sync, run_watcher):
    dra_pod(devcluster, "odd")
    run_watcher(cluster, "Pod")
    wait_for(connected(cluster, "Pod"))
    pod = devcluster.store.get("pods", "team-a", "odd")
    pod["status"]["containerStatuses"] = [
        {
            "name": "main",
            "allocatedResourcesStatus": [
                {
                    "name": "claim:gpu/gpu",
                    "resources": [{"resourceID": "x", "health": "Sick"}, {"health": "Healthy"}, 5],
                },
                {"name": "claim:gpu/gpu", "resources": "all fine"},
            ],
        },
        {"name": "other", "allocatedResourcesStatus": {"not": "a list"}},
    ]
    devcluster.store.update("pods", pod, subresource="status")
    wait_for(lambda: len(health_rows(cluster, "odd")) == 5, message="five rows")
    errors = [r[-1] for r in health_rows(cluster, "odd")]
    assert errors == [
        'health is not one of Healthy, Unhealthy, Unknown: "Sick"',
        "resourceID is missing",
        "resource is not an object: 5",
        'resources is not a list: "all fine"',
        'allocatedResourcesStatus is not a list: {"not": "a list"}',
    ]
    assert Pod.objects.get(cluster=cluster, name="odd").raw == devcluster.store.get("pods", "team-a", "odd")
    assert state(cluster, "Pod").malformed_count == 0


def test_pod_health_follows_a_relist_after_410(cluster, devcluster, fast_sync, run_watcher):
    dra_pod(devcluster, "p1")
    dra_pod(devcluster, "p2")
    gpu0 = f"{DRIVER}/node-1/gpu-0"
    set_health(devcluster, "p1", main=[resource(gpu0, "Healthy")])
    w = run_watcher(cluster, "Pod")
    wait_for(connected(cluster, "Pod"))
    wait_for(lambda: len(health_rows(cluster, "p1")) == 1, message="p1 health")
    w.stop()
    set_health(devcluster, "p1", main=[resource(gpu0, "Unhealthy", "ECC")])
    set_health(devcluster, "p2", main=[resource("k8s.gpu.example.com/gpu=gpu-3", "Healthy")], resource_claim="other")
    devcluster.compact()
    relists = state(cluster, "Pod").relist_count
    run_watcher(cluster, "Pod")
    wait_for(lambda: state(cluster, "Pod").relist_count == relists + 1, message="a relist")
    wait_for(lambda: health_rows(cluster, "p1") == [("main", False, gpu0, "Unhealthy", "ECC", "")], message="p1")
    wait_for(lambda: len(health_rows(cluster, "p2")) == 1, message="p2")
    cdi = PodResourceHealth.objects.get(pod__name="p2")
    # A CDI device ID names no device by itself: resolved through the claim's allocation later.
    assert (cdi.resource_claim_name, cdi.driver, cdi.device) == ("other", "", "")
