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
from django.db.models import Aggregate, Exists, Func, JSONField, OuterRef, Subquery
from django.db.models.functions import JSONObject

from mirror.accelerators import DEFAULTS, config, hami_pod_devices, has_pod_assignment, pod_assignment  # noqa: F401  (this module's names too)

DEVICE_PLUGIN, HAMI = "device-plugin", "hami"
SOURCES = ("dra", DEVICE_PLUGIN, HAMI)
SOURCE_LABELS = {"dra": "DRA devices", DEVICE_PLUGIN: "device-plugin GPUs", HAMI: "HAMi vGPU shares"}


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _amount(value):
    from dra.quantity import parse_quantity

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
    value = value.strip() if isinstance(value, str) else ""
    out = []
    if value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            return []
        for d in items if isinstance(items, list) else ():
            if isinstance(d, dict) and d.get("id"):
                out.append(
                    {
                        "id": str(d["id"]),
                        "count": _int(d.get("count")),
                        "devmem": _int(d.get("devmem")),
                        "devcore": _int(d.get("devcore")),
                        "type": str(d.get("type") or ""),
                        "health": bool(d.get("health")),
                        "index": _int(d.get("index")),
                    }
                )
        return out
    for record in value.split(":"):
        parts = record.split(",")
        if len(parts) in (7, 9) and parts[0]:
            out.append(
                {
                    "id": parts[0],
                    "count": _int(parts[1]),
                    "devmem": _int(parts[2]),
                    "devcore": _int(parts[3]),
                    "type": parts[4],
                    "health": parts[6].strip().lower() == "true",
                    "index": _int(parts[7]) if len(parts) == 9 else len(out),
                }
            )
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
    its pods' summed requests {resource: amount} (no HAMi assignments: see node_accelerators)."""
    return [
        (r["source"], r["resource"], r["kind"], r["model"], r["allocatable"], r["requested"], r["gpus"])
        for r in node_accelerators(raw, requested, cfg)
    ]


def _hami_usage(devices, pods, requested, names):
    """Per registered GPU, what HAMi assigned to the node's pods; the requests that still count as
    requests (pods without a readable assignment); the problems to show.

    `pods`: [(namespace/name, assignment, requests)] of the node's bound, non-terminal pods whose
    assignment names this domain."""
    usage = {d["id"]: {"slots_used": 0, "memory_used": 0, "cores_used": 0, "pods": []} for d in devices}
    fallback = {n: int(requested.get(n, 0)) for n in names.values()}
    problems, unregistered = [], {"slots_used": 0, "memory_used": 0, "cores_used": 0}
    for pod, assignment, pod_requests in pods:
        who = {"pod": pod, "namespace": pod.split("/", 1)[0], "name": pod.split("/", 1)[-1]}
        if assignment.get("problem"):
            # The assignment cannot be trusted: the pod's requests count instead, and the page says why.
            problems.append({**who, "text": assignment["problem"]})
            continue
        for n in names.values():
            fallback[n] -= int(pod_requests.get(n, 0))
        for dev in assignment["devices"]:
            u = usage.get(dev["uuid"])
            if u is None:
                problems.append({**who, "text": f"assigned GPU {dev['uuid']}, which the node does not register"})
                u = unregistered
            else:
                u["pods"].append({**who, "container": dev["container"], "memory": dev["memory"], "cores": dev["cores"]})
            u["slots_used"] += 1
            u["memory_used"] += dev["memory"]
            u["cores_used"] += dev["cores"]
    fallback = {n: max(v, 0) for n, v in fallback.items()}
    detail = [
        {
            "id": d["id"],
            "index": d.get("index", 0),
            "model": d["type"],
            "health": d["health"],
            "slots": d["count"],
            "memory": d["devmem"],
            "cores": d["devcore"],
            **usage[d["id"]],
        }
        for d in sorted(devices, key=lambda d: (d.get("index", 0), d["id"]))
    ]
    return detail, fallback, problems, unregistered


