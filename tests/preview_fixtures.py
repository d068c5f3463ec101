"""A fleet for the preview page tests, loaded through the real sync path (apply_object).

cluster "wide", one pool label per kind of node (gpudash.io/node-pool):
  fit-NN    2 free H100 (pool "h100-free")          -> a 2-GPU claim fits
  busy-NN   2 H100, both held by team-b claims       -> reason `allocated`
  small-NN  1 free L4 (pool "l4")                    -> reason `too-few-devices`
  bare-NN   no ResourceSlice at all                  -> reason `no-pool`
Pending claims: team-a/wants-two (2 GPUs), team-b/wants-nine (9 GPUs: fits nowhere).
"""

from mirror.models import Cluster
from mirror.sync.apply import apply_object

from .ui_fixtures import claim, device_class, gpu, meta, resource_slice

H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"
GPU_CLASS = "gpu.nvidia.com"


def pool_node(name, pool):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(name, labels={"kubernetes.io/hostname": name, "gpudash.io/node-pool": pool}),
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-05T10:00:00Z"}],
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
        },
    }


def fleet_objects(fit=6, busy=7, small=3, bare=2):
    yield (
        "DeviceClass",
        device_class(
            GPU_CLASS, "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        ),
    )
    for i in range(fit):
        name = f"fit-{i:02d}"
        yield "Node", pool_node(name, "h100-free")
        yield "ResourceSlice", resource_slice(name, [gpu("gpu-0", H100), gpu("gpu-1", H100)])
    for i in range(busy):
        name = f"busy-{i:02d}"
        yield "Node", pool_node(name, "h100-busy")
        yield "ResourceSlice", resource_slice(name, [gpu("gpu-0", H100), gpu("gpu-1", H100)])
        yield "ResourceClaim", claim("team-b", f"holder-{i:02d}", count=2, results=["gpu-0", "gpu-1"], node_name=name)
    for i in range(small):
        name = f"small-{i:02d}"
        yield "Node", pool_node(name, "l4")
        yield "ResourceSlice", resource_slice(name, [gpu("gpu-0", L4, memory="24Gi")])
    for i in range(bare):
        yield "Node", pool_node(f"bare-{i:02d}", "cpu")
    yield "ResourceClaim", claim("team-a", "wants-two", count=2)
    yield "ResourceClaim", claim("team-b", "wants-nine", count=9)


def load_preview_fleet(name="wide", **sizes):
    cluster = Cluster.objects.create(name=name)
    for kind, raw in fleet_objects(**sizes):
        apply_object(cluster, kind, raw)
    return cluster


TWO_GPUS = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: two-gpus
  namespace: team-a
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        count: 2
"""

BAD_CEL = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: bad-cel
  namespace: team-a
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel:
            expression: device.attributes['gpu.nvidia.com'].productName ==== 'x'
"""

MALFORMED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: broken
spec:
  devices: {}
"""
