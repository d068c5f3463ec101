"""Device states across the fleet, and the aggregates the overview and the fleet map show.

The state vocabulary lives in mirror/states.py, how a state is decided in inventory/devicestate.py
(stored columns kept current by the watchers, plus SQL for stuck claims and NotReady nodes); who holds
a device comes from the claims side (mirror/holdings.py). The overview and the map read the per-node
summary the watchers keep with those columns (NodeDeviceSummary, inventory/summary.py) and apply the
read-time parts to it: the node's readiness (a join on Node) and the devices held by stuck claims (a
short indexed list). Device rows are read only for the map's page and the lists.
"""

import functools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Exists, F, Min, OuterRef, Q, Sum
from django.utils.translation import gettext_lazy as _

from mirror import holdings, roles
from mirror.states import (  # noqa: F401  (the pages read them here)
    ADMIN,
    ALLOCATED,
    DISPLAY_STATES,
    FLAG_LABELS,
    FLAGS,
    FREE,
    PARTIAL,
    STATE_LABELS,
    STATES,
    STUCK,
    TAINTED,
    UNHEALTHY,
    state_label,
)

from . import accelerators, devicestate, summary
from .devicekinds import GPU, OTHER, PARTITION
from .models import Device, Node, NodeDeviceSummary
from .summary import natural_key  # noqa: F401  (the pages sort device names with it)

BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def blocking_taints(taints):
    return [t for t in taints or [] if t.get("effect") in BLOCKING_TAINT_EFFECTS]


@dataclass
class Holder:
    """A claim holding a device, as far as the viewing user may see it."""

    namespace: str
    name: str
    uid: str
    admin_access: bool
    stuck: bool
    shared: bool = False
    visible: bool = True


@dataclass
class DeviceState:
    state: str
    flags: frozenset = frozenset()
    holders: list = field(default_factory=list)

    @property
    def label(self):
        return state_label(self.state)


@functools.lru_cache(maxsize=4096)  # device names repeat on every node (gpu-0 ... gpu-7)
def _name_order(name):
    return tuple(natural_key(name))


def _with_state(queryset, not_ready=None):
    """Device rows with their state and NotReady flag; `not_ready`: devicestate.not_ready_nodes() when read already."""
    not_ready = devicestate.node_not_ready() if not_ready is None else not_ready
    return queryset.annotate(st=devicestate.state_expression(not_ready), unhealthy=not_ready)


# What a summary row is keyed by (the stuck devices are counted per the same key).
_SUMMARY_KEY = summary.KEY


def _stuck_devices(cluster_ids, nodes=None):
    """{summary key: {stored state: devices}} of the devices held by a claim with an active finding.

    Findings come and go without the device's pool changing, so the summary does not hold them:
    this reads the (few) devices whose holder is stuck, through the index on held_by_claim_id.
    """
    devices = Device.objects.filter(held_by_claim_id__in=devicestate.stuck_claim_ids())
    if cluster_ids is not None:
        devices = devices.filter(cluster_id__in=cluster_ids)
    if nodes is not None:
        devices = devices.filter(node_name__in={n for _, n in nodes})
    rows = (
        devices.order_by()
        .annotate(model=summary.MODEL)
        .values_list(*_SUMMARY_KEY, "allocation_state")
        .annotate(n=Count("id"))
    )
    out = defaultdict(Counter)
    for *key, state, n in rows:
        if nodes is None or (key[0], key[3]) in nodes:
            out[tuple(key)][state] += n
    return out


def _sums():
    """Sums of summary rows, the node's readiness applied: `free` only on Ready nodes, `unready_free`
    (the "node not ready" state) and `on_unready` (the flag) on NotReady ones."""
    unready = Q(unready=True)
    return {
        "n": Sum("n_total"),
        "tainted": Sum("n_tainted"),
        "admin_watched": Sum("n_admin_watched"),
        "on_unready": Sum("n_total", filter=unready),
        "free": Sum("n_free", filter=~unready),
        "unready_free": Sum("n_free", filter=unready),
        "tainted_unheld": Sum("n_tainted_unheld"),
        "allocated": Sum("n_allocated"),
        "admin": Sum("n_admin"),
        "partial": Sum("n_partial"),
        "gpus": Sum("n_gpus"),
        "gpus_free": Sum("n_gpus_free", filter=~unready),
    }


def _decide(row, stuck):
    """States of a group of summary rows (devicestate's order): stuck first, then the stored state,
    then tainted, then node not ready for what would otherwise be free. Zero counts are left out."""
    stuck = stuck or {}
    states = {
        STUCK: sum(stuck.values()),
        ALLOCATED: row["allocated"] - stuck.get(ALLOCATED, 0),
        ADMIN: row["admin"] - stuck.get(ADMIN, 0),
        PARTIAL: row["partial"] - stuck.get(PARTIAL, 0),
        TAINTED: row["tainted_unheld"],
        UNHEALTHY: row["unready_free"] or 0,
        FREE: row["free"] or 0,
    }
    return Counter({s: n for s, n in states.items() if n})


