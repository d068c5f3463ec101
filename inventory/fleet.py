"""Device states across the fleet, and the aggregates the overview and the fleet map show.

A device's state is derived, never stored: it depends on claims (allocation results), findings
(stuck claims), taints, node readiness and on sibling partitions sharing counters. Everything is
loaded with a few lean queries per request and joined in memory, which keeps a 5,000-node fleet
(40,000 devices) well inside a page's time budget without denormalised columns to keep in sync.

Primary states, in order of precedence (the first that applies wins):
  stuck      held by a claim with an active stuck-claim finding
  allocated  held by an ordinary claim
  admin      held only by admin-access claims (still allocatable to ordinary claims)
  partial    partially used: held only through capacity shares (allowMultipleAllocations), or not held
             itself but held partitions consume shared counters it needs (a GPU with a MIG slice in use);
             a sibling partition whose counters are still available stays free
  tainted    a NoSchedule/NoExecute taint keeps new claims off it
  unhealthy  its node is NotReady
  free       none of the above: a new claim could get it
Flags (`tainted`, `unhealthy`, `admin`) are kept besides the primary state, so an allocated device on a
NotReady node is counted as allocated *and* unhealthy.
"""

import re
from collections import Counter, defaultdict
from decimal import Decimal
from dataclasses import dataclass, field

from django.db.models import TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from kubernetes.utils import parse_quantity

from claims.models import AllocationResult, Finding
from gpudash import roles

from .models import Node

STUCK, ALLOCATED, ADMIN, PARTIAL, TAINTED, UNHEALTHY, FREE = "stuck", "allocated", "admin", "partial", "tainted", "unhealthy", "free"
STATES = (FREE, ALLOCATED, ADMIN, PARTIAL, TAINTED, UNHEALTHY, STUCK)
STATE_LABELS = {
    FREE: "free",
    ALLOCATED: "allocated",
    ADMIN: "admin access",
    PARTIAL: "partially used",
    TAINTED: "tainted",
    UNHEALTHY: "node not ready",
    STUCK: "stuck claim",
}
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


class Allocations:
    """Who holds which device in some clusters: (cluster_id, driver, pool, device) -> [Holder]."""

    def __init__(self, cluster_ids=None, user=None, pools=None):
        qs = AllocationResult.objects.all()
        if cluster_ids is not None:
            qs = qs.filter(cluster_id__in=cluster_ids)
        if pools is not None:
            qs = qs.filter(pool__in=pools)
        stuck_uids = set(Finding.objects.active().exclude(claim_uid="").values_list("claim_uid", flat=True))
        scope = roles.visible_namespaces(user) if user is not None else None
        self.by_device = defaultdict(list)
        rows = qs.values_list("cluster_id", "driver", "pool", "device", "admin_access", "share_id", "claim__namespace", "claim__name", "claim__uid")
        for cluster_id, driver, pool, device, admin, share, ns, name, uid in rows.iterator(chunk_size=5000):
            self.by_device[(cluster_id, driver, pool, device)].append(
                Holder(ns, name, uid, admin, uid in stuck_uids, shared=bool(share), visible=scope is None or ns in scope)
            )
        self.consumed = defaultdict(Decimal)  # (cluster, driver, pool, counter set, counter) -> amount held
        self.counter_capacity = {}

    def holders(self, key):
        return self.by_device.get(key, ())

    def note_partitions(self, table):
        """Add up the shared counters held devices consume (`table`: see `partition_table`)."""
        self.partitions = table
        consumption, self.counter_capacity = table
        for key, entries in consumption.items():
            if key in self.by_device:
                for counter_key, amount in entries:
                    self.consumed[counter_key] += amount

    def blocked_by_siblings(self, key):
        """Do held siblings leave too little of a shared counter for this (unheld) device?"""
        if not self.consumed:
            return False
        for counter_key, amount in self.partitions[0].get(key, ()):
            used = self.consumed.get(counter_key)
            if used and self.counter_capacity.get(counter_key, Decimal(0)) - used < amount:
                return True
        return False


def _quantity(counter):
    try:
        return Decimal(parse_quantity((counter or {}).get("value", "0")))
    except (ValueError, TypeError):
        return Decimal(0)


_partition_cache = {}


