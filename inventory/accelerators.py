"""GPUs the cluster serves without DRA: device plugins (extended resources) and HAMi vGPU shares.

Per node, from the mirrored Node (allocatable, labels, HAMi's registration annotation) and the pods'
footprints (claims.PodFootprint: every pod's summed requests, DRA or not), the sync keeps one
NodeAccelerator row per (node, source, resource, model): what the node offers and what its bound,
non-terminal pods request. The overview, map, nodes page, API and readiness checks read those rows.

Sources, never added to one another:
  device-plugin  accelerator-like extended resources (settings.GPUDASH_ACCELERATORS["RESOURCES"],
                 fnmatch patterns): kind "gpu" for whole devices, "partition" for MIG resources
                 (nvidia.com/mig-*: slices of a GPU, never whole GPUs), "share" for time-sliced
                 replicas (nvidia.com/gpu.shared)
  hami           a node HAMi manages (annotation hami.io/node-nvidia-register, see HAMi's
                 pkg/device/nvidia/device.go): its nvidia.com/gpu is vGPU slots (kind "share"; `gpus`
                 = the physical GPUs registered), nvidia.com/gpumem (MiB, kind "memory") and
                 nvidia.com/gpucores (percent, kind "cores") come from the registration
"""

import fnmatch
import json
from collections import defaultdict

from django.apps import apps as django_apps
from django.conf import settings
from django.db.models import Exists, OuterRef

DEVICE_PLUGIN, HAMI = "device-plugin", "hami"
SOURCES = ("dra", DEVICE_PLUGIN, HAMI)
SOURCE_LABELS = {"dra": "DRA devices", DEVICE_PLUGIN: "device-plugin GPUs", HAMI: "HAMi vGPU shares"}

DEFAULTS = {
    # Extended resources that look like accelerators (fnmatch patterns).
    "RESOURCES": ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*", "amd.com/gpu", "habana.ai/gaudi",
                  "gpu.intel.com/i915", "gpu.intel.com/xe", "aws.amazon.com/neuron", "google.com/tpu"],
    "PARTITION_RESOURCES": ["*/mig-*"],
    "SHARE_RESOURCES": ["*.shared"],
    # Node labels naming the GPU model (GPU feature discovery); "-" read as " " (NVIDIA-H100-80GB-HBM3).
    "MODEL_LABELS": ["nvidia.com/gpu.product", "amd.com/gpu.product-name", "gpu.intel.com/product"],
    "HAMI_REGISTER_ANNOTATIONS": {"hami.io/node-nvidia-register": "nvidia.com"},
    "HAMI_RESOURCES": {"count": "gpu", "memory": "gpumem", "cores": "gpucores"},
}


def config():
    return {**DEFAULTS, **getattr(settings, "GPUDASH_ACCELERATORS", {})}


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _amount(value):
    from claims.allocator.quantity import parse_quantity

    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        return 0


def resource_kind(name, cfg=None):
    """gpu | partition | share for an accelerator extended resource, None for other resources."""
    cfg = cfg or config()
    if not _matches(name, cfg["RESOURCES"]):
        return None
    if _matches(name, cfg["PARTITION_RESOURCES"]):
        return "partition"
    if _matches(name, cfg["SHARE_RESOURCES"]):
        return "share"
    return "gpu"


def hami_devices(value):
    """HAMi's device registration: [{"id", "count", "devmem", "devcore", "type", "health"}]. Accepts the
    JSON list of v2.8+ and the older "UUID,count,devmem,devcore,type,numa,health[,index,mode]:" records;
    whatever cannot be read is skipped."""
    value = (value or "").strip()
    out = []
    if value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            return []
        for d in items if isinstance(items, list) else ():
            if isinstance(d, dict) and d.get("id"):
                out.append({"id": str(d["id"]), "count": _int(d.get("count")), "devmem": _int(d.get("devmem")),
                            "devcore": _int(d.get("devcore")), "type": str(d.get("type") or ""), "health": bool(d.get("health"))})
        return out
    for record in value.split(":"):
        parts = record.split(",")
        if len(parts) in (7, 9) and parts[0]:
            out.append({"id": parts[0], "count": _int(parts[1]), "devmem": _int(parts[2]), "devcore": _int(parts[3]),
                        "type": parts[4], "health": parts[6].strip().lower() == "true"})
    return out


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def node_model(labels, cfg):
    for label in cfg["MODEL_LABELS"]:
        if labels.get(label):
            return str(labels[label]).replace("-", " ")
    return ""


