"""add_cluster, watch --once, import_snapshot, and the change messages on the channel layer."""

import asyncio
import json
import os

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.core.management import CommandError, call_command

from claims.models import Pod, ResourceClaim
from inventory.models import Device, ResourceSlice
from mirror.models import Cluster, SyncState
from mirror.sync import publish
from mirror.sync.apply import apply_object
from tests.sync_fixtures import (
    allocation,
    assert_mirror_equals_server,
    make_claim,
    make_class,
    make_node,
    make_pod,
    make_slice,
)


def test_add_cluster_registers_and_validates(transactional_db, devcluster, tmp_path):
    path = devcluster.write_kubeconfig(tmp_path / "kc", context="ctx-a")
    call_command("add_cluster", "lab", "--kubeconfig", str(path), "--context", "ctx-a", "--read-only")
    cluster = Cluster.objects.get(name="lab")
    assert cluster.kubeconfig == str(path.resolve() if hasattr(path, "resolve") else os.path.realpath(path))
    assert cluster.context == "ctx-a" and cluster.read_only and not cluster.writable
    with pytest.raises(CommandError, match="no context 'nope'"):
        call_command("add_cluster", "lab2", "--kubeconfig", str(path), "--context", "nope")
    with pytest.raises(CommandError, match="no such file"):
        call_command("add_cluster", "lab3", "--kubeconfig", str(tmp_path / "missing"))
    with pytest.raises(CommandError, match="not valid"):
        call_command("add_cluster", "Bad Name!", "--in-cluster")
    call_command("add_cluster", "incluster", "--in-cluster")
    assert Cluster.objects.get(name="incluster").in_cluster


@pytest.mark.sqlite_default
def test_watch_once_mirrors_every_served_kind(cluster, devcluster, fast_sync):
    devcluster.store.create("nodes", make_node("n1"))
    devcluster.store.create("resourceslices", make_slice("n1", gpus=8))
    devcluster.store.create("deviceclasses", make_class())
    devcluster.store.create("resourceclaims", make_claim("ns", "c"))
    devcluster.store.create("pods", make_pod("ns", "p", claim="c"))
    call_command("watch", "--cluster", "dev", "--once")
    assert_mirror_equals_server(
        cluster, devcluster, ["Node", "ResourceSlice", "DeviceClass", "ResourceClaim", "Pod"], timeout=1
    )
    assert Device.objects.filter(cluster=cluster).count() == 8
    assert SyncState.objects.get(cluster=cluster, kind="DeviceTaintRule").status == SyncState.Status.NOT_SERVED
    with pytest.raises(CommandError, match="no such cluster: nope"):
        call_command("watch", "--cluster", "nope", "--once")


def kubectl_dump():
    node = make_node("gpu-1")
    slice_ = make_slice("gpu-1", gpus=2)
    claim = make_claim("ml", "train")
    claim["status"] = {"allocation": allocation("gpu-1")}
    pod = make_pod("ml", "trainer", claim="train", node="gpu-1")
    plain = make_pod("ml", "web")
    items = [
        node,
        slice_,
        claim,
        pod,
        plain,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ml"}},
    ]
    for n, item in enumerate(items):
        item["metadata"].update(uid=f"uid-{n}", resourceVersion=str(100 + n))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_import_snapshot_makes_a_read_only_cluster(transactional_db, tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(kubectl_dump()))
    call_command("import_snapshot", str(path), "--name", "prod-dump")
    cluster = Cluster.objects.get(name="prod-dump")
    assert cluster.is_snapshot and cluster.read_only and not cluster.writable
    assert ResourceClaim.objects.get(cluster=cluster, name="train").state == "allocated"
    assert Device.objects.filter(cluster=cluster).count() == 2
    assert list(Pod.objects.filter(cluster=cluster).values_list("name", flat=True)) == ["trainer"]  # only DRA pods
    assert set(SyncState.objects.filter(cluster=cluster).values_list("status", flat=True)) == {
        SyncState.Status.SNAPSHOT
    }
    call_command("import_snapshot", str(path), "--name", "prod-dump")  # re-import replaces
    assert (
        ResourceSlice.objects.filter(cluster__name="prod-dump").count() == 1
        and Cluster.objects.filter(name="prod-dump").count() == 1
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"kind": "Status"}', "no 'items' list"),
        ('{"items": 3}', "'items' is not a list"),
    ],
)
def test_import_snapshot_rejects_bad_files_clearly(transactional_db, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("import_snapshot", str(path))
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_snapshot", str(tmp_path / "absent.json"))
    assert not Cluster.objects.exists()


def test_group_names_are_safe_and_short():
    assert publish.node_group(3, "gpu-node-1.example.com") == "gpudash.c3.n.gpu-node-1.example.com"
    weird = publish.namespace_group(3, "ns/with:odd chars")
    long_name = publish.node_group(3, "n" * 250)
    for name in (weird, long_name):
        assert len(name) < 100 and all(c.isalnum() or c in "._-" for c in name)
    assert publish.node_group(3, "n" * 250) != publish.node_group(3, "n" * 249)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="cross-thread delivery needs the Redis channel layer")
def test_changes_are_published_to_node_namespace_and_kind_groups(cluster, fast_sync):
    layer = get_channel_layer()
    claim = make_claim("ml", "c1")
    claim["metadata"].update(uid="u-1", resourceVersion="5")
    claim["status"] = {"allocation": allocation("gpu-7")}
    groups = (
        publish.node_group(cluster.pk, "gpu-7"),
        publish.namespace_group(cluster.pk, "ml"),
        publish.kind_group(cluster.pk, "ResourceClaim"),
    )

    async def listen_while_applying():
        # One event loop for the channel's whole life, as a consumer has: the pub/sub layer keeps
        # channels per loop.
        channel = await layer.new_channel()
        for group in groups:
            await layer.group_add(group, channel)
        await sync_to_async(apply_object)(cluster, "ResourceClaim", claim)
        return [await asyncio.wait_for(layer.receive(channel), 10) for _ in range(3)]

    received = async_to_sync(listen_while_applying)()
    for message in received:
        assert message["type"] == "kube.changes"
        assert message["changes"] == [
            {
                "cluster": cluster.pk,
                "cluster_name": "dev",
                "kind": "ResourceClaim",
                "event": "ADDED",
                "namespace": "ml",
                "name": "c1",
                "uid": "u-1",
                "node": "gpu-7",
                "resourceVersion": "5",
                "state": "allocated",
            }
        ]


def test_in_process_runner_mirrors_and_stops(cluster, devcluster, fast_sync):
    from mirror.sync import runner

    devcluster.store.create("resourceclaims", make_claim("ns", "c1"))
    supervisor = runner.start_in_process()
    try:
        assert runner.ensure_supervisor() is supervisor  # started once per process
        assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim", "DeviceClass"])
        devcluster.store.create("resourceclaims", make_claim("ns", "c2"))
        assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    finally:
        runner.stop_process_supervisor()
    assert not supervisor.alive
    assert SyncState.objects.get(cluster=cluster, kind="ResourceClaim").lease_holder == ""  # released on stop
