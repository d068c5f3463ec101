"""`manage.py preview` against a kubectl dump and against the database, and the Django adapter."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.dra.allocator_fixtures import allocated_claim, dev, device_class, node_obj, slice_

ROOT = Path(__file__).resolve().parents[2]
GPU_CLASS = 'device.driver == "gpu.example.com"'

CLAIM_YAML = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-gpus, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        count: 2
        selectors:
        - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
"""


def dump_items():
    gpus = lambda node: [dev(f"gpu-{i}", attrs={"model": "A100"}, capacity={"memory": "80Gi"}) for i in range(4)]  # noqa: E731
    return [
        device_class("gpu", [GPU_CLASS]),
        node_obj("node-a", {"gpudash.io/node-pool": "a100"}),
        node_obj("node-b", {"gpudash.io/node-pool": "a100"}),
        node_obj("node-c", {}),
        slice_("node-a-gpu", driver="gpu.example.com", pool="node-a", node="node-a", devices=gpus("node-a")),
        slice_("node-b-gpu", driver="gpu.example.com", pool="node-b", node="node-b", devices=gpus("node-b")),
        # node-b: three of four taken
        allocated_claim("busy", [f"gpu.example.com/node-b/gpu-{i}" for i in range(3)], ns="team-b"),
    ]


@pytest.fixture
def files(tmp_path):
    dump = tmp_path / "DUMP.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": dump_items()}))
    claim = tmp_path / "CLAIM.yaml"
    claim.write_text(CLAIM_YAML)
    return dump, claim


def run(**opts):
    out = io.StringIO()
    call_command("preview", stdout=out, **opts)
    return out.getvalue()


def test_snapshot_json_output(files):
    dump, claim = files
    result = json.loads(run(snapshot=str(dump), claim=str(claim), json=True))
    by_node = {e["node"]: e for e in result["nodes"]}
    assert list(by_node) == ["node-a", "node-b", "node-c"]  # one entry for every node
    a = by_node["node-a"]
    assert a["fits"] is True and a["reason"] is None and a["error"] is None
    assert a["results"] == [
        {
            "claim": "team-a/two-gpus",
            "request": "gpu",
            "driver": "gpu.example.com",
            "pool": "node-a",
            "device": f"gpu-{i}",
            "adminAccess": False,
        }
        for i in (0, 1)
    ]
    b = by_node["node-b"]
    assert b["fits"] is False and b["results"] == []
    assert b["reason"] == (
        "request `gpu`: 4 devices match class `gpu`, selector "
        '`device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0` leaves 4, '
        "3 are already allocated to other claims (e.g. team-b/busy), 1 free < count 2"
    )
    assert by_node["node-c"]["reason"] == "request `gpu`: no complete pool of driver `gpu.example.com` on this node"
    assert result["summary"]["fits"] == 1


def test_snapshot_headroom_and_table(files):
    dump, claim = files
    text = run(snapshot=str(dump), claim=str(claim), headroom=True)
    assert "node-a: fits  gpu=gpu.example.com/node-a/gpu-0, gpu=gpu.example.com/node-a/gpu-1" in text
    assert "1 of 3 nodes fit team-a/two-gpus." in text
    result = json.loads(run(snapshot=str(dump), claim=str(claim), headroom=True, json=True))
    assert result["headroom"]["copies"] == 2  # node-a: 4 free GPUs = 2 copies; node-b: 1 free
    assert result["headroom"]["byNodePool"] == {"a100": 2}
    assert result["headroom"]["byDeviceModel"] == {"A100": 2}


