"""Builders for the objects a DRA cluster holds, shaped like what real drivers and
controllers write (NVIDIA gpu.nvidia.com driver, dra-example-driver). Shared by the scenario loader, the
synthetic fleet generator and the churn generator.

Everything is deterministic given the `rng` passed in, so scenario objects keep the same
names and uids between runs (tests can refer to them).
"""

import json
import uuid

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "rdma.example.com"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
GPU_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
GPU_DRIVER_APP = "nvidia-dra-driver-gpu"
NIC_DRIVER_NAMESPACE = "rdma-dra-driver"
NIC_DRIVER_APP = "rdma-dra-driver"
RDMA_NODE_LABEL = "feature.node.kubernetes.io/rdma.available"
TIMESTAMP = "2026-01-05T08:00:00Z"
MAX_DEVICES_WITH_COUNTERS = 64  # per slice, when devices consume counters (validation limit)

# DNS-form counter names for the MIG capacities (KEP-4815 partitionable devices).
COUNTER_NAMES = {
    "multiprocessors": "multiprocessors",
    "copyEngines": "copy-engines",
    "decoders": "decoders",
    "encoders": "encoders",
    "jpegEngines": "jpeg-engines",
    "ofaEngines": "ofa-engines",
    "memory": "memory",
}

# A100 80GB profiles (NVML GPU-instance profile ids); used when a scenario names none.
DEFAULT_MIG_PROFILES = [
    {
        "profile": "1g.10gb",
        "id": 19,
        "slices": 1,
        "placements": [0, 1, 2, 3, 4, 5, 6],
        "multiprocessors": 14,
        "copyEngines": 1,
        "decoders": 0,
        "encoders": 0,
        "jpegEngines": 0,
        "ofaEngines": 0,
        "memory": "9728Mi",
    },
    {
        "profile": "2g.20gb",
        "id": 14,
        "slices": 2,
        "placements": [0, 2, 4],
        "multiprocessors": 28,
        "copyEngines": 2,
        "decoders": 1,
        "encoders": 0,
        "jpegEngines": 0,
        "ofaEngines": 0,
        "memory": "19968Mi",
    },
    {
        "profile": "3g.40gb",
        "id": 9,
        "slices": 4,
        "placements": [0, 4],
        "multiprocessors": 42,
        "copyEngines": 3,
        "decoders": 2,
        "encoders": 0,
        "jpegEngines": 0,
        "ofaEngines": 0,
        "memory": "40192Mi",
    },
    {
        "profile": "7g.80gb",
        "id": 0,
        "slices": 8,
        "placements": [0],
        "multiprocessors": 98,
        "copyEngines": 7,
        "decoders": 5,
        "encoders": 0,
        "jpegEngines": 1,
        "ofaEngines": 1,
        "memory": "80Gi",
    },
]

DEFAULT_GPU_MODELS = {
    "h100": {
        "productName": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "cudaComputeCapability": "9.0.0",
        "driverVersion": "580.126.20",
        "cudaDriverVersion": "13.0.0",
        "addressingMode": "HMM",
        "memory": "81559Mi",
        "instanceType": "p5.48xlarge",
    },
    "a100": {
        "productName": "NVIDIA A100 80GB PCIe",
        "architecture": "Ampere",
        "cudaComputeCapability": "8.0.0",
        "driverVersion": "580.95.5",
        "cudaDriverVersion": "13.0.0",
        "memory": "80Gi",
        "instanceType": "Standard_NC96ads_A100_v4",
    },
    "l4": {
        "productName": "NVIDIA L4",
        "architecture": "Ada Lovelace",
        "cudaComputeCapability": "8.9.0",
        "driverVersion": "580.95.5",
        "cudaDriverVersion": "13.0.0",
        "memory": "23034Mi",
        "instanceType": "g2-standard-48",
    },
}


def det_uuid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def suffix(rng, n=5):
    return "".join(rng.choices("bcdfghjklmnpqrstvwxz2456789", k=n))