def node_accelerators(raw, requested, cfg=None, hami_pods=()):
    """The NodeAccelerator rows of one Node (raw object), as dicts {source, resource, kind, model,
    allocatable, requested, gpus, detail}.

    `requested`: the summed requests {resource: amount} of its bound, non-terminal pods. `hami_pods`:
    [(namespace/name, claims.Pod.hami assignment, that pod's requests)] for those of them HAMi
    scheduled: on a HAMi node their use comes from what HAMi assigned (which GPU, how much memory and
    compute), not from what they asked for. The node's first HAMi row carries `detail`: its registered
    GPUs with their assigned pods, and the assignments that could not be read."""
    cfg = cfg or config()
    meta, status = raw.get("metadata") or {}, raw.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    allocatable = status.get("allocatable") if isinstance(status.get("allocatable"), dict) else {}
    out = []
    hami_domains = set()

    def row(source, resource, kind, model, alloc, used, gpus, detail=None):
        out.append(
            {
                "source": source,
                "resource": resource,
                "kind": kind,
                "model": model,
                "allocatable": alloc,
                "requested": used,
                "gpus": gpus,
                "detail": detail or {},
            }
        )

    for annotation, domain in cfg["HAMI_REGISTER_ANNOTATIONS"].items():
        devices = hami_devices(annotations.get(annotation))
        if not devices:
            continue
        hami_domains.add(domain)
        names = {k: f"{domain}/{v}" for k, v in cfg["HAMI_RESOURCES"].items()}
        pods = [p for p in hami_pods if p[1].get("domain") == domain]
        detail, fallback, problems, unregistered = _hami_usage(devices, pods, requested, names)
        by_model = defaultdict(list)
        for d in detail:
            by_model[d["model"]].append(d)
        # Requests without an assignment cannot be told apart by GPU type: they count on the first
        # (usually only) type, as do assignments to GPUs the node does not register.
        for i, (model, devs) in enumerate(sorted(by_model.items())):
            extra = (lambda key, name: fallback[names[name]] + unregistered[key]) if i == 0 else (lambda key, name: 0)
            row(
                HAMI,
                names["count"],
                "share",
                model,
                sum(d["slots"] for d in devs),
                sum(d["slots_used"] for d in devs) + extra("slots_used", "count"),
                len(devs),
                {"devices": detail, "problems": problems} if i == 0 else None,
            )
            row(
                HAMI,
                names["memory"],
                "memory",
                model,
                sum(d["memory"] for d in devs),
                sum(d["memory_used"] for d in devs) + extra("memory_used", "memory"),
                len(devs),
            )
            row(
                HAMI,
                names["cores"],
                "cores",
                model,
                sum(d["cores"] for d in devs),
                sum(d["cores_used"] for d in devs) + extra("cores_used", "cores"),
                len(devs),
            )
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
            row(DEVICE_PLUGIN, name, kind, model, amount, used, amount if kind == "gpu" else 0)
    return out


def _requested_on(cluster_id, node_names, pods_of_interest=frozenset()):
    """{node: {resource: amount}} summed over the bound, non-terminal pods' footprints, and the
    requests of the pods named in `pods_of_interest` ({(namespace, name): {resource: amount}})."""
    footprint = django_apps.get_model("claims", "PodFootprint")
    out = defaultdict(lambda: defaultdict(int))
    per_pod = {}
    names = sorted(node_names)
    for start in range(0, len(names), 500):
        rows = footprint.objects.on_nodes().filter(cluster_id=cluster_id, node_name__in=names[start : start + 500])
        for ns, pod, node, raw in rows.values_list("namespace", "name", "node_name", "raw").iterator(chunk_size=2000):
            requests = {
                name: int(value)
                for name, value in ((raw or {}).get("requests") or {}).items()
                if isinstance(value, (int, float)) and ("/" in name)
            }
            for name, value in requests.items():
                out[node][name] += value
            if (ns, pod) in pods_of_interest:
                per_pod[(ns, pod)] = requests
    return out, per_pod


