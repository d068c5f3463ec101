"""Device states across the fleet, and the aggregates the overview and the fleet map show.

The state vocabulary and how a state is decided live in inventory/devicestate.py (stored columns
kept current by the watchers, plus SQL for stuck claims and NotReady nodes); this module groups and
counts in SQL (one GROUP BY per request) and shapes the results for the pages.
"""

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Case, Count, F, Q, TextField, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Concat

from claims.models import AllocationResult, Finding
from gpudash import roles

from . import devicestate
from .devicestate import ADMIN, ALLOCATED, FREE, PARTIAL, STATES, STUCK, TAINTED, UNHEALTHY  # one vocabulary
from .models import Device

STATE_LABELS = {
    FREE: "free",
    ALLOCATED: "allocated",
    ADMIN: "admin access",
    PARTIAL: "partially used",
    TAINTED: "tainted",
    UNHEALTHY: "node not ready",
    STUCK: "stuck claim",
}
# Secondary flags a device keeps besides its primary state, with what "any state" counts are called.
FLAGS = (TAINTED, UNHEALTHY, ADMIN)
FLAG_LABELS = {TAINTED: "tainted", UNHEALTHY: "on NotReady nodes", ADMIN: "watched with admin access"}
# The order the overview tiles and the map summary list the states in (used first, then free).
DISPLAY_STATES = (ALLOCATED, STUCK, ADMIN, PARTIAL, TAINTED, UNHEALTHY, FREE)
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
        return STATE_LABELS[self.state]


_MODEL = Coalesce(KT("attribute_values__productName"), KT("attribute_values__model"), Value(""), output_field=TextField())
_MAP_KEY = Case(When(node_name="", then=Concat(Value("pool:"), F("pool"))), default=F("node_name"), output_field=TextField())


@dataclass(frozen=True)
class _Group:
    """Devices sharing (cluster, node, driver, state): one row of the fleet's GROUP BY."""

    cluster_id: int
    map_key: str
    node_name: str
    driver: str
    state: str
    unhealthy: bool
    n: int
    tainted: int
    admin: int


def _with_state(queryset):
    return queryset.annotate(st=devicestate.state_expression(), unhealthy=devicestate.node_not_ready())