def node_selector_for(node):
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def make_node(name, rng, model=None, ready=True, zone="us-east-1a", gpus=0):
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": zone,
    }
    if model:
        labels["nvidia.com/gpu.present"] = "true"
        labels["nvidia.com/gpu.product"] = model["productName"].replace(" ", "-")
        labels["node.kubernetes.io/instance-type"] = model.get("instanceType", "gpu-node")
    condition = {
        "type": "Ready",
        "status": "True" if ready else "Unknown",
        "reason": "KubeletReady" if ready else "NodeStatusUnknown",
        "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
        "lastHeartbeatTime": TIMESTAMP,
        "lastTransitionTime": TIMESTAMP,
    }
    spec = {"providerID": f"devcluster://{name}"}
    if not ready:
        spec["taints"] = [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": TIMESTAMP},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": TIMESTAMP},
        ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": det_uuid(rng), "labels": labels, "creationTimestamp": TIMESTAMP},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "192", "memory": "2063731Mi", "pods": "110"},
            "allocatable": {"cpu": "191", "memory": "2030963Mi", "pods": "110"},
            "conditions": [condition],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.36.0",
                "containerRuntimeVersion": "containerd://2.1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Ubuntu 24.04 LTS",
                "kernelVersion": "6.8.0-1021",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kubeProxyVersion": "",
            },
        },
    }


def advertise(node, resources):
    """Extended resources a device plugin registered with the kubelet: node capacity and allocatable."""
    for key in ("capacity", "allocatable"):
        node["status"][key].update(resources)
    return node


HAMI_REGISTER = "hami.io/node-nvidia-register"


def hami_node(node, model, rng, gpus=4, split=10, memory=None, cores=100):
    """A node HAMi manages (hami-core mode): its device plugin registers `split` vGPU slots per GPU as
    nvidia.com/gpu and writes the v2.8+ JSON registration annotation (omitempty: index 0 and numa 0 left out)."""
    text = str(model["memory"])
    devmem = memory or (
        int(text[:-2]) * 1024 if text.endswith("Gi") else int(text[:-2]) if text.endswith("Mi") else int(text) // 2**20
    )
    name = model["productName"] if model["productName"].startswith("NVIDIA") else f"NVIDIA-{model['productName']}"
    devices = []
    for i in range(gpus):
        entry = {
            "id": f"GPU-{det_uuid(rng)}",
            "count": split,
            "devmem": devmem,
            "devcore": cores,
            "type": name,
            "mode": "hami-core",
            "health": True,
        }
        if i:
            entry["index"] = i
        if i >= gpus // 2 and gpus > 1:
            entry["numa"] = 1
        devices.append(entry)
    node["metadata"].setdefault("annotations", {}).update(
        {
            HAMI_REGISTER: json.dumps(devices, separators=(",", ":")),
            "hami.io/node-handshake": "Requesting_2026-01-05 08:00:00",
        }
    )
    node["metadata"]["labels"]["gpu"] = "on"
    return advertise(node, {"nvidia.com/gpu": str(gpus * split)})


HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"