class FleetSnapshot:
    """Device counts of some clusters by driver, model, node and state, from SQL sums over the
    per-node summary (one row per node and driver: a few thousand rows for 5,000 nodes)."""

    def __init__(self, cluster_ids=None, user=None, nodes=None):
        """`nodes`: only these (cluster_id, node name) pairs (the node list's page)."""
        self.cluster_ids = cluster_ids
        self.user = user
        self.nodes = nodes
        self.stuck = _stuck_devices(cluster_ids, nodes)
        self.not_ready = devicestate.not_ready_nodes(cluster_ids)  # read once per snapshot, every summary read tests it
        self._by_model = self._by_kind = self._by_node_kind = None

    def _summary(self):
        # Placeholder rows of pools not publishing now count nothing (unpublished_devices reads them).
        rows = NodeDeviceSummary.objects.exclude(n_total=0).annotate(unready=self.not_ready)
        if self.cluster_ids is not None:
            rows = rows.filter(cluster_id__in=self.cluster_ids)
        if self.nodes is not None:
            rows = rows.filter(node_name__in={n for _, n in self.nodes})
        return rows

    def grouped(self, *keys):
        """Summary sums per `keys` (summary columns), each row with its `states` decided."""
        positions = [_SUMMARY_KEY.index(k) for k in keys]
        stuck = defaultdict(Counter)
        for key, counts in self.stuck.items():
            stuck[tuple(key[i] for i in positions)].update(counts)
        rows = list(self._summary().values(*keys).annotate(**_sums()).order_by())
        for row in rows:
            row["states"] = _decide(row, stuck.get(tuple(row[k] for k in keys)))
        return rows

    def kind_groups(self):
        """grouped("driver", "model", "kind"), read once: the overview's totals, models, kinds and
        sources all come from it."""
        if self._by_kind is None:
            self._by_kind = self.grouped("driver", "model", "kind")
        return self._by_kind

    def model_groups(self):
        """Per (driver, model): kind_groups summed over the kinds (states decided per kind add up)."""
        if self._by_model is None:
            merged = {}
            for g in self.kind_groups():
                m = merged.setdefault(
                    (g["driver"], g["model"]), {"driver": g["driver"], "model": g["model"], "states": Counter()}
                )
                for k, v in g.items():
                    if k == "states":
                        m["states"].update(v)
                    elif k not in ("driver", "model", "kind"):
                        m[k] = (m.get(k) or 0) + (v or 0)
            self._by_model = list(merged.values())
        return self._by_model

    @property
    def total(self):
        return sum(g["n"] for g in self.model_groups())

    # -- overview -------------------------------------------------------------------------------
    def totals(self):
        """Counts for the overview and the map, from one pass so both pages always agree.

        `by_state` counts each device once, by its primary state (they add up to `total`): what the map
        legend and the overview tiles show. `flags` counts devices with a secondary flag whatever their
        primary state (a tainted device that is still allocated counts in allocated *and* in tainted).
        The flat keys are kept for callers of the summary: `allocated` = held by ordinary claims
        (allocated + stuck), `tainted`/`unhealthy` = flag counts.
        """
        c, flags = Counter(), Counter()
        for g in self.model_groups():
            c.update(g["states"])
            flags[TAINTED] += g["tainted"]
            flags[ADMIN] += g["admin_watched"]
            flags[UNHEALTHY] += g["on_unready"] or 0
        return {
            "total": self.total,
            "allocated": c[ALLOCATED] + c[STUCK],
            "admin": c[ADMIN],
            "partial": c[PARTIAL],
            "free": c[FREE],
            "tainted": flags[TAINTED],
            "unhealthy": flags[UNHEALTHY],
            "stuck": c[STUCK],
            "by_state": {s: c[s] for s in STATES},
            "flags": {f: flags[f] for f in FLAGS},
        }

    def by_model(self):
        """Rows (driver, model, counts per state), biggest first."""
        rows = []
        for g in self.model_groups():
            c = g["states"]
            held = c[ALLOCATED] + c[STUCK] + c[ADMIN]
            rows.append(
                {
                    "driver": g["driver"],
                    "model": g["model"] or "(no model attribute)",
                    "total": g["n"],
                    "counts": c,
                    "used_pct": round(100 * held / g["n"]) if g["n"] else 0,
                }
            )
        return sorted(rows, key=lambda r: (-r["total"], r["driver"], r["model"]))

    def fragmentation(self):
        """Per driver: nodes whose devices are all free (can take a whole-node claim) vs free devices scattered.

        A whole-node claim needs every device of the driver on one node; `histogram` counts nodes by
        how many free devices they have, so "8 free GPUs on 3 nodes" and "1 free GPU on 40 nodes" read apart.
        """
        # Free = unheld, untainted, on a Ready node: stuck claims only ever hold devices, so the
        # stuck list does not change these numbers.
        per_node = (
            self._summary()
            .exclude(node_name="")
            .values_list("driver", "cluster_id", "node_name")
            .annotate(total=Sum("n_total"), free=Sum("n_free", filter=Q(unready=False)))
            .order_by()
        )
        out = defaultdict(
            lambda: {"nodes": 0, "whole_free_nodes": 0, "free_devices": 0, "scattered_free": 0, "histogram": Counter()}
        )
        for driver, _cluster, _node, total, free in per_node:
            free = free or 0
            row = out[driver]
            row["nodes"] += 1
            row["free_devices"] += free
            row["histogram"][free] += 1
            if free == total:
                row["whole_free_nodes"] += 1
            else:
                row["scattered_free"] += free
        return [
            {"driver": driver, **row, "histogram": sorted(row["histogram"].items(), reverse=True)}
            for driver, row in sorted(out.items())
        ]

    # -- device kinds (inventory/devicekinds.py) -----------------------------------------------
    def kind_totals(self):
        """Physical GPUs (a whole GPU and its partitions are one) and how many are free (no device of
        theirs held or tainted, node Ready); partitions and other devices by their own state."""
        out = Counter()
        for g in self.kind_groups():
            out["gpus"] += g["gpus"] or 0
            out["gpus_free"] += g["gpus_free"] or 0
            if g["kind"] == GPU:
                out["gpu_devices"] += g["n"]
            elif g["kind"] == PARTITION:
                out["partitions"] += g["n"]
                out["partitions_free"] += g["states"][FREE]
            else:
                out["other"] += g["n"]
                out["other_free"] += g["states"][FREE]
        capacity = self.partition_capacity().get((), {"profiles": {}, "stranded": 0})
        return {
            **{
                k: out[k]
                for k in ("gpus", "gpus_free", "gpu_devices", "partitions", "partitions_free", "other", "other_free")
            },
            "partition_profiles": capacity["profiles"],
            "gpus_stranded": capacity["stranded"],
        }

    def partition_capacity(self, *keys, nodes=None):
        """Partition-aware capacity (dra/partitions.py, stored by summary.rebuild) summed per `keys`
        (summary columns): {key tuple: {"profiles": {profile: {"free", "total"}}, "stranded": n}}.
        `free`: how many more partitions of the profile one claim could get now (a count per
        profile: the profiles of one GPU are alternatives, never added up); `total`: the same with
        nothing allocated; `stranded`: whole GPUs partly used by partitions, with room left for
        partitions only. NotReady nodes serve nothing: their free and stranded count 0."""
        memo = self.__dict__.setdefault("_partition_memo", {})
        if nodes is not None:  # a page of nodes: read just those, not kept
            rows = self._summary().filter(node_name__in={n for _, n in nodes})
            found = self._partition_rows(rows, keys)
            return (
                {k: v for k, v in found.items() if (k[0], k[1]) in nodes}
                if keys[:2]
                == (
                    "cluster_id",
                    "node_name",
                )
                else found
            )
        if keys in memo:
            return memo[keys]
        if keys == ():  # the fleet's totals: summed from the per-model figures when those were read
            by_model = memo.get(("model",))
            if by_model is not None:
                memo[keys] = _summed(list(by_model.values()))
                return memo[keys]
        memo[keys] = self._partition_rows(self._summary(), keys)
        return memo[keys]

    def _partition_rows(self, rows, keys):
        rows = rows.filter(Q(kind=PARTITION) | Q(n_gpus_stranded__gt=0))
        out = {}
        for *key, profiles, stranded, unready in rows.values_list(
            *keys, "partition_free", "n_gpus_stranded", "unready"
        ).order_by():
            entry = out.setdefault(tuple(key), {"profiles": {}, "stranded": 0})
            if not unready:
                entry["stranded"] += stranded
            for profile, (free, total) in (profiles or {}).items():
                p = entry["profiles"].setdefault(profile, {"free": 0, "total": 0})
                p["free"] += 0 if unready else free
                p["total"] += total
        for entry in out.values():
            entry["profiles"] = dict(sorted(entry["profiles"].items(), key=lambda kv: _profile_order(kv[0])))
        return out

    def gpu_models(self):
        """Rows per (driver, model): for GPUs the physical GPUs, free ones, partitions and free
        partitions; for other devices (kind "other") devices and free ones. GPUs first, biggest first."""
        rows = defaultdict(Counter)
        for g in self.kind_groups():
            r = rows[(OTHER if g["kind"] == OTHER else GPU, g["driver"], g["model"])]
            r["gpus"] += g["gpus"] or 0
            r["gpus_free"] += g["gpus_free"] or 0
            if g["kind"] == PARTITION:
                r["partitions"] += g["n"]
                r["partitions_free"] += g["states"][FREE]
            elif g["kind"] == OTHER:
                r["devices"] += g["n"]
                r["free"] += g["states"][FREE]
        out = [
            {
                "kind": k,
                "driver": d,
                "model": m or "(no model attribute)",
                **{c: n[c] for c in ("gpus", "gpus_free", "partitions", "partitions_free", "devices", "free")},
            }
            for (k, d, m), n in rows.items()
        ]
        return sorted(out, key=lambda r: (r["kind"] != GPU, -(r["gpus"] or r["devices"]), r["driver"], r["model"]))

    def free_gpu_histogram(self):
        """The fragmentation answer: per GPU model, how many nodes have k free whole GPUs, for k from
        the most GPUs a node of that model has down to 0 ("is there a free 8-GPU node?" is the top bar).
        [{"model", "nodes", "max_free", "bars": [{"free": k, "nodes": n, "pct": bar width}]}]"""
        per_node = (
            self._summary()
            .exclude(node_name="")
            .filter(n_gpus__gt=0)
            .values_list("model", "cluster_id", "node_name")
            .annotate(gpus=Sum("n_gpus"), free=Sum("n_gpus_free", filter=Q(unready=False)))
            .order_by()
        )
        models = defaultdict(lambda: {"nodes": 0, "most": 0, "counts": Counter()})
        for model, _cluster, _node, gpus, free in per_node:
            m = models[model or "(no model attribute)"]
            m["nodes"] += 1
            m["most"] = max(m["most"], gpus or 0)
            m["counts"][free or 0] += 1
        out = []
        for model, m in sorted(models.items(), key=lambda kv: (-kv[1]["nodes"], kv[0])):
            peak = max(m["counts"].values())
            bars = [
                {"free": k, "nodes": m["counts"][k], "pct": round(100 * m["counts"][k] / peak)}
                for k in range(m["most"], -1, -1)
            ]
            out.append({"model": model, "nodes": m["nodes"], "max_free": max(m["counts"]), "bars": bars})
        return out

    def gpu_node_count(self):
        """Nodes with GPUs or partitions published through DRA."""
        rows = self._summary().exclude(node_name="").filter(Q(n_gpus__gt=0) | Q(kind=PARTITION))
        return rows.values("cluster_id", "node_name").distinct().order_by().count()

    def gpu_model_names(self):
        """The GPU models present (choices of the "≥ N free GPUs of model X" filters)."""
        return sorted(
            {m for m in self._summary().filter(n_gpus__gt=0).values_list("model", flat=True).distinct().order_by() if m}
        )

    def node_gpu_counts(self):
        """(cluster_id, node) -> Counter {"gpus", "gpus_free", "partitions", "other", "stranded"}, plus
        "profiles" (partition_capacity) where the node publishes partitions."""
        out = defaultdict(Counter)
        for (cid, node), cap in self.partition_capacity("cluster_id", "node_name").items():
            if node and (self.nodes is None or (cid, node) in self.nodes):
                out[(cid, node)]["stranded"] = cap["stranded"]
                if cap["profiles"]:
                    out[(cid, node)]["profiles"] = cap["profiles"]
        for g in self.node_kind_groups():
            if not g["node_name"] or (self.nodes is not None and (g["cluster_id"], g["node_name"]) not in self.nodes):
                continue
            c = out[(g["cluster_id"], g["node_name"])]
            c["gpus"] += g["gpus"] or 0
            c["gpus_free"] += g["gpus_free"] or 0
            if g["kind"] == PARTITION:
                c["partitions"] += g["n"]
            elif g["kind"] == OTHER:
                c["other"] += g["n"]
        return out

    def unpublished(self):
        """What pools last published while they publish nothing now (unpublished_devices)."""
        return unpublished_devices(self.cluster_ids, self.nodes)

    def node_counts(self):
        """(cluster_id, node) -> Counter of states plus "total"."""
        out = defaultdict(Counter)
        for g in self.node_kind_groups():  # states decided per kind add up per node
            if g["node_name"] and (self.nodes is None or (g["cluster_id"], g["node_name"]) in self.nodes):
                out[(g["cluster_id"], g["node_name"])].update(g["states"], total=g["n"])
        return out

    def node_kind_groups(self):
        """grouped("cluster_id", "node_name", "kind"), read once for node_counts and node_gpu_counts."""
        if self._by_node_kind is None:
            self._by_node_kind = self.grouped("cluster_id", "node_name", "kind")
        return self._by_node_kind