def rows_for_node(raw, requested, cfg=None):
    """[(source, resource, kind, model, allocatable, requested, gpus)] for one Node's raw object and
    its pods' summed requests {resource: amount}."""
    cfg = cfg or config()
    meta, status = raw.get("metadata") or {}, raw.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    allocatable = status.get("allocatable") if isinstance(status.get("allocatable"), dict) else {}
    out = []
    hami_domains = set()
    for annotation, domain in cfg["HAMI_REGISTER_ANNOTATIONS"].items():
        devices = hami_devices(annotations.get(annotation))
        if not devices:
            continue
        hami_domains.add(domain)
        names = {k: f"{domain}/{v}" for k, v in cfg["HAMI_RESOURCES"].items()}
        by_type = defaultdict(list)
        for d in devices:
            by_type[d["type"]].append(d)
        # Pods' requests cannot be told apart by GPU type: they count on the first (usually only) type.
        for i, (model, devs) in enumerate(sorted(by_type.items())):
            used = (lambda name: requested.get(name, 0) if i == 0 else 0)
            slots = sum(d["count"] for d in devs)
            out.append((HAMI, names["count"], "share", model, slots, used(names["count"]), len(devs)))
            out.append((HAMI, names["memory"], "memory", model, sum(d["devmem"] for d in devs), used(names["memory"]), len(devs)))
            out.append((HAMI, names["cores"], "cores", model, sum(d["devcore"] for d in devs), used(names["cores"]), len(devs)))
    model = node_model(labels, cfg)
    names = set(allocatable) | {n for n in requested if resource_kind(n, cfg)}
    for name in sorted(names):
        if any(name.startswith(f"{d}/") for d in hami_domains):
            continue  # HAMi's slots and limits, not whole GPUs
        kind = resource_kind(name, cfg)
        if kind is None:
            continue
        amount = _amount(allocatable.get(name, 0))
        used = int(requested.get(name, 0))
        if amount or used:
            out.append((DEVICE_PLUGIN, name, kind, model, amount, used, amount if kind == "gpu" else 0))
    return out


def _requested_on(cluster_id, node_names):
    """{node: {resource: amount}} summed over the bound, non-terminal pods' footprints."""
    footprint = django_apps.get_model("claims", "PodFootprint")
    out = defaultdict(lambda: defaultdict(int))
    names = sorted(node_names)
    for start in range(0, len(names), 500):
        rows = footprint.objects.on_nodes().filter(cluster_id=cluster_id, node_name__in=names[start : start + 500])
        for node, raw in rows.values_list("node_name", "raw").iterator(chunk_size=2000):
            for name, value in ((raw or {}).get("requests") or {}).items():
                if isinstance(value, (int, float)) and ("/" in name):
                    out[node][name] += int(value)
    return out