def _hami_pods_on(cluster_id, node_names):
    """{node: [((namespace, name), assignment)]}: the bound, non-terminal mirrored pods HAMi assigned
    devices to (claims.Pod.hami, written from the pod's annotation by the sync)."""
    pod_model = django_apps.get_model("claims", "Pod")
    out = defaultdict(list)
    names = sorted(node_names)
    for start in range(0, len(names), 500):
        rows = (
            pod_model.objects.filter(
                cluster_id=cluster_id, node_name__in=names[start : start + 500], hami__has_key="devices"
            )
            .exclude(phase__in=("Succeeded", "Failed"))
            .order_by("namespace", "name")
        )
        for ns, pod, node, hami in rows.values_list("namespace", "name", "node_name", "hami").iterator(chunk_size=2000):
            if isinstance(hami, dict):
                out[node].append(((ns, pod), hami))
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
    with_rows = set(
        model.objects.filter(cluster_id=cluster_id, node_name__in=node_names)
        .values_list("node_name", flat=True)
        .distinct()
    )
    if raws is None:
        candidates = with_rows
        raws = (
            dict(
                node_model_.objects.filter(cluster_id=cluster_id, namespace="", name__in=candidates).values_list(
                    "name", "raw"
                )
            )
            if candidates
            else {}
        )
    else:
        candidates = {n for n in node_names if n in with_rows or _offers_accelerators(raws.get(n), cfg)}
    if not candidates:
        return
    present = {n for n in candidates if n in raws}
    hami_nodes = {n for n in present if _has_hami_register(raws[n], cfg)}
    hami_pods = _hami_pods_on(cluster_id, hami_nodes) if hami_nodes else {}
    requested, per_pod = _requested_on(cluster_id, present, {key for pods in hami_pods.values() for key, _a in pods})
    rows = []
    for name in sorted(candidates):
        raw = raws.get(name)
        if raw is None:
            continue
        pods = [
            (f"{key[0]}/{key[1]}", assignment, per_pod.get(key, {}))
            for key, assignment in hami_pods.get(name, ())
            if key in per_pod
        ]  # a pod the footprints do not count on this node is not on it
        for r in node_accelerators(raw, requested.get(name, {}), cfg, pods):
            rows.append(
                model(
                    cluster_id=cluster_id,
                    node_name=name,
                    source=r["source"],
                    resource=r["resource"][:253],
                    kind=r["kind"],
                    model=r["model"],
                    allocatable=r["allocatable"],
                    requested=r["requested"],
                    gpus=r["gpus"],
                    detail=r["detail"],
                )
            )
    model.objects.filter(cluster_id=cluster_id, node_name__in=candidates).delete()
    model.objects.bulk_create(rows, batch_size=1000)


def _has_hami_register(raw, cfg):
    annotations = ((raw or {}).get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, dict) and any(annotations.get(a) for a in cfg["HAMI_REGISTER_ANNOTATIONS"])


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
            nodes.update(
                footprint.objects.filter(
                    cluster_id=cluster_id, namespace=ns, name__in=names[start : start + 500]
                ).values_list("node_name", flat=True)
            )
    nodes.discard("")
    return nodes


def refresh_cluster(cluster_id):
    """Every node of the cluster (after a relist of nodes or pods)."""
    node_model_ = django_apps.get_model("inventory", "Node")
    model = django_apps.get_model("inventory", "NodeAccelerator")
    gone = set(model.objects.filter(cluster_id=cluster_id).values_list("node_name", flat=True))
    batch = {}
    for name, raw in (
        node_model_.objects.filter(cluster_id=cluster_id, namespace="")
        .values_list("name", "raw")
        .iterator(chunk_size=500)
    ):
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
    rows = model.objects.filter(
        Exists(node_model_.objects.filter(cluster_id=OuterRef("cluster_id"), namespace="", name=OuterRef("node_name")))
    )
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if nodes is not None:
        rows = rows.filter(node_name__in={n for _, n in nodes})
    return rows


def node_sources(cluster_ids=None, nodes=None):
    """(cluster_id, node) -> {"device_plugin": {"gpus", "free", "partitions", "resources", "model"},
    "hami": {"gpus", "shares", "shares_used", "memory", "memory_used", "cores", "cores_used", "model",
    "devices", "problems"}} (keys templates can read)."""
    out = defaultdict(dict)
    for cid, node, source, resource, kind, mdl, alloc, used, gpus, detail in (
        accelerator_rows(cluster_ids, nodes)
        .order_by("id")
        .values_list(
            "cluster_id",
            "node_name",
            "source",
            "resource",
            "kind",
            "model",
            "allocatable",
            "requested",
            "gpus",
            "detail",
        )
    ):
        if source == DEVICE_PLUGIN:
            d = out[(cid, node)].setdefault(
                "device_plugin", {"gpus": 0, "free": 0, "partitions": 0, "resources": [], "model": mdl, "items": []}
            )
            d["resources"].append(resource)
            d["items"].append({"resource": resource, "kind": kind, "allocatable": alloc, "requested": used})
            if kind == "gpu":
                d["gpus"] += alloc
                d["free"] += max(alloc - used, 0)
            elif kind == "partition":
                d["partitions"] += alloc
        else:
            hami_add(out[(cid, node)].setdefault("hami", hami_empty(mdl)), kind, alloc, used, gpus, detail)
    return out


def nodes_outside_dra(cluster_ids=None, search=""):
    """(cluster_id, node) of the nodes with device-plugin or HAMi GPUs and no DRA row on the fleet map
    (no per-node device summary), in name order."""
    summary = django_apps.get_model("inventory", "NodeDeviceSummary")
    rows = accelerator_rows(cluster_ids).exclude(
        Exists(summary.objects.filter(cluster_id=OuterRef("cluster_id"), map_key=OuterRef("node_name")))
    )
    if search:
        rows = rows.filter(node_name__contains=search)
    return rows.order_by("cluster_id", "node_name").values_list("cluster_id", "node_name").distinct()