def partition_rows_json(cluster_ref="cluster_id", node_ref="name"):
    """A per-node subquery: the node's summary rows with partition-aware figures as a JSON list
    [{"profiles", "stranded"}] (None without such rows), so a list of nodes carries them in its own
    query; fold_partition_rows sums them as partition_capacity does."""
    from django.db.models import Func, JSONField, Subquery

    from .accelerators import _JSONObject, _JSONRows

    class _Nested(Func):
        """A JSON column as a value inside a built object: as is on PostgreSQL, json() on SQLite."""

        function = "JSON"
        output_field = JSONField()

        def as_postgresql(self, compiler, connection, **extra_context):
            return compiler.compile(self.source_expressions[0])

    rows = (
        NodeDeviceSummary.objects.filter(cluster_id=OuterRef(cluster_ref), node_name=OuterRef(node_ref))
        .filter(Q(kind=PARTITION) | Q(n_gpus_stranded__gt=0))
        .exclude(n_total=0)
        .order_by()
        .values("node_name")
    )
    obj = _JSONObject(profiles=_Nested(F("partition_free")), stranded=F("n_gpus_stranded"))
    return Subquery(rows.annotate(j=_JSONRows(obj)).values("j"), output_field=JSONField())


def fold_partition_rows(rows, ready=True):
    """partition_capacity's figures for one node from its partition_rows_json(): None without rows."""
    if isinstance(rows, str):
        rows = json.loads(rows)
    if not rows:
        return None
    out = {"profiles": {}, "stranded": 0}
    for row in rows:
        profiles = row.get("profiles") or {}
        if isinstance(profiles, str):
            profiles = json.loads(profiles)
        out["stranded"] += (row.get("stranded") or 0) if ready else 0
        for profile, (free, total) in profiles.items():
            p = out["profiles"].setdefault(profile, {"free": 0, "total": 0})
            p["free"] += free if ready else 0
            p["total"] += total
    out["profiles"] = dict(sorted(out["profiles"].items(), key=lambda kv: _profile_order(kv[0])))
    return out