def refresh_nodes(cluster_id, node_names, raws=None):
    """Rewrite the NodeAccelerator rows of these nodes.

    `raws` ({name: raw Node}, from a batch of Node events; a name without one was deleted): every named
    node is looked at. Without it (a batch of pod events) only nodes that already have rows are: a node
    offering accelerators has rows since its last Node event, and the pods of the others do not count
    here. Nodes with nothing to count cost one indexed lookup."""
    model = django_apps.get_model("inventory", "NodeAccelerator")
    node_model_ = django_apps.get_model("inventory", "Node")
    node_names = {n for n in node_names if n}
    if not node_names:
        return
    cfg = config()
    with_rows = set(model.objects.filter(cluster_id=cluster_id, node_name__in=node_names).values_list("node_name", flat=True).distinct())
    if raws is None:
        candidates = with_rows
        raws = dict(node_model_.objects.filter(cluster_id=cluster_id, namespace="", name__in=candidates).values_list("name", "raw")) if candidates else {}
    else:
        candidates = {n for n in node_names if n in with_rows or _offers_accelerators(raws.get(n), cfg)}
    if not candidates:
        return
    requested = _requested_on(cluster_id, {n for n in candidates if n in raws})
    rows = []
    for name in sorted(candidates):
        raw = raws.get(name)
        if raw is None:
            continue
        for source, resource, kind, mdl, alloc, used, gpus in rows_for_node(raw, requested.get(name, {}), cfg):
            rows.append(model(cluster_id=cluster_id, node_name=name, source=source, resource=resource[:253], kind=kind,
                              model=mdl, allocatable=alloc, requested=used, gpus=gpus))
    model.objects.filter(cluster_id=cluster_id, node_name__in=candidates).delete()
    model.objects.bulk_create(rows, batch_size=1000)


def _offers_accelerators(raw, cfg):
    if not raw:
        return False
    meta, status = raw.get("metadata") or {}, raw.get("status") or {}
    if any((meta.get("annotations") or {}).get(a) for a in cfg["HAMI_REGISTER_ANNOTATIONS"]):
        return True
    allocatable = status.get("allocatable") if isinstance(status.get("allocatable"), dict) else {}
    return any(resource_kind(n, cfg) for n in allocatable)


def nodes_of_pods(cluster_id, ops):
    """The nodes a batch of pod events touches: where the pods were (their stored footprints) and where
    they are now (apply.apply_batch's ops: (event, key, fields, raw))."""
    footprint = django_apps.get_model("claims", "PodFootprint")
    keys = {key for _e, key, _f, _r in ops}
    nodes = {((raw or {}).get("spec") or {}).get("nodeName") or "" for _e, _k, _f, raw in ops}
    for ns in {k[0] for k in keys}:
        names = sorted(k[1] for k in keys if k[0] == ns)
        for start in range(0, len(names), 500):
            nodes.update(footprint.objects.filter(cluster_id=cluster_id, namespace=ns, name__in=names[start : start + 500]).values_list("node_name", flat=True))
    nodes.discard("")
    return nodes


def refresh_cluster(cluster_id):
    """Every node of the cluster (after a relist of nodes or pods)."""
    node_model_ = django_apps.get_model("inventory", "Node")
    model = django_apps.get_model("inventory", "NodeAccelerator")
    gone = set(model.objects.filter(cluster_id=cluster_id).values_list("node_name", flat=True))
    batch = {}
    for name, raw in node_model_.objects.filter(cluster_id=cluster_id, namespace="").values_list("name", "raw").iterator(chunk_size=500):
        gone.discard(name)
        batch[name] = raw
        if len(batch) >= 500:
            refresh_nodes(cluster_id, set(batch), raws=batch)
            batch = {}
    refresh_nodes(cluster_id, set(batch) | gone, raws=batch)


# --- reading ----------------------------------------------------------------------------------------


def accelerator_rows(cluster_ids=None, nodes=None):
    """NodeAccelerator rows of mirrored nodes (a deleted node's rows never count)."""
    model = django_apps.get_model("inventory", "NodeAccelerator")
    node_model_ = django_apps.get_model("inventory", "Node")
    rows = model.objects.filter(Exists(node_model_.objects.filter(cluster_id=OuterRef("cluster_id"), namespace="", name=OuterRef("node_name"))))
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if nodes is not None:
        rows = rows.filter(node_name__in={n for _, n in nodes})
    return rows