def partition_table(cluster_ids=None):
    """({device key: [(counter key, amount)]}, {counter key: capacity}) for partitioned devices.

    Parsing every partition's consumesCounters is the costly part of a fleet-wide state (tens of
    thousands of JSON documents); it only changes when slices do, so it is cached per process and
    keyed on the slices' version (count, newest resourceVersion, newest device row).
    """
    from django.db.models import Count, Max

    from .models import Device, ResourceSlice, SharedCounterSet

    slices = ResourceSlice.objects.all() if cluster_ids is None else ResourceSlice.objects.filter(cluster_id__in=cluster_ids)
    devices = Device.objects.all() if cluster_ids is None else Device.objects.filter(cluster_id__in=cluster_ids)
    version = (slices.aggregate(n=Count("id"), rv=Max("resource_version_num"))["rv"], slices.count(), devices.aggregate(m=Max("id"))["m"])
    cache_key = tuple(sorted(cluster_ids)) if cluster_ids is not None else None
    cached = _partition_cache.get(cache_key)
    if cached and cached[0] == version:
        return cached[1]
    consumption = {}
    rows = devices.exclude(consumes_counters=[]).values_list("cluster_id", "driver", "pool", "name", "consumes_counters")
    for cid, driver, pool, name, consumes in rows.iterator(chunk_size=5000):
        consumption[(cid, driver, pool, name)] = [
            ((cid, driver, pool, entry.get("counterSet"), counter), _quantity(amount))
            for entry in consumes or ()
            for counter, amount in (entry.get("counters") or {}).items()
        ]
    capacity = {}
    sets = SharedCounterSet.objects.all() if cluster_ids is None else SharedCounterSet.objects.filter(cluster_id__in=cluster_ids)
    for cid, driver, pool, name, counters in sets.values_list("cluster_id", "slice__driver", "slice__pool", "name", "counters"):
        for counter, amount in (counters or {}).items():
            capacity[(cid, driver, pool, name, counter)] = _quantity(amount)
    table = (consumption, capacity)
    if len(_partition_cache) > 32:
        _partition_cache.clear()
    _partition_cache[cache_key] = (version, table)
    return table


def not_ready_nodes(cluster_ids=None):
    qs = Node.objects.filter(ready=False)
    if cluster_ids is not None:
        qs = qs.filter(cluster_id__in=cluster_ids)
    return set(qs.values_list("cluster_id", "name"))


def state_of(device, allocations, not_ready):
    """The DeviceState of one lean device dict (see `lean_devices`)."""
    key = (device["cluster_id"], device["driver"], device["pool"], device["name"])
    holders = allocations.by_device.get(key)
    unhealthy = bool(device["node_name"]) and (device["cluster_id"], device["node_name"]) in not_ready
    if not holders and not device["tainted"] and not unhealthy and (not allocations.consumed or key not in allocations.partitions[0]):
        return _FREE  # the common case, kept cheap: most of a 40,000-device fleet
    holders = list(holders or ())
    flags = set()
    if device["tainted"]:
        flags.add(TAINTED)
    if unhealthy:
        flags.add(UNHEALTHY)
    if any(h.admin_access for h in holders):
        flags.add(ADMIN)
    if any(h.stuck for h in holders):
        state = STUCK
    elif any(not h.admin_access and not h.shared for h in holders):
        state = ALLOCATED
    elif any(h.shared for h in holders):
        state = PARTIAL
    elif holders:
        state = ADMIN
    elif allocations.blocked_by_siblings(key):
        state = PARTIAL
    elif TAINTED in flags:
        state = TAINTED
    elif UNHEALTHY in flags:
        state = UNHEALTHY
    else:
        state = FREE
    return DeviceState(state, frozenset(flags), holders)


_FREE = DeviceState(FREE)
LEAN_FIELDS = ("id", "cluster_id", "driver", "pool", "name", "node_name", "tainted")


def lean_devices(queryset):
    """Only the columns state computation and grouping need (no JSON blobs to decode)."""
    model = Coalesce(KT("attributes__productName__string"), KT("attributes__model__string"), Value(""), output_field=TextField())
    for row in queryset.values_list(*LEAN_FIELDS, model).iterator(chunk_size=5000):
        yield dict(zip(LEAN_FIELDS + ("model",), row))