def _summed(entries):
    """partition_capacity entries added up into one ({(): entry})."""
    total = {"profiles": {}, "stranded": 0}
    for entry in entries:
        total["stranded"] += entry["stranded"]
        for profile, c in entry["profiles"].items():
            p = total["profiles"].setdefault(profile, {"free": 0, "total": 0})
            p["free"] += c["free"]
            p["total"] += c["total"]
    total["profiles"] = dict(sorted(total["profiles"].items(), key=lambda kv: _profile_order(kv[0])))
    return {(): total} if entries else {}


def _profile_order(profile):
    """MIG profiles smallest first ("1g.10gb" < "2g.20gb" < "7g.80gb"), other names after, by name."""
    head = profile.split("g.", 1)[0]
    return (0, int(head), profile) if head.isdigit() else (1, 0, profile)


def unpublished_devices(cluster_ids=None, nodes=None):
    """What node-local pools last published while they publish nothing now (placeholder summary rows,
    summary.rebuild), while their Node is still mirrored (a deleted node is gone, not in an outage):
    {"devices", "nodes", "rows": {(cluster_id, node): {"since", "devices", "drivers"}}}."""
    rows = NodeDeviceSummary.objects.filter(n_unpublished__gt=0).filter(_node_exists())
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if nodes is not None:
        rows = rows.filter(node_name__in={n for _, n in nodes})
    out = {"devices": 0, "nodes": 0, "rows": {}}
    for cid, node, driver, since, n in rows.values_list(
        "cluster_id", "node_name", "driver", "unpublished_since", "n_unpublished"
    ):
        if nodes is not None and (cid, node) not in nodes:
            continue
        r = out["rows"].setdefault((cid, node), {"since": since, "devices": 0, "drivers": set()})
        r["since"] = min(r["since"], since) if since and r["since"] else (since or r["since"])
        r["devices"] += n
        r["drivers"].add(driver)
        out["devices"] += n
    out["nodes"] = len(out["rows"])
    for r in out["rows"].values():
        r["drivers"] = sorted(r["drivers"])
    return out