def source_totals(cluster_ids=None, nodes=None, snapshot=None):
    """Totals per source and per model, the DRA side from the device summary.

    {"dra": {"gpus", "free", "partitions", "nodes", "models": {model: {"gpus", "free", "partitions"}}},
     "device-plugin": {"gpus", "free", "partitions", "partitions_free", "shares", "nodes", "models": {...}},
     "hami": {"gpus", "shares", "shares_used", "memory", "memory_used", "nodes", "models": {...}}}"""
    from . import fleet

    snap = snapshot or fleet.FleetSnapshot(cluster_ids, nodes=nodes)
    dra = {"gpus": 0, "free": 0, "partitions": 0, "nodes": 0, "models": {}}
    for g in snap.kind_groups():
        if not g["gpus"] and g["kind"] != "partition":
            continue
        m = dra["models"].setdefault(g["model"] or "(no model attribute)", {"gpus": 0, "free": 0, "partitions": 0})
        m["gpus"] += g["gpus"] or 0
        m["free"] += g["gpus_free"] or 0
        if g["kind"] == "partition":
            m["partitions"] += g["n"]
    for m in dra["models"].values():
        for k in ("gpus", "free", "partitions"):
            dra[k] += m[k]
    dra["nodes"] = snap.gpu_node_count()
    dp = {"gpus": 0, "free": 0, "partitions": 0, "partitions_free": 0, "shares": 0, "nodes": 0, "models": {}}
    hami = {"gpus": 0, "shares": 0, "shares_used": 0, "memory": 0, "memory_used": 0, "nodes": 0, "models": {}}
    dp_nodes, hami_nodes = set(), set()
    for cid, node, source, kind, mdl, alloc, used, gpus in accelerator_rows(cluster_ids, nodes).values_list(
        "cluster_id", "node_name", "source", "kind", "model", "allocatable", "requested", "gpus"
    ):
        label = mdl or "(model unknown)"
        if source == DEVICE_PLUGIN:
            dp_nodes.add((cid, node))
            m = dp["models"].setdefault(label, {"gpus": 0, "free": 0, "partitions": 0, "partitions_free": 0, "shares": 0})
            if kind == "gpu":
                m["gpus"] += alloc
                m["free"] += max(alloc - used, 0)
            elif kind == "partition":
                m["partitions"] += alloc
                m["partitions_free"] += max(alloc - used, 0)
            else:
                m["shares"] += alloc
        else:
            hami_nodes.add((cid, node))
            m = hami["models"].setdefault(label, {"gpus": 0, "shares": 0, "shares_used": 0, "memory": 0, "memory_used": 0})
            if kind == "share":
                m["gpus"] += gpus
                m["shares"] += alloc
                m["shares_used"] += used
            elif kind == "memory":
                m["memory"] += alloc
                m["memory_used"] += used
    for totals, keys in ((dp, ("gpus", "free", "partitions", "partitions_free", "shares")), (hami, ("gpus", "shares", "shares_used", "memory", "memory_used"))):
        for m in totals["models"].values():
            for k in keys:
                totals[k] += m[k]
    dp["nodes"], hami["nodes"] = len(dp_nodes), len(hami_nodes)
    return {"dra": dra, DEVICE_PLUGIN: dp, HAMI: hami}


def node_sources(cluster_ids=None, nodes=None):
    """(cluster_id, node) -> {"device_plugin": {"gpus", "free", "partitions", "resources", "model"},
    "hami": {"gpus", "shares", "shares_used", "model"}} (keys templates can read)."""
    out = defaultdict(dict)
    for cid, node, source, resource, kind, mdl, alloc, used, gpus in accelerator_rows(cluster_ids, nodes).values_list(
        "cluster_id", "node_name", "source", "resource", "kind", "model", "allocatable", "requested", "gpus"
    ):
        if source == DEVICE_PLUGIN:
            d = out[(cid, node)].setdefault("device_plugin", {"gpus": 0, "free": 0, "partitions": 0, "resources": [], "model": mdl})
            d["resources"].append(resource)
            if kind == "gpu":
                d["gpus"] += alloc
                d["free"] += max(alloc - used, 0)
            elif kind == "partition":
                d["partitions"] += alloc
        elif kind == "share":
            d = out[(cid, node)].setdefault("hami", {"gpus": 0, "shares": 0, "shares_used": 0, "model": mdl})
            d["gpus"] += gpus
            d["shares"] += alloc
            d["shares_used"] += used
    return out