def hami_assign(pod, node, used, annotation=None):
    """What HAMi's scheduler writes on a pod it placed on a HAMi node (pkg/scheduler/scheduler.go,
    pkg/device/nvidia/device.go): per container "UUID,NVIDIA,<MiB>,<cores>:" for each vGPU and ";"
    after each container; "-to-allocate" emptied as the device plugin allocated. GPUs are picked
    spread-style (least memory assigned first); `used` ({uuid: MiB}) carries the node's earlier pods.
    `annotation`: a given value instead (a scenario's malformed annotation)."""
    devices = json.loads(node["metadata"]["annotations"][HAMI_REGISTER])
    parts = []
    for c in pod["spec"]["containers"]:
        limits = (c.get("resources") or {}).get("limits") or {}
        n = int(limits.get("nvidia.com/gpu", "0"))
        chosen = sorted(devices, key=lambda d: (used.get(d["id"], 0), d.get("index", 0)))[:n]
        record = ""
        for d in chosen:
            if "nvidia.com/gpumem" in limits:
                mem = int(limits["nvidia.com/gpumem"])
            elif "nvidia.com/gpumem-percentage" in limits:
                mem = d["devmem"] * int(limits["nvidia.com/gpumem-percentage"]) // 100
            else:
                mem = d["devmem"]  # no memory limit: the whole GPU's memory
            used[d["id"]] = used.get(d["id"], 0) + mem
            record += f"{d['id']},NVIDIA,{mem},{int(limits.get('nvidia.com/gpucores', '0'))}:"
        parts.append(record + ";")
    value = "".join(parts) if annotation is None else annotation
    pod["metadata"].setdefault("annotations", {}).update(
        {
            "hami.io/vgpu-node": node["metadata"]["name"],
            "hami.io/vgpu-time": "1767600000",
            "hami.io/vgpu-devices-to-allocate": ";" * len(pod["spec"]["containers"]),
            HAMI_ALLOCATED: value,
            "hami.io/bind-phase": "success",
            "hami.io/bind-time": "1767600001",
        }
    )
    return pod


def _attr(value):
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def _gpu_common_attrs(model):
    return {
        "productName": {"string": model["productName"]},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": model["architecture"]},
        "cudaComputeCapability": {"version": model["cudaComputeCapability"]},
        "driverVersion": {"version": model["driverVersion"]},
        "cudaDriverVersion": {"version": model["cudaDriverVersion"]},
    }


def pcie_root(index):
    return f"pci0000:{0x10 + 0x10 * index:02x}"