class FleetMap:
    """The fleet map's rows: one per (cluster, node), devices without a node grouped by pool.

    Rows come from the summary grouped per node, filtered, ordered (natural order via `sort_key`) and
    paged in SQL; only the shown page gets its states decided and its device cells loaded.
    """

    def __init__(self, snapshot, state="", search="", gpu=None, unpublished=False):
        """`snapshot`: the FleetSnapshot of the same clusters (its totals head the page; its stuck devices are reused)."""
        self.snapshot = snapshot
        self.cluster_ids = snapshot.cluster_ids
        self.user = snapshot.user
        self.not_ready = snapshot.not_ready
        self.stuck = defaultdict(Counter)  # (cluster_id, map_key) -> stored state -> devices held by stuck claims
        for (cluster_id, _driver, pool, node_name, *_model_kind), counts in snapshot.stuck.items():
            self.stuck[(cluster_id, node_name or f"pool:{pool}")].update(counts)
        self.rows = self._filtered(self._grouped(), state, search)
        if unpublished:  # nodes whose driver publishes nothing now
            self.rows = self.rows.filter(unpublished__gt=0)
        if gpu:  # "nodes with ≥ N free GPUs of model X" (gpu_filter): node rows only
            self.rows = self.rows.filter(
                Exists(
                    Node.objects.filter(
                        cluster_id=OuterRef("cluster_id"), namespace="", name=OuterRef("map_key")
                    ).filter(node_gpu_q(gpu))
                )
            )

    def _grouped(self):
        rows = NodeDeviceSummary.objects.all()
        if self.cluster_ids is not None:
            rows = rows.filter(cluster_id__in=self.cluster_ids)
        return (
            rows.annotate(unhealthy=self.not_ready, node_exists=_node_exists())
            .values("cluster_id", "map_key", "sort_key", "unhealthy", "node_exists")
            .annotate(
                total=Sum("n_total"),
                free=Sum("n_free"),
                tainted_unheld=Sum("n_tainted_unheld"),
                allocated=Sum("n_allocated"),
                admin=Sum("n_admin"),
                partial=Sum("n_partial"),
                gpus=Sum("n_gpus"),
                gpus_free=Sum("n_gpus_free"),
                unpublished=Sum("n_unpublished"),
                unpublished_since=Min("unpublished_since"),
            )
            # A node whose driver stopped publishing keeps its row (summary placeholders) while it exists.
            .filter(Q(total__gt=0) | Q(node_exists=True))
            .order_by("cluster_id", "sort_key")
        )

    def _keys_q(self, keys):
        by_cluster = defaultdict(set)
        for cluster_id, map_key in keys:
            by_cluster[cluster_id].add(map_key)
        q = Q(pk__in=[])
        for cluster_id, map_keys in by_cluster.items():
            q |= Q(cluster_id=cluster_id, map_key__in=sorted(map_keys))
        return q

    def _filtered(self, rows, state, search):
        """ "Nodes with a device in state X" and a node name search, both in SQL."""
        if search:
            rows = rows.filter(map_key__contains=search)
        if not state:
            return rows
        if state == STUCK:
            return rows.filter(self._keys_q(self.stuck))
        if state == UNHEALTHY:
            return rows.filter(unhealthy=True)
        if state == FREE:
            return rows.filter(free__gt=0, unhealthy=False)
        if state == TAINTED:
            return rows.filter(tainted_unheld__gt=0)
        if state in (ALLOCATED, ADMIN, PARTIAL):
            # Rows whose devices in this stored state are all held by stuck claims show as stuck only.
            maybe_all_stuck = {k for k, c in self.stuck.items() if c[state]}
            all_stuck = {
                (r["cluster_id"], r["map_key"])
                for r in rows.filter(self._keys_q(maybe_all_stuck))
                if r[state] == self.stuck[(r["cluster_id"], r["map_key"])][state]
            }
            return rows.filter(**{f"{state}__gt": 0}).exclude(self._keys_q(all_stuck))
        raise ValueError(f"unknown device state {state!r}; expected one of {', '.join(STATES)}")

    def decide(self, rows):
        """Turn a page of grouped rows into map rows: states decided, device cells loaded."""
        out = []
        for r in rows:
            unready = r["unhealthy"]
            r = r | {"free": 0 if unready else r["free"], "unready_free": r["free"] if unready else 0}
            out.append(
                {
                    "cluster_id": r["cluster_id"],
                    "node": r["map_key"],
                    "unhealthy": unready,
                    "devices": [],
                    "states": _decide(r, self.stuck.get((r["cluster_id"], r["map_key"]))),
                    "gpus": r["gpus"] or 0,
                    "gpus_free": 0 if unready else (r["gpus_free"] or 0),
                    "unpublished": r["unpublished"] or 0,
                    "unpublished_since": r["unpublished_since"],
                }
            )
        return self.attach_partitions(self.attach_devices(out))

    def attach_partitions(self, rows):
        """Each map row's partition-aware figures (FleetSnapshot.partition_capacity), None without
        partitions: one query for the page's nodes."""
        nodes = {(r["cluster_id"], r["node"]) for r in rows if not r["node"].startswith("pool:")}
        found = self.snapshot.partition_capacity("cluster_id", "node_name", nodes=nodes) if nodes else {}
        for r in rows:
            r["partitions"] = found.get((r["cluster_id"], r["node"]))
        return rows

    def attach_devices(self, rows):
        """Load the devices (with state and holder) of these map rows: one query for the page."""
        by_cluster = defaultdict(lambda: (set(), set()))
        for r in rows:
            nodes, pools = by_cluster[r["cluster_id"]]
            (pools.add(r["node"][5:]) if r["node"].startswith("pool:") else nodes.add(r["node"]))
        if not by_cluster:
            return rows
        where = Q()
        for cid, (nodes, pools) in by_cluster.items():
            where |= Q(cluster_id=cid, node_name__in=nodes) | Q(cluster_id=cid, node_name="", pool__in=pools)
        scope = roles.visible_namespaces(self.user) if self.user is not None else None
        fields = (
            "id",
            "cluster_id",
            "driver",
            "pool",
            "name",
            "node_name",
            "tainted",
            "admin_watched",
            "allocation_state",
            "held_by_namespace",
            "held_by_name",
            "st",
            "unhealthy",
            "model",
            "kind",
            "parent",
        )
        index = {(r["cluster_id"], r["node"]): r for r in rows}
        for values in (
            _with_state(Device.objects.filter(where).order_by(), self.not_ready)
            .annotate(model=summary.MODEL)
            .values_list(*fields)
        ):
            d = dict(zip(fields, values))
            holders = []
            if d["held_by_name"]:
                ns = d["held_by_namespace"]
                holders.append(
                    Holder(
                        ns,
                        d["held_by_name"],
                        "",
                        d["allocation_state"] == ADMIN,
                        d["st"] == STUCK,
                        shared=d["allocation_state"] == PARTIAL,
                        visible=scope is None or ns in scope,
                    )
                )
            d["st"] = DeviceState(d["st"], _flags(d["tainted"], d["unhealthy"], d["admin_watched"]), holders)
            row = index.get((d["cluster_id"], d["node_name"] or f"pool:{d['pool']}"))
            if row is not None:
                row["devices"].append(d)
        for r in rows:
            r["devices"] = under_parents(
                r["devices"], lambda d: d["driver"], lambda d: d["name"], lambda d: d["kind"], lambda d: d["parent"]
            )
        return rows