class FleetSnapshot:
    """Device counts of some clusters by node, driver, model and state: one GROUP BY in SQL per request
    (a few thousand groups for 5,000 nodes); device rows are only read for the map's page."""

    def __init__(self, devices_qs, cluster_ids=None, user=None):
        self.devices_qs = devices_qs
        self.cluster_ids = cluster_ids
        self.user = user
        rows = (
            _with_state(devices_qs.order_by())
            .annotate(map_key=_MAP_KEY)
            .values_list("cluster_id", "map_key", "node_name", "driver", "st", "unhealthy")
            .annotate(n=Count("id"), n_tainted=Count("id", filter=Q(tainted=True)), n_admin=Count("id", filter=Q(admin_watched=True)))
        )
        self.groups = [_Group(*row) for row in rows]
        self.total = sum(g.n for g in self.groups)

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
        for g in self.groups:
            c[g.state] += g.n
            flags[TAINTED] += g.tainted
            flags[ADMIN] += g.admin
            flags[UNHEALTHY] += g.n if g.unhealthy else 0
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
        # Its own GROUP BY: carrying the attributes through the per-node grouping would make that
        # sort spill to disk, and only the overview needs models.
        groups = defaultdict(Counter)
        rows = _with_state(self.devices_qs.order_by()).annotate(model=_MODEL).values_list("driver", "model", "st").annotate(n=Count("id"))
        for driver, model, state, n in rows:
            groups[(driver, model)][state] += n
        rows = []
        for (driver, model), c in groups.items():
            total = sum(c.values())
            held = c[ALLOCATED] + c[STUCK] + c[ADMIN]
            rows.append({"driver": driver, "model": model or "(no model attribute)", "total": total, "counts": c, "used_pct": round(100 * held / total) if total else 0})
        return sorted(rows, key=lambda r: (-r["total"], r["driver"], r["model"]))

    def namespaces(self):
        """Who holds what: namespace -> claims and devices held (only namespaces the user may see)."""
        results = AllocationResult.objects.filter(admin_access=False)
        if self.cluster_ids is not None:
            results = results.filter(cluster_id__in=self.cluster_ids)
        scope = roles.visible_namespaces(self.user) if self.user is not None else None
        if scope is not None:
            results = results.filter(claim__namespace__in=scope)
        rows = results.values_list("claim__namespace").annotate(devices=Count("id"), claims=Count("claim_id", distinct=True)).order_by("-devices", "claim__namespace")
        total = self.total or 1
        return [{"namespace": ns, "devices": n, "claims": claims, "share_pct": round(100 * n / total, 1)} for ns, n, claims in rows]

    def fragmentation(self):
        """Per driver: nodes whose devices are all free (can take a whole-node claim) vs free devices scattered.

        A whole-node claim needs every device of the driver on one node; `histogram` counts nodes by
        how many free devices they have, so "8 free GPUs on 3 nodes" and "1 free GPU on 40 nodes" read apart.
        """
        per_node = defaultdict(lambda: [0, 0])  # (driver, cluster, node) -> [total, free]
        for g in self.groups:
            if not g.node_name:
                continue
            slot = per_node[(g.driver, g.cluster_id, g.node_name)]
            slot[0] += g.n
            slot[1] += g.n if g.state == FREE else 0
        out = defaultdict(lambda: {"nodes": 0, "whole_free_nodes": 0, "free_devices": 0, "scattered_free": 0, "histogram": Counter()})
        for (driver, _cluster, _node), (total, free) in per_node.items():
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

    def node_counts(self):
        """(cluster_id, node) -> Counter of states plus "total"."""
        out = defaultdict(Counter)
        for g in self.groups:
            if g.node_name:
                out[(g.cluster_id, g.node_name)][g.state] += g.n
                out[(g.cluster_id, g.node_name)]["total"] += g.n
        return out

    # -- map --------------------------------------------------------------------------------------
    def map_rows(self):
        """One row per (cluster, node) (devices without a node grouped by pool), in natural order, with
        state counts; `attach_devices` fills in the device cells of the rows actually shown."""
        rows = {}
        for g in self.groups:
            row = rows.setdefault((g.cluster_id, g.map_key), {"cluster_id": g.cluster_id, "node": g.map_key, "devices": [], "states": Counter(), "unhealthy": False})
            row["states"][g.state] += g.n
            row["unhealthy"] = row["unhealthy"] or g.unhealthy
        return sorted(rows.values(), key=lambda r: (r["cluster_id"], natural_key(r["node"])))

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
        fields = ("id", "cluster_id", "driver", "pool", "name", "node_name", "tainted", "admin_watched", "allocation_state", "held_by_namespace", "held_by_name", "st", "unhealthy", "model")
        index = {(r["cluster_id"], r["node"]): r for r in rows}
        for values in _with_state(self.devices_qs.filter(where).order_by()).annotate(model=_MODEL).values_list(*fields):
            d = dict(zip(fields, values))
            holders = []
            if d["held_by_name"]:
                ns = d["held_by_namespace"]
                holders.append(Holder(ns, d["held_by_name"], "", d["allocation_state"] == ADMIN, d["st"] == STUCK,
                                      shared=d["allocation_state"] == PARTIAL, visible=scope is None or ns in scope))
            d["st"] = DeviceState(d["st"], _flags(d["tainted"], d["unhealthy"], d["admin_watched"]), holders)
            row = index.get((d["cluster_id"], d["node_name"] or f"pool:{d['pool']}"))
            if row is not None:
                row["devices"].append(d)
        for r in rows:
            r["devices"].sort(key=lambda d: (d["driver"], natural_key(d["name"])))
        return rows


def _flags(tainted, unhealthy, admin):
    return frozenset(f for f, on in ((TAINTED, tainted), (UNHEALTHY, unhealthy), (ADMIN, admin)) if on)


def natural_key(text):
    """gpu-2 before gpu-10, node-9 before node-10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def states_for(devices, cluster_ids=None, user=None):
    """Attach `st` (DeviceState, with every holder) to Device model instances (lists and detail pages)."""
    devices = list(devices)
    if not devices:
        return devices
    ids = [d.id for d in devices]
    state = {pk: (st, unhealthy, admin) for pk, st, unhealthy, admin in _with_state(Device.objects.filter(id__in=ids)).values_list("id", "st", "unhealthy", "admin_watched")}
    keys = {(d.cluster_id, d.driver, d.pool, d.name) for d in devices}
    results = AllocationResult.objects.filter(cluster_id__in={k[0] for k in keys}, pool__in={k[2] for k in keys})
    rows = [r for r in results.values_list("cluster_id", "driver", "pool", "device", "admin_access", "share_id", "claim__namespace", "claim__name", "claim__uid") if r[:4] in keys]
    stuck = set(Finding.objects.active().filter(claim_uid__in={r[8] for r in rows}).values_list("claim_uid", flat=True)) if rows else set()
    scope = roles.visible_namespaces(user) if user is not None else None
    holders = defaultdict(list)
    for cid, driver, pool, device, admin, share, ns, name, uid in rows:
        holders[(cid, driver, pool, device)].append(Holder(ns, name, uid, admin, uid in stuck, shared=bool(share), visible=scope is None or ns in scope))
    for dev in devices:
        st, unhealthy, admin = state.get(dev.id, (FREE, False, False))
        dev.st = DeviceState(st, _flags(dev.tainted, unhealthy, admin), holders.get((dev.cluster_id, dev.driver, dev.pool, dev.name), []))
    return devices
