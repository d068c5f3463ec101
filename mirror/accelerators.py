"""The accelerator settings (settings.GPUDASH_ACCELERATORS over DEFAULTS), and what HAMi's scheduler assigned
to a pod, read from the pod's annotation: the sync keeps such pods and stores the assignment on the Pod row
(claims.Pod.hami); inventory/accelerators.py builds the per-node rows from both."""

from django.conf import settings

DEFAULTS = {
    # Extended resources that look like accelerators (fnmatch patterns).
    "RESOURCES": [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-*",
        "amd.com/gpu",
        "habana.ai/gaudi",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "aws.amazon.com/neuron",
        "google.com/tpu",
    ],
    "PARTITION_RESOURCES": ["*/mig-*"],
    "SHARE_RESOURCES": ["*.shared"],
    # Node labels naming the GPU model (GPU feature discovery); "-" read as " " (NVIDIA-H100-80GB-HBM3).
    "MODEL_LABELS": ["nvidia.com/gpu.product", "amd.com/gpu.product-name", "gpu.intel.com/product"],
    "HAMI_REGISTER_ANNOTATIONS": {"hami.io/node-nvidia-register": "nvidia.com"},
    "HAMI_RESOURCES": {"count": "gpu", "memory": "gpumem", "cores": "gpucores"},
    # What HAMi's scheduler assigned to a pod (pkg/device/nvidia/device.go): the lasting record; the
    # "-to-allocate" twin is emptied by the device plugin as it allocates.
    "HAMI_POD_ANNOTATIONS": {"hami.io/vgpu-devices-allocated": "nvidia.com"},
}


def config():
    return {**DEFAULTS, **getattr(settings, "GPUDASH_ACCELERATORS", {})}


def hami_pod_devices(value):
    """HAMi's per-pod assignment, "UUID,TYPE,MEM_MiB,CORES_%:" per device and ";" after each container
    (init containers first; empty containers kept as empty entries), e.g.
    "GPU-a,NVIDIA,3000,30:;;GPU-b,NVIDIA,20000,0:;". Returns (devices, problem): devices as
    [{"container": index, "uuid", "type", "memory", "cores"}], problem a sentence ("" when all was read).
    A record that cannot be read is left out and named in the problem; nothing raises."""
    if not isinstance(value, str):
        return [], "the annotation is not a string"
    devices, bad = [], []
    for index, container in enumerate(value.strip().split(";")):
        for record in container.split(":"):
            if not record.strip():
                continue
            parts = [p.strip() for p in record.split(",")]
            try:
                if len(parts) < 4 or not parts[0]:
                    raise ValueError
                memory, cores = int(parts[2]), int(parts[3])
                if memory < 0 or cores < 0:
                    raise ValueError
            except ValueError:
                bad.append(record.strip()[:80])
                continue
            devices.append({"container": index, "uuid": parts[0], "type": parts[1], "memory": memory, "cores": cores})
    if not bad:
        return devices, ""
    return devices, "cannot read {} (expected UUID,TYPE,MEMORY_MiB,CORES_PERCENT)".format(
        ", ".join(repr(b) for b in bad[:3])
    )


def pod_assignment(raw, cfg=None):
    """What HAMi assigned to this Pod (raw object), from the first configured annotation it carries:
    {"annotation", "domain", "devices": [...], "problem"}; {} for a pod HAMi did not schedule.
    Stored on the Pod row (claims.Pod.hami) and read into the node's HAMi usage."""
    cfg = cfg or config()
    annotations = ((raw or {}).get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, dict):
        return {}
    for annotation, domain in cfg["HAMI_POD_ANNOTATIONS"].items():
        value = annotations.get(annotation)
        if value is None or value == "":
            continue
        devices, problem = hami_pod_devices(value)
        if not devices and not problem:
            continue  # only empty containers: nothing assigned (yet)
        return {"annotation": annotation, "domain": domain, "devices": devices, "problem": problem}
    return {}


def has_pod_assignment(raw, cfg=None):
    """The pod carries a HAMi assignment annotation (the mirror keeps such pods, mirror/sync/apply.py)."""
    cfg = cfg or config()
    annotations = ((raw or {}).get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, dict) and any(annotations.get(a) for a in cfg["HAMI_POD_ANNOTATIONS"])