def _node_exists():
    return Exists(Node.objects.filter(cluster_id=OuterRef("cluster_id"), namespace="", name=OuterRef("node_name")))


def under_parents(devices, driver, name, kind, parent):
    """Devices in display order, each GPU's partitions right after it (marked `is_partition`, with
    `parent_name`): by driver, then whole GPUs and other devices by name. Partitions whose GPU is not
    published follow the first of their siblings' places (by name)."""
    heads = {}
    for d in devices:
        if kind(d) == "gpu":
            heads.setdefault((driver(d), parent(d)), name(d))
    out = []
    for d in devices:
        if kind(d) == "partition":
            head = heads.get((driver(d), parent(d)))
            order = (driver(d), _name_order(head or name(d)), 1, _name_order(name(d)))
        else:
            head = None
            order = (driver(d), _name_order(name(d)), 0, ())
        out.append((order, d, head))
    out.sort(key=lambda t: t[0])
    result = []
    for _order, d, head in out:
        is_part = kind(d) == "partition"
        if isinstance(d, dict):
            d["is_partition"], d["parent_name"] = is_part, head
        else:
            d.is_partition, d.parent_name = is_part, head
        result.append(d)
    return result


@functools.cache  # eight combinations; the map asks for one per cell
def _flags(tainted, unhealthy, admin):
    return frozenset(f for f, on in ((TAINTED, tainted), (UNHEALTHY, unhealthy), (ADMIN, admin)) if on)


