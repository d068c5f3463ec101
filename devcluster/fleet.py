"""A large synthetic fleet for benchmarks (e.g. 5,000 nodes x 8 GPUs, 20,000 claims + pods).

Objects reuse read-only sub-structures (device attribute maps, container specs): safe because
the store never mutates a stored dict in place. Load with `Store.bulk_load(fleet, copy=False)`.
Allocations are consistent: every allocated device exists, no device is allocated twice, and on
MIG nodes only partitions that fit the GPU's counters are allocated.
"""

import random

from . import builders as b

FLEET_MIG_PROFILES = [p for p in b.DEFAULT_MIG_PROFILES if p["profile"] == "3g.40gb"]


def _uuid(rng):
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def generate_fleet(
    nodes=5000, gpus_per_node=8, mig_fraction=0.2, allocated_fraction=0.3, claims=20000, seed=1, namespaces=20
):
    """{plural: [objects]}. Whole-GPU nodes publish one slice; MIG nodes (every 1/mig_fraction-th)
    publish a counter-set slice plus a device slice (whole GPUs and 3g.40gb partitions).
    allocated_fraction of the allocatable units get a claim each (one device per claim, reserved by
    a Running pod); the remaining claims are pending with Pending pods."""
    rng = random.Random(seed)
    h100 = b.DEFAULT_GPU_MODELS["h100"]
    a100 = b.DEFAULT_GPU_MODELS["a100"]
    out = {
        "namespaces": [],
        "nodes": [],
        "resourceslices": [],
        "deviceclasses": [],
        "resourceclaimtemplates": [],
        "resourceclaims": [],
        "pods": [],
    }
    ns_names = [f"team-{i:02d}" for i in range(namespaces)]
    out["namespaces"] = [b.namespace_obj(n, rng) for n in ns_names]
    out["deviceclasses"] = [
        b.device_class(
            "gpu.nvidia.com",
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
            "nvidia.com/gpu",
            rng,
        ),
        b.device_class(
            "mig.nvidia.com",
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
            None,
            rng,
        ),
    ]
    gpu_spec = b.claim_spec([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}])
    mig_spec = b.claim_spec(
        [
            {
                "name": "gpu",
                "deviceClassName": "mig.nvidia.com",
                "count": 1,
                "selectors": ["device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"],
            }
        ]
    )
    for ns in ns_names:
        out["resourceclaimtemplates"].append(b.make_template(ns, "gpu-1", gpu_spec, rng))

    # one template device per model and minor: per-node copies only change uuid and name
    templates = {}
    for key, model in (("h100", h100), ("a100", a100)):
        templates[key] = [b.gpu_device(model, m, rng) for m in range(gpus_per_node)]
    mig_every = round(1 / mig_fraction) if mig_fraction else 0
    units = []  # (node, driver, device, is_mig) allocatable without conflicts
    for n in range(nodes):
        name = f"node-{n:05d}"
        mig = bool(mig_every) and n % mig_every == mig_every - 1
        key = "a100" if mig else "h100"
        node = b.make_node(name, rng, a100 if mig else h100, zone=f"zone-{n % 3}")
        out["nodes"].append(node)
        devices = []
        for minor, tmpl in enumerate(templates[key]):
            dev = dict(tmpl)
            dev["attributes"] = dict(tmpl["attributes"], uuid={"string": f"GPU-{_uuid(rng)}"})
            devices.append(dev)
        uid = node["metadata"]["uid"]
        if mig:
            counter_sets, all_devices = [], []
            for minor, parent in enumerate(devices):
                counter_set, parts = b.mig_devices(a100, minor, parent, FLEET_MIG_PROFILES, rng)
                counter_sets.append(counter_set)
                all_devices.extend(parts)
                units.extend((name, b.GPU_DRIVER, p["name"], True) for p in parts[1:])
            out["resourceslices"].append(b._slice(name, b.GPU_DRIVER, rng, 2, uid, counters=counter_sets))
            out["resourceslices"].append(b._slice(name, b.GPU_DRIVER, rng, 2, uid, devices=all_devices))
        else:
            out["resourceslices"].append(b._slice(name, b.GPU_DRIVER, rng, 1, uid, devices=devices))
            units.extend((name, b.GPU_DRIVER, d["name"], False) for d in devices)

    rng.shuffle(units)
    to_allocate = min(claims, int(len(units) * allocated_fraction))
    container_image = "nvcr.io/nvidia/pytorch:25.01-py3"
    for i in range(claims):
        ns = ns_names[i % namespaces]
        pod_name = f"job-{i:05d}"
        allocated = i < to_allocate
        node, driver, device, is_mig = units[i] if allocated else (None, None, None, False)
        generated = i % 10 < 7
        pod_uid = _uuid(rng)
        claim_name = f"{pod_name}-gpu-{b.suffix(rng)}" if generated else f"{pod_name}-gpu"
        meta = {"name": claim_name, "namespace": ns, "uid": _uuid(rng), "creationTimestamp": b.TIMESTAMP}
        if generated:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            meta["annotations"] = {b.POD_CLAIM_NAME: "gpu"}
        status = {}
        if allocated:
            meta["finalizers"] = [b.DELETE_PROTECTION]
            status = {
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]},
                    "nodeSelector": b.node_selector_for(node),
                    "allocationTimestamp": b.TIMESTAMP,
                },
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
            }
        out["resourceclaims"].append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": meta,
                "spec": mig_spec if is_mig else gpu_spec,
                "status": status,
            }
        )
        pod_claim = (
            {"name": "gpu", "resourceClaimTemplateName": "gpu-1"}
            if generated
            else {"name": "gpu", "resourceClaimName": claim_name}
        )
        pod_status = {
            "phase": "Running" if allocated else "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "True" if allocated else "False", "lastTransitionTime": b.TIMESTAMP}
            ],
        }
        if not allocated:
            pod_status["conditions"][0].update(
                reason="Unschedulable", message="0/5000 nodes are available: cannot allocate all claims."
            )
        if generated:
            pod_status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        spec = {
            "containers": [{"name": "main", "image": container_image, "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [pod_claim],
            "restartPolicy": "Never",
        }
        if allocated:
            spec["nodeName"] = node
        out["pods"].append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": ns,
                    "uid": pod_uid,
                    "creationTimestamp": b.TIMESTAMP,
                    "labels": {"app": "job"},
                },
                "spec": spec,
                "status": pod_status,
            }
        )
    return out