def gpu_device(model, minor, rng):
    attrs = {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{det_uuid(rng)}"}, **_gpu_common_attrs(model)}
    if model.get("addressingMode"):
        attrs["addressingMode"] = {"string": model["addressingMode"]}
    attrs["resource.kubernetes.io/pciBusID"] = {"string": f"0000:{0x18 + 0x10 * minor:02x}:00.0"}
    attrs["resource.kubernetes.io/pcieRoot"] = {"string": pcie_root(minor)}
    attrs["resource.kubernetes.io/numaNode"] = {"int": 0 if minor < 4 else 1}
    return {"name": f"gpu-{minor}", "attributes": attrs, "capacity": {"memory": {"value": model["memory"]}}}


def nic_device(index, rng):
    return {
        "name": f"nic-{index}",
        "attributes": {
            "type": {"string": "rdma"},
            "model": {"string": "ConnectX-7"},
            "ifName": {"string": f"ibp{0x18 + 0x10 * index}s0"},
            "linkType": {"string": "infiniband"},
            "firmwareVersion": {"version": "28.43.1014"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x19 + 0x10 * index:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": pcie_root(index)},
            "resource.kubernetes.io/numaNode": {"int": 0 if index < 4 else 1},
        },
        "capacity": {"rdmaVFs": {"value": "16"}, "bandwidth": {"value": "400G"}},
    }


def mig_counter_set(minor, profiles):
    # The counters describe the whole physical GPU, whichever partitions are published.
    full = max(DEFAULT_MIG_PROFILES, key=lambda p: p["slices"])
    counters = {COUNTER_NAMES[k]: {"value": str(full[k])} for k in COUNTER_NAMES}
    for i in range(full["slices"]):
        counters[f"memory-slice-{i}"] = {"value": "1"}
    return {"name": f"gpu-{minor}-counter-set", "counters": counters}


def mig_devices(model, minor, parent, profiles, rng):
    """The partitions of one GPU as devices consuming its counter set (whole GPU consumes all)."""
    counter_set = mig_counter_set(minor, profiles)
    whole = dict(parent)
    whole["consumesCounters"] = [{"counterSet": counter_set["name"], "counters": counter_set["counters"]}]
    devices = [whole]
    for prof in profiles:
        for start in prof["placements"]:
            capacity = {k: {"value": str(prof[k])} for k in COUNTER_NAMES}
            counters = {COUNTER_NAMES[k]: {"value": str(prof[k])} for k in COUNTER_NAMES}
            for i in range(start, start + prof["slices"]):
                capacity[f"memorySlice{i}"] = {"value": "1"}
                counters[f"memory-slice-{i}"] = {"value": "1"}
            attrs = {
                "type": {"string": "mig"},
                "uuid": {"string": f"MIG-{det_uuid(rng)}"},
                "parentUUID": parent["attributes"]["uuid"],
                "profile": {"string": prof["profile"]},
                **_gpu_common_attrs(model),
                "resource.kubernetes.io/pciBusID": parent["attributes"]["resource.kubernetes.io/pciBusID"],
                "resource.kubernetes.io/pcieRoot": parent["attributes"]["resource.kubernetes.io/pcieRoot"],
            }
            devices.append(
                {
                    "name": f"gpu-{minor}-mig-{prof['profile'].replace('.', '')}-{prof['id']}-{start}",
                    "attributes": attrs,
                    "capacity": capacity,
                    "consumesCounters": [{"counterSet": counter_set["name"], "counters": counters}],
                }
            )
    return counter_set, devices


def _slice(node, driver, rng, pool_slices, node_uid=None, devices=None, counters=None, generation=1):
    spec = {
        "driver": driver,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": pool_slices},
    }
    if devices is not None:
        spec["devices"] = devices
    if counters is not None:
        spec["sharedCounters"] = counters
    meta = {"name": f"{node}-{driver}-{suffix(rng)}", "uid": det_uuid(rng), "creationTimestamp": TIMESTAMP}
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}


def gpu_slices(node, node_uid, model, gpus, rng, mig=None, profiles=None, generation=1):
    """The pool a node's GPU driver publishes: one slice, or for partitionable MIG one slice
    of counter sets plus device slices of at most 64 devices (counters and devices may not
    share a slice)."""
    whole = [gpu_device(model, minor, rng) for minor in range(gpus)]
    if mig != "partitionable":
        return [_slice(node, GPU_DRIVER, rng, 1, node_uid, devices=whole, generation=generation)]
    profiles = profiles or DEFAULT_MIG_PROFILES
    counter_sets, groups = [], []
    for minor, parent in enumerate(whole):
        counter_set, devices = mig_devices(model, minor, parent, profiles, rng)
        counter_sets.append(counter_set)
        if groups and len(groups[-1]) + len(devices) <= MAX_DEVICES_WITH_COUNTERS:
            groups[-1].extend(devices)
        else:
            groups.append(list(devices))
    counter_chunks = [counter_sets[i : i + 8] for i in range(0, len(counter_sets), 8)]
    total = len(counter_chunks) + len(groups)
    slices = [_slice(node, GPU_DRIVER, rng, total, node_uid, counters=c, generation=generation) for c in counter_chunks]
    slices += [_slice(node, GPU_DRIVER, rng, total, node_uid, devices=g, generation=generation) for g in groups]
    return slices


def nic_slices(node, node_uid, nics, rng):
    return [_slice(node, NIC_DRIVER, rng, 1, node_uid, devices=[nic_device(i, rng) for i in range(nics)])]


def device_class(name, cel, extended_resource_name=None, rng=None):
    spec = {"selectors": [{"cel": {"expression": cel}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    meta = {"name": name, "creationTimestamp": TIMESTAMP}
    if rng:
        meta["uid"] = det_uuid(rng)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": spec}


def claim_spec(requests, constraints=None):
    """A ResourceClaimSpec from compact request dicts {name, deviceClassName, count, ...}."""
    out = []
    for req in requests:
        exactly = {"deviceClassName": req["deviceClassName"]}
        mode = req.get("allocationMode", "ExactCount")
        exactly["allocationMode"] = mode
        if mode == "ExactCount":
            exactly["count"] = req.get("count", 1)
        if req.get("selectors"):
            exactly["selectors"] = [{"cel": {"expression": s}} for s in req["selectors"]]
        if req.get("adminAccess"):
            exactly["adminAccess"] = True
        if req.get("tolerations"):
            exactly["tolerations"] = req["tolerations"]
        out.append({"name": req["name"], "exactly": exactly})
    spec = {"devices": {"requests": out}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return spec


def make_template(namespace, name, spec, rng):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "uid": det_uuid(rng), "creationTimestamp": TIMESTAMP},
        "spec": {"spec": spec},
    }


def make_claim(namespace, name, spec, rng, owner_pod=None, pod_claim_name=None):
    meta = {"name": name, "namespace": namespace, "uid": det_uuid(rng), "creationTimestamp": TIMESTAMP}
    if owner_pod is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner_pod["metadata"]["name"],
                "uid": owner_pod["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        meta["annotations"] = {POD_CLAIM_NAME: pod_claim_name}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec, "status": {}}


def allocate(claim, node, results):
    """Record an allocation: results are dicts {request, driver, device[, pool, adminAccess]}."""
    claim["metadata"].setdefault("finalizers", [])
    if DELETE_PROTECTION not in claim["metadata"]["finalizers"]:
        claim["metadata"]["finalizers"].append(DELETE_PROTECTION)
    claim["status"]["allocation"] = {
        "devices": {"results": [{"pool": node, **r} for r in results]},
        "nodeSelector": node_selector_for(node),
        "allocationTimestamp": TIMESTAMP,
    }
    return claim


def reserve(claim, pod_name, pod_uid):
    claim["status"].setdefault("reservedFor", []).append({"resource": "pods", "name": pod_name, "uid": pod_uid})
    return claim


def device_statuses(claim, reports):
    """status.devices of an allocated claim, as its drivers write them: one entry per allocated
    device named in `reports` ({device: {ready, reason, message, data, networkData}}), with a
    Ready condition. The pool is the claim's node (the scenarios' pools are nodes)."""
    entries = []
    for result in claim["status"]["allocation"]["devices"]["results"]:
        report = reports.get(result["device"])
        if report is None:
            continue
        ready = report.get("ready", True)
        entry = {
            "driver": result["driver"],
            "pool": result["pool"],
            "device": result["device"],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": report.get("reason") or ("Prepared" if ready else "NotReady"),
                    "message": report.get("message") or "",
                    "lastTransitionTime": TIMESTAMP,
                }
            ],
        }
        for key in ("data", "networkData"):
            if report.get(key):
                entry[key] = report[key]
        entries.append(entry)
    if entries:
        claim["status"]["devices"] = entries
    return claim


def resource_id(driver, pool, device):
    """The kubelet's resource ID of a prepared device: the first CDI device ID the driver returned
    (the NVIDIA GPU driver's standard device, k8s.gpu.nvidia.com/device=<name>), else
    <driver>/<pool>/<device>: see docs/device-health.md."""
    if driver == GPU_DRIVER:
        return f"k8s.{driver}/device={device}"
    return f"{driver}/{pool}/{device}"


def report_health(pod, pod_claim_name, claim, health):
    """The kubelet's allocatedResourcesStatus for one of the pod's claims on its first container:
    `health` maps a device to "Healthy" / "Unhealthy" / "Unknown" or [health, message]."""
    resources = []
    for result in claim["status"]["allocation"]["devices"]["results"]:
        value = health.get(result["device"])
        if value is None:
            continue
        state, message = (value, "") if isinstance(value, str) else value
        one = {"resourceID": resource_id(result["driver"], result["pool"], result["device"]), "health": state}
        if message:
            one["message"] = message
        resources.append(one)
    statuses = pod["status"].get("containerStatuses") or []
    if resources and statuses:
        statuses[0].setdefault("allocatedResourcesStatus", []).append(
            {"name": f"claim:{pod_claim_name}", "resources": resources}
        )
    return pod


def make_pod(
    namespace,
    name,
    rng,
    node=None,
    phase="Running",
    pod_claims=(),
    labels=None,
    image="nvcr.io/nvidia/pytorch:25.01-py3",
):
    """pod_claims: dicts {name, resourceClaimName | resourceClaimTemplateName}."""
    uid = det_uuid(rng)
    spec = {
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": {"claims": [{"name": c["name"]} for c in pod_claims]} if pod_claims else {},
            }
        ],
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
    }
    if pod_claims:
        spec["resourceClaims"] = [dict(c) for c in pod_claims]
    if node:
        spec["nodeName"] = node
    scheduled = node is not None
    conditions = [{"type": "PodScheduled", "status": "True" if scheduled else "False", "lastTransitionTime": TIMESTAMP}]
    if phase == "Running":
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": TIMESTAMP})
    status = {"phase": phase, "conditions": conditions, "qosClass": "BestEffort"}
    if phase == "Running":
        status["startTime"] = TIMESTAMP
        status["containerStatuses"] = [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": TIMESTAMP}},
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": TIMESTAMP,
            "labels": labels or {"app": name.rsplit("-", 1)[0]},
        },
        "spec": spec,
        "status": status,
    }