def states_for(devices, cluster_ids=None, user=None):
    """Attach `st` (DeviceState, with every holder) to Device model instances (lists and detail pages)."""
    devices = list(devices)
    if not devices:
        return devices
    ids = [d.id for d in devices]
    state = {
        pk: (st, unhealthy, admin)
        for pk, st, unhealthy, admin in _with_state(Device.objects.filter(id__in=ids)).values_list(
            "id", "st", "unhealthy", "admin_watched"
        )
    }
    keys = {(d.cluster_id, d.driver, d.pool, d.name) for d in devices}
    scope = roles.visible_namespaces(user) if user is not None else None
    holders = defaultdict(list)
    for h in holdings.holdings(keys):  # the claims side's allocation results (mirror/holdings.py)
        holders[(h.cluster_id, h.driver, h.pool, h.device)].append(
            Holder(
                h.namespace,
                h.name,
                h.uid,
                h.admin_access,
                h.stuck,
                shared=h.shared,
                visible=scope is None or h.namespace in scope,
            )
        )
    for dev in devices:
        st, unhealthy, admin = state.get(dev.id, (FREE, False, False))
        dev.st = DeviceState(
            st, _flags(dev.tainted, unhealthy, admin), holders.get((dev.cluster_id, dev.driver, dev.pool, dev.name), [])
        )
    return devices


def template_sources(snap):
    """source_totals with keys templates can read (device_plugin)."""
    sources = source_totals(snapshot=snap)
    return {
        "dra": sources["dra"],
        "device_plugin": sources[accelerators.DEVICE_PLUGIN],
        "hami": sources[accelerators.HAMI],
    }


def kinds_context(snap):
    """What the overview shows of device kinds and sources: physical-GPU totals, GPUs per model and
    source side by side, the free-GPU histogram per model, devices not published now."""
    sources = source_totals(snapshot=snap)  # reads partition_capacity("model"): kind_totals sums it
    models = sorted(
        set(sources["dra"]["models"])
        | set(sources[accelerators.DEVICE_PLUGIN]["models"])
        | set(sources[accelerators.HAMI]["models"])
    )
    # Template-friendly keys (device_plugin): templates cannot read "device-plugin".
    keys = {"dra": "dra", "device_plugin": accelerators.DEVICE_PLUGIN, "hami": accelerators.HAMI}
    by_model = [{"model": m, **{k: sources[key]["models"].get(m) for k, key in keys.items()}} for m in models]
    return {
        "kinds": snap.kind_totals(),
        "sources": {k: sources[key] for k, key in keys.items()},
        "source_rows": by_model,
        "has_other_sources": bool(sources[accelerators.DEVICE_PLUGIN]["nodes"] or sources[accelerators.HAMI]["nodes"]),
        "gpu_histogram": snap.free_gpu_histogram(),
        "unpublished": snap.unpublished(),
        "other_models": [r for r in snap.gpu_models() if r["kind"] == OTHER],
    }


def gpu_filter(params):
    """The "nodes with ≥ N free GPUs of model X" filter from query parameters `min_free_gpus`,
    `gpu_model` (optional) and `gpu_source` (dra, device-plugin or any; default any): (filter, error)."""
    raw, model = (params.get("min_free_gpus") or "").strip(), (params.get("gpu_model") or "").strip()
    source = (params.get("gpu_source") or "any").strip()
    if not raw and not model:
        return None, ""
    if source not in ("any", "dra", "device-plugin"):
        return None, f"Unknown GPU source {source!r}: use any, dra or device-plugin."
    try:
        n = int(raw or "1")
    except ValueError:
        return None, f"Free GPUs must be a whole number, not {raw!r}."
    if n < 0 or n > 100000:
        return None, f"Free GPUs must be between 0 and 100000, not {n}."
    return {"min_free": n, "model": model, "source": source}, ""