def hami_empty(model=""):
    return {
        "gpus": 0,
        "shares": 0,
        "shares_used": 0,
        "memory": 0,
        "memory_used": 0,
        "cores": 0,
        "cores_used": 0,
        "model": model,
        "devices": [],
        "problems": [],
    }


def hami_add(d, kind, alloc, used, gpus, detail):
    """Fold one HAMi NodeAccelerator row into a node's HAMi summary (hami_empty)."""
    if kind == "share":
        d["gpus"] += gpus
        d["shares"] += alloc
        d["shares_used"] += used
    elif kind in ("memory", "cores"):
        d[kind] += alloc
        d[f"{kind}_used"] += used
    if isinstance(detail, str):  # a JSON column read through a JSON aggregate on SQLite
        detail = json.loads(detail or "{}")
    d["devices"].extend((detail or {}).get("devices") or ())
    d["problems"].extend((detail or {}).get("problems") or ())
    return d


class _JSONRows(Aggregate):
    """The grouped rows as one JSON array: jsonb_agg on PostgreSQL, json_group_array on SQLite."""

    function = "JSON_GROUP_ARRAY"
    output_field = JSONField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="JSONB_AGG", **extra_context)


class _JSONObject(JSONObject):
    def as_sqlite(self, compiler, connection, **extra_context):
        # Skips Django's one-time probe for JSON1 (three queries on a connection's first use): the
        # JSONFields of every model need JSON1 anyway.
        return Func.as_sql(self, compiler, connection, **extra_context)


ROW_FIELDS = ("source", "resource", "kind", "model", "allocatable", "requested", "gpus", "detail")


def rows_json(cluster_ref="cluster_id", node_ref="name"):
    """A per-node subquery: the node's NodeAccelerator rows as a JSON list (None without rows). Lets a
    list of nodes carry them in its own query, no query per row or per page."""
    model = django_apps.get_model("inventory", "NodeAccelerator")
    rows = (
        model.objects.filter(cluster_id=OuterRef(cluster_ref), node_name=OuterRef(node_ref))
        .order_by()
        .values("node_name")
    )
    return Subquery(
        rows.annotate(j=_JSONRows(_JSONObject(**{f: f for f in ROW_FIELDS}))).values("j"), output_field=JSONField()
    )


def scoped_hami(hami, visible):
    """A node's HAMi usage (hami_empty's shape) as a user who sees the namespaces `visible` (None: all)
    may read it. A pod of another namespace is "a pod in another namespace" as a whole, as the pages
    show other namespaces' claims: no name, namespace or container, only the memory and compute it
    holds (so a share is still seen as taken). Every surface (API, node page and its live fragment)
    reads HAMi's pods through this."""
    if hami is None:
        return None

    def entry(item):
        if visible is None or item.get("namespace") in visible:
            return {**item, "visible": True}
        kept = {k: item[k] for k in ("memory", "cores", "text") if k in item}
        return {**kept, "pod": "", "namespace": "", "name": "", "container": None, "visible": False}

    return {
        **hami,
        "devices": [{**d, "pods": [entry(p) for p in d["pods"]]} for d in hami["devices"]],
        "problems": [entry(p) for p in hami["problems"]],
    }


def summarize_rows(rows):
    """The parsed rows_json() of one node -> (rows without detail, sorted; device-plugin summary or None;
    HAMi summary (hami_empty) or None)."""
    if isinstance(rows, str):
        rows = json.loads(rows)
    rows = sorted(rows or (), key=lambda r: (r["source"], r["resource"], r["model"]))
    dp = hami = None
    for r in rows:
        if r["source"] == DEVICE_PLUGIN:
            dp = dp or {"gpus": 0, "free": 0, "partitions": 0, "partitions_free": 0, "shares": 0}
            free = max(r["allocatable"] - r["requested"], 0)
            if r["kind"] == "gpu":
                dp["gpus"] += r["allocatable"]
                dp["free"] += free
            elif r["kind"] == "partition":
                dp["partitions"] += r["allocatable"]
                dp["partitions_free"] += free
            else:
                dp["shares"] += r["allocatable"]
        else:
            hami = hami_add(
                hami or hami_empty(r["model"]), r["kind"], r["allocatable"], r["requested"], r["gpus"], r.get("detail")
            )
    return [{k: r[k] for k in ROW_FIELDS if k != "detail"} for r in rows], dp, hami