class FleetSnapshot:
    """Every device of some clusters with its state, loaded once per request."""

    def __init__(self, devices_qs, cluster_ids=None, user=None):
        self.devices = list(lean_devices(devices_qs))
        self.allocations = Allocations(cluster_ids, user=user)
        self.allocations.note_partitions(partition_table(cluster_ids))
        self.not_ready = not_ready_nodes(cluster_ids)
        for d in self.devices:
            d["st"] = state_of(d, self.allocations, self.not_ready)

    # -- overview -------------------------------------------------------------------------------
    def totals(self):
        c = Counter(d["st"].state for d in self.devices)
        flags = Counter(f for d in self.devices for f in d["st"].flags)
        return {
            "total": len(self.devices),
            "allocated": c[ALLOCATED] + c[STUCK],
            "admin": c[ADMIN],
            "partial": c[PARTIAL],
            "free": c[FREE],
            "tainted": flags[TAINTED],
            "unhealthy": flags[UNHEALTHY],
            "stuck": c[STUCK],
            "by_state": {s: c[s] for s in STATES},
        }

    def by_model(self):
        """Rows (driver, model, counts per state), biggest first."""
        groups = defaultdict(Counter)
        for d in self.devices:
            groups[(d["driver"], d["model"])][d["st"].state] += 1
        rows = []
        for (driver, model), c in groups.items():
            total = sum(c.values())
            held = c[ALLOCATED] + c[STUCK] + c[ADMIN]
            rows.append({"driver": driver, "model": model or "(no model attribute)", "total": total, "counts": c, "used_pct": round(100 * held / total) if total else 0})
        return sorted(rows, key=lambda r: (-r["total"], r["driver"], r["model"]))

    def namespaces(self):
        """Who holds what: namespace -> claims and devices held (only namespaces the user may see)."""
        devices, claims = Counter(), defaultdict(set)
        for holders in self.allocations.by_device.values():
            for h in holders:
                if h.visible and not h.admin_access:
                    devices[h.namespace] += 1
                    claims[h.namespace].add(h.uid)
        total = len(self.devices) or 1
        return [
            {"namespace": ns, "devices": n, "claims": len(claims[ns]), "share_pct": round(100 * n / total, 1)}
            for ns, n in devices.most_common()
        ]

    def fragmentation(self):
        """Per driver: nodes whose devices are all free (can take a whole-node claim) vs free devices scattered.

        A whole-node claim needs every device of the driver on one node; `histogram` counts nodes by
        how many free devices they have, so "8 free GPUs on 3 nodes" and "1 free GPU on 40 nodes" read apart.
        """
        per_node = defaultdict(lambda: [0, 0])  # (driver, cluster, node) -> [total, free]
        for d in self.devices:
            if not d["node_name"]:
                continue
            slot = per_node[(d["driver"], d["cluster_id"], d["node_name"])]
            slot[0] += 1
            slot[1] += d["st"].state == FREE
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

    # -- map --------------------------------------------------------------------------------------
    def map_rows(self):
        """One row per (cluster, node) with its devices in name order; devices without a node grouped by pool."""
        rows = defaultdict(list)
        for d in self.devices:
            rows[(d["cluster_id"], d["node_name"] or f"pool:{d['pool']}")].append(d)
        out = []
        for (cluster_id, node), devs in rows.items():
            devs.sort(key=lambda d: (d["driver"], natural_key(d["name"])))
            states = Counter(d["st"].state for d in devs)
            out.append({"cluster_id": cluster_id, "node": node, "devices": devs, "states": states, "unhealthy": any(UNHEALTHY in d["st"].flags for d in devs)})
        out.sort(key=lambda r: (r["cluster_id"], natural_key(r["node"])))
        return out


def natural_key(text):
    """gpu-2 before gpu-10, node-9 before node-10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def states_for(devices, cluster_ids=None, user=None):
    """Attach `st` (DeviceState) to Device model instances (lists and detail pages)."""
    devices = list(devices)
    if not devices:
        return devices
    cluster_ids = cluster_ids or sorted({d.cluster_id for d in devices})
    allocations = Allocations(cluster_ids, user=user, pools={d.pool for d in devices})
    allocations.note_partitions(partition_table(cluster_ids))
    not_ready = not_ready_nodes({d.cluster_id for d in devices})
    for dev in devices:
        lean = {f: getattr(dev, f) for f in LEAN_FIELDS}
        dev.st = state_of(lean, allocations, not_ready)
    return devices