def node_gpu_q(flt):
    """A Q on Node: nodes with at least flt["min_free"] free whole GPUs (of flt["model"] when given)
    from DRA (physical GPUs; NotReady nodes have none free) or a device plugin (allocatable minus what
    bound pods request), as flt["source"] says; "any" = either source has them, so a node served by
    both is never counted twice. With min_free 0: nodes that have such GPUs at all."""
    from .models import NodeAccelerator

    q = Q(pk__in=[])
    if flt["source"] in ("any", "dra"):
        dra = NodeDeviceSummary.objects.filter(cluster_id=OuterRef("cluster_id"), node_name=OuterRef("name")).exclude(
            n_total=0
        )
        if flt["model"]:
            dra = dra.filter(model=flt["model"])
        dra = (
            dra.values("cluster_id", "node_name")
            .annotate(gpus=Sum("n_gpus"), free=Sum("n_gpus_free"))
            .filter(gpus__gt=0, free__gte=flt["min_free"])
        )
        q |= Exists(dra) & (Q(ready=True) | Q(ready__isnull=True) if flt["min_free"] else Q())
    if flt["source"] in ("any", "device-plugin"):
        dp = NodeAccelerator.objects.filter(
            cluster_id=OuterRef("cluster_id"), node_name=OuterRef("name"), source="device-plugin", kind="gpu"
        )
        if flt["model"]:
            dp = dp.filter(model__iexact=flt["model"])
        dp = (
            dp.values("cluster_id", "node_name")
            .annotate(gpus=Sum("allocatable"), free=Sum(F("allocatable") - F("requested")))
            .filter(gpus__gt=0, free__gte=flt["min_free"])
        )
        q |= Exists(dp)
    return q


def gpu_filter_models(cluster_ids=None):
    """GPU models the filter offers: DRA models with physical GPUs, device-plugin models of whole GPUs."""
    from .models import NodeAccelerator

    dra = NodeDeviceSummary.objects.filter(n_gpus__gt=0)
    dp = NodeAccelerator.objects.filter(source="device-plugin", kind="gpu", allocatable__gt=0)
    if cluster_ids is not None:
        dra, dp = dra.filter(cluster_id__in=cluster_ids), dp.filter(cluster_id__in=cluster_ids)
    models = set(dra.values_list("model", flat=True).distinct().order_by()) | set(
        dp.values_list("model", flat=True).distinct().order_by()
    )
    return sorted(m for m in models if m)


def gpu_query(params):
    """The GPU filter's query string (for pager and colour links), '' without one."""
    from urllib.parse import urlencode

    return urlencode([(k, params[k]) for k in ("min_free_gpus", "gpu_model", "gpu_source") if params.get(k)])


# The GPU filter's sources (gpu_filter), as the forms offer them.
GPU_SOURCES = (("any", _("any source")), ("dra", "DRA"), ("device-plugin", _("device plugin")))


def source_totals(cluster_ids=None, nodes=None, snapshot=None):
    """Totals per source and per model, the DRA side from the device summary.

    {"dra": {"gpus", "free", "partitions", "stranded", "nodes",
             "models": {model: {"gpus", "free", "partitions"[, "profiles", "stranded"]}}},
     "device-plugin": {"gpus", "free", "partitions", "partitions_free", "shares", "nodes", "models": {...}},
     "hami": {"gpus", "shares", "shares_used", "memory", "memory_used", "nodes", "models": {...}}}"""
    snap = snapshot or FleetSnapshot(cluster_ids, nodes=nodes)
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
    # Partition-aware capacity (dra/partitions.py): per model what can still be created per profile.
    dra["stranded"] = 0
    for (model,), cap in snap.partition_capacity("model").items():
        m = dra["models"].get(model or "(no model attribute)")
        if m is not None:
            m["profiles"], m["stranded"] = cap["profiles"], cap["stranded"]
            dra["stranded"] += cap["stranded"]
    dra["nodes"] = snap.gpu_node_count()
    dp = {"gpus": 0, "free": 0, "partitions": 0, "partitions_free": 0, "shares": 0, "nodes": 0, "models": {}}
    hami = {"gpus": 0, "shares": 0, "shares_used": 0, "memory": 0, "memory_used": 0, "nodes": 0, "models": {}}
    dp_nodes, hami_nodes = set(), set()
    for cid, node, source, kind, mdl, alloc, used, gpus in accelerators.accelerator_rows(
        cluster_ids, nodes
    ).values_list("cluster_id", "node_name", "source", "kind", "model", "allocatable", "requested", "gpus"):
        label = mdl or "(model unknown)"
        if source == accelerators.DEVICE_PLUGIN:
            dp_nodes.add((cid, node))
            m = dp["models"].setdefault(
                label, {"gpus": 0, "free": 0, "partitions": 0, "partitions_free": 0, "shares": 0}
            )
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
            m = hami["models"].setdefault(
                label, {"gpus": 0, "shares": 0, "shares_used": 0, "memory": 0, "memory_used": 0}
            )
            if kind == "share":
                m["gpus"] += gpus
                m["shares"] += alloc
                m["shares_used"] += used
            elif kind == "memory":
                m["memory"] += alloc
                m["memory_used"] += used
    for totals, keys in (
        (dp, ("gpus", "free", "partitions", "partitions_free", "shares")),
        (hami, ("gpus", "shares", "shares_used", "memory", "memory_used")),
    ):
        for m in totals["models"].values():
            for k in keys:
                totals[k] += m[k]
    dp["nodes"], hami["nodes"] = len(dp_nodes), len(hami_nodes)
    return {"dra": dra, accelerators.DEVICE_PLUGIN: dp, accelerators.HAMI: hami}