def mark_unschedulable(pod, message):
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "PodScheduled":
            condition.update({"status": "False", "reason": "Unschedulable", "message": message})
    return pod


def driver_pod(node, rng, app=GPU_DRIVER_APP, namespace=GPU_DRIVER_NAMESPACE, daemonset_uid=None):
    pod = make_pod(
        namespace,
        f"{app}-kubelet-plugin-{suffix(rng)}",
        rng,
        node=node,
        phase="Running",
        labels={"app.kubernetes.io/name": app, "app.kubernetes.io/component": "kubelet-plugin"},
        image=f"registry.example.com/{app}:v25.8.0",
    )
    pod["spec"]["serviceAccountName"] = f"{app}-service-account"
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": f"{app}-kubelet-plugin",
            "uid": daemonset_uid or det_uuid(rng),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return pod


def driver_daemonset(app, namespace, uid, node_selector, pods, nodes):
    """The DaemonSet that owns a driver's kubelet-plugin pods, its status counted as the DaemonSet
    controller does: desired = nodes its nodeSelector picks, ready = its pods whose Ready is True."""
    labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/component": "kubelet-plugin"}
    desired = sum(1 for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in node_selector.items()))
    ready = sum(
        1
        for p in pods
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"{app}-kubelet-plugin",
            "namespace": namespace,
            "uid": uid,
            "labels": {"app.kubernetes.io/name": app},
            "generation": 1,
            "creationTimestamp": TIMESTAMP,
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": dict(node_selector),
                    "containers": [{"name": "plugin", "image": f"registry.example.com/{app}:v25.8.0"}],
                },
            },
            "updateStrategy": {"type": "RollingUpdate"},
        },
        "status": {
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": len(pods),
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": len(pods),
            "numberMisscheduled": 0,
            "observedGeneration": 1,
        },
    }


def namespace_obj(name, rng, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": det_uuid(rng),
            "creationTimestamp": TIMESTAMP,
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def scheduling_event(pod, message, rng):
    """The core/v1 Event the scheduler records for a pod it cannot place."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{rng.getrandbits(64):016x}",
            "namespace": meta["namespace"],
            "uid": det_uuid(rng),
            "creationTimestamp": TIMESTAMP,
        },
        "involvedObject": {
            "kind": "Pod",
            "apiVersion": "v1",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "reason": "FailedScheduling",
        "message": message,
        "type": "Warning",
        "count": 12,
        "firstTimestamp": TIMESTAMP,
        "lastTimestamp": TIMESTAMP,
        "source": {"component": "default-scheduler"},
        "reportingComponent": "default-scheduler",
    }