def test_real_cli_process(files):
    dump, claim = files
    proc = subprocess.run(
        [sys.executable, "manage.py", "preview", "--snapshot", str(dump), "--claim", str(claim), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [e["fits"] for e in json.loads(proc.stdout)["nodes"]] == [True, False, False]
    bad = subprocess.run(
        [sys.executable, "manage.py", "preview", "--snapshot", str(claim), "--claim", str(claim)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert bad.returncode == 1
    assert "not JSON" in bad.stderr


@pytest.mark.parametrize(
    "items, message",
    [
        ([], "has no Node, ResourceSlice, DeviceClass objects"),
        ([node_obj("n", {})], "has no ResourceSlice, DeviceClass objects"),
    ],
)
def test_snapshot_missing_kinds(tmp_path, files, items, message):
    _, claim = files
    dump = tmp_path / "partial.json"
    dump.write_text(json.dumps({"kind": "List", "items": items}))
    with pytest.raises(CommandError, match=message):
        run(snapshot=str(dump), claim=str(claim))


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("kind: ResourceClaim\nmetadata: {name: x\n", "malformed YAML at line"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "unsupported kind 'Deployment'"),
        ("- just\n- a list\n", "document 1 is a list"),
        ("", "empty"),
    ],
)
def test_bad_claim_yaml(tmp_path, files, yaml_text, message):
    dump, _ = files
    claim = tmp_path / "bad.yaml"
    claim.write_text(yaml_text)
    with pytest.raises(CommandError, match=message):
        run(snapshot=str(dump), claim=str(claim))


def test_missing_files(tmp_path, files):
    dump, claim = files
    with pytest.raises(CommandError, match="cannot read --claim"):
        run(snapshot=str(dump), claim=str(tmp_path / "nope.yaml"))
    with pytest.raises(CommandError, match="cannot read snapshot"):
        run(snapshot=str(tmp_path / "nope.json"), claim=str(claim))


# ---- from the database


def _store(cluster, raw):
    from claims.models import ResourceClaim
    from inventory.models import DeviceClass, Node, ResourceSlice

    model = {"DeviceClass": DeviceClass, "Node": Node, "ResourceSlice": ResourceSlice, "ResourceClaim": ResourceClaim}[
        raw["kind"]
    ]
    raw = json.loads(json.dumps(raw))
    raw["metadata"].setdefault("uid", f"uid-{raw['metadata']['name']}")
    raw["metadata"].setdefault("resourceVersion", str(_store.rv))
    _store.rv += 1
    from mirror.sync.apply import apply_object

    # The sync's write path: it logs the change, which the live preview inventory follows.
    return apply_object(cluster, raw["kind"], raw) or model.objects.get(
        cluster=cluster, namespace=raw["metadata"].get("namespace") or "", name=raw["metadata"]["name"]
    )


_store.rv = 100


@pytest.fixture
def db_cluster(db):
    from mirror.models import Cluster

    cluster = Cluster.objects.create(name="prod", is_snapshot=True)
    for raw in dump_items():
        _store(cluster, raw)
    return cluster


def test_command_from_database(db_cluster, tmp_path):
    claim = tmp_path / "c.yaml"
    claim.write_text(CLAIM_YAML)
    result = json.loads(run(claim=str(claim), json=True))
    assert [e["fits"] for e in result["nodes"]] == [True, False, False]
    assert result["summary"]["cluster"] == "prod"
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        run(claim=str(claim), cluster="nope")


def test_adapter_cache_follows_data_changes(db_cluster):
    from claims.preview import cluster_inventory, run_preview

    first = run_preview(db_cluster, yaml_text=CLAIM_YAML)
    assert first["nodes"][0]["fits"] is True
    assert cluster_inventory(db_cluster) is cluster_inventory(db_cluster)  # cached while nothing changes
    _store(
        db_cluster,
        allocated_claim(
            "grab",
            ["gpu.example.com/node-a/gpu-0", "gpu.example.com/node-a/gpu-1", "gpu.example.com/node-a/gpu-2"],
            ns="team-c",
        ),
    )
    second = run_preview(db_cluster, yaml_text=CLAIM_YAML)
    assert second["nodes"][0]["fits"] is False
    assert "3 are already allocated to other claims (e.g. team-c/grab)" in second["nodes"][0]["reason"]


def test_adapter_existing_claim_and_errors(db_cluster):
    import yaml

    from claims.models import ResourceClaim
    from claims.preview import PreviewError, run_preview

    pending = _store(db_cluster, dict(yaml.safe_load(CLAIM_YAML), metadata={"name": "waiting", "namespace": "team-a"}))
    result = run_preview(db_cluster, claim=pending)
    assert result["summary"]["claims"] == ["team-a/waiting"]
    assert result["nodes"][0]["fits"] is True
    busy = ResourceClaim.objects.get(cluster=db_cluster, name="busy")
    with pytest.raises(PreviewError, match="already allocated"):
        run_preview(db_cluster, claim=busy)
    with pytest.raises(PreviewError, match="either YAML"):
        run_preview(db_cluster)
    with pytest.raises(PreviewError, match="malformed YAML"):
        run_preview(db_cluster, yaml_text="a: [")
    db_cluster.features = {"prioritised_list": False}
    db_cluster.save()
    with pytest.raises(PreviewError, match="unknown DRA feature setting"):
        run_preview(db_cluster, yaml_text=CLAIM_YAML)


@pytest.mark.django_db
def test_admin_access_follows_the_mirrored_namespace_label():
    """From the database, admin access is allowed only in namespaces labelled for it (as the API server does)."""
    from claims.preview import run_preview
    from mirror.models import Cluster
    from mirror.sync.apply import apply_object

    cluster = Cluster.objects.create(name="ns-label")
    apply_object(cluster, "Node", {"metadata": {"name": "n1", "uid": "n1", "resourceVersion": "1"}})
    apply_object(cluster, "DeviceClass", {"metadata": {"name": "gpu", "uid": "c1", "resourceVersion": "2"}, "spec": {}})
    apply_object(
        cluster,
        "ResourceSlice",
        {
            "metadata": {"name": "s1", "uid": "s1", "resourceVersion": "3"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        },
    )
    apply_object(cluster, "Namespace", {"metadata": {"name": "plain", "uid": "ns1", "resourceVersion": "4"}})
    apply_object(
        cluster,
        "Namespace",
        {
            "metadata": {
                "name": "ops",
                "uid": "ns2",
                "resourceVersion": "5",
                "labels": {"resource.kubernetes.io/admin-access": "true"},
            }
        },
    )
    claim_yaml = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: watch-all, namespace: %s}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu, adminAccess: true}
"""
    allowed = run_preview(cluster, yaml_text=claim_yaml % "ops")
    assert allowed["nodes"][0]["fits"] and allowed["nodes"][0]["results"][0]["adminAccess"] is True
    refused = run_preview(cluster, yaml_text=claim_yaml % "plain")
    node = refused["nodes"][0]
    assert not node["fits"]
    assert "admin" in ((node["error"] or "") + (node["reason"] or "")).lower()
