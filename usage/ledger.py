"""Writing the allocation ledger from the sync (registered in mirror/sync/hooks.py by UsageConfig).

Times. An interval starts and ends at the moment the sync observed the watch event that made or
removed the allocation: when the watcher received the event's line from the API server (the watch
event itself carries no time, and a claim's status has none for its allocation or its consumers).
That is within the stream's latency of the API server's write, and it is the same clock for every
start and end. Where the watcher did not observe (it was down, or its resourceVersion expired), the
ledger never guesses:

- a relist at time T (first start, a 410, a takeover that could not resume) closes what the mirror
  no longer holds at T with end_exact=False, opens what it newly holds at T with start_exact=False,
  and records LedgerGap [last observed, T];
- a new tenure resuming a watch from a stored resourceVersion at T records the same gap, and the
  events the server replays (those up to its version at T) count at T, inexact.

"Last observed" is the LedgerMark of the cluster (the last batch or quiet renewal of a connected
claims stream), or the last lease renewal of a killed watcher whose stream was connected. A cluster
without either (the ledger's first run) gets no gap: its first intervals are inexact starts.

Deferred. The sync does not write intervals itself: inside each batch's transaction it appends the
batch's claim events, each with its observed time and the part of the claim the ledger reads, to a
queue (LedgerEvent: one narrow row per event, no secondary index). fold() turns the queue into
intervals in order, in chunks, and deletes what it folded in the same transaction, so an event is
folded exactly once even when a worker dies mid-fold. A debounced job folds a cluster's queue about
USAGE_FOLD_SECONDS after a batch (a Celery task with Redis, a timer thread of the sync's process
without), beat's periodic fold catches any request that was lost, and a relist folds the queue before
it reconciles. The times are the events' own, so folding later changes no bound; reports lag the
stream by the fold delay. Why: written in the batch, the wide interval rows and their indexes cost
the steady ingest 16-32 % (BENCHMARKS.md); the queue costs it a few per cent.

Idempotent: the sync applies every event once (replays and duplicates are dropped by resourceVersion
before they get here), an allocation that is already open is left alone, and the database keeps at
most one open interval per (claim, request, device, share).
"""

import json
import logging
import time
from dataclasses import dataclass
from types import SimpleNamespace

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Min, Q

from dra.units import WHOLE, Units, raw_device_units
from mirror.sync import fastjson, pgcopy

from .models import AllocationInterval, LedgerEvent, LedgerGap, LedgerMark

log = logging.getLogger(__name__)

KIND = "ResourceClaim"


def enabled():
    return bool(getattr(settings, "USAGE_LEDGER", True))


def chosen_labels():
    return list(getattr(settings, "USAGE_LABELS", ["team", "app"]))


@dataclass
class Fact:
    """One allocation result of a claim, with its consumers at that moment."""

    consumed: dict
    admin: bool
    consumers: tuple  # pod names (the claim's namespace), other consumers as "resource/name"


def facts_of(raw):
    """{(request, driver, pool, device, share id): Fact} of a claim as stored."""
    status = (raw or {}).get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    consumers = []
    for ref in status.get("reservedFor") or []:
        if not isinstance(ref, dict) or not ref.get("name"):
            continue
        resource = ref.get("resource") or "pods"
        consumers.append(ref["name"] if resource == "pods" else f"{resource}/{ref['name']}")
    consumers = tuple(sorted(consumers))
    out = {}
    for r in results:
        if not isinstance(r, dict):
            continue
        key = (
            str(r.get("request") or ""),
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
            str(r.get("shareID") or ""),
        )
        out[key] = Fact(r.get("consumedCapacity") or {}, bool(r.get("adminAccess")), consumers)
    return out


def _node_of(raw):
    """The node an allocation is bound to (its nodeSelector's metadata.name), "" when not one node."""
    selector = (((raw or {}).get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    terms = selector.get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return ""
    for field in terms[0].get("matchFields") or []:
        if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(field.get("values")) == 1:
            return field["values"][0]
    return ""


# What devices and counter sets hold, by row id, and their units: kept for one batch only (_Lookups
# empties them). A row id alone does not name the same content for longer: SQLite hands a deleted row's
# id out again, and the test suite met a stale entry on PostgreSQL too (a GPU of an earlier test counted
# as another test's "whole device"). Bounded: emptied when it grows past CACHE_MAX entries.
CACHE_MAX = 100_000
_devices = {}  # device row id -> (model, raw device)
_sets = {}  # counter-set row id -> {"name", "counters"}
_units = {}  # (device id, counter-set ids, admin, consumed) -> (device kind, Units)


def _bounded(cache):
    if len(cache) > CACHE_MAX:
        cache.clear()
    return cache


def _model_name(driver, attrs):
    for attr in ("productName", "model"):
        value = (attrs or {}).get(attr) or (attrs or {}).get(f"{driver}/{attr}")
        if isinstance(value, dict) and value.get("string"):
            return str(value["string"])
    return ""


class _Lookups:
    """Devices, counter sets and pods a batch's new intervals need: read together for what the batch
    is expected to open (prefetch), one by one for anything else. Only ids and names are read per
    batch; what the rows hold is read once per row id and batch (the caches above)."""

    def __init__(self, cluster):
        self.cluster = cluster
        _devices.clear()  # one batch only (see the caches above)
        _sets.clear()
        _units.clear()
        self.devices = {}  # (driver, pool, name) -> (device id, node) or None
        self.pools = {}  # (driver, pool) -> counter-set ids
        self.pods = {}

    def prefetch(self, device_keys, pod_keys):
        from claims.models import Pod
        from inventory.models import Device, SharedCounterSet

        device_keys = {k for k in device_keys if k not in self.devices}
        if device_keys:
            for key in device_keys:
                self.devices[key] = None
            pools, names = {k[1] for k in device_keys}, {k[2] for k in device_keys}
            for pk, driver, pool, name, node in Device.objects.filter(
                cluster=self.cluster, pool__any_of=sorted(pools), name__any_of=sorted(names)
            ).values_list("pk", "driver", "pool", "name", "node_name"):
                if (driver, pool, name) in device_keys:
                    self.devices[(driver, pool, name)] = (pk, node)
            missing = [v[0] for k in device_keys if (v := self.devices[k]) is not None and v[0] not in _devices]
            if missing:
                cache = _bounded(_devices)
                for pk, driver, raw, attrs in Device.objects.filter(pk__any_of=missing).values_list(
                    "pk", "driver", "raw", "attributes"
                ):
                    cache[pk] = (_model_name(driver, attrs), raw)
        new_pools = {k[:2] for k in device_keys} - set(self.pools)
        if new_pools:
            for key in new_pools:
                self.pools[key] = []
            for pk, driver, pool in SharedCounterSet.objects.filter(
                cluster=self.cluster, slice__pool__any_of=sorted({p for _d, p in new_pools})
            ).values_list("pk", "slice__driver", "slice__pool"):
                if (driver, pool) in new_pools:
                    self.pools[(driver, pool)].append(pk)
            missing = [pk for key in new_pools for pk in self.pools[key] if pk not in _sets]
            if missing:
                cache = _bounded(_sets)
                for pk, name, counters in SharedCounterSet.objects.filter(pk__any_of=missing).values_list(
                    "pk", "name", "counters"
                ):
                    cache[pk] = {"name": name, "counters": counters}
            for key in new_pools:
                self.pools[key] = tuple(sorted(self.pools[key]))
        pod_keys = {k for k in pod_keys if k not in self.pods}
        if pod_keys:
            for key in pod_keys:
                self.pods[key] = None
            q = Q()
            for ns in {ns for ns, _ in pod_keys}:
                q |= Q(namespace=ns, name__any_of=sorted(n for s, n in pod_keys if s == ns))
            for row in Pod.objects.filter(q, cluster=self.cluster).values(
                "namespace", "name", "labels", "owner_kind", "owner_name"
            ):
                self.pods[(row["namespace"], row["name"])] = row

    def pod(self, namespace, name):
        if (namespace, name) not in self.pods:
            self.prefetch((), {(namespace, name)})
        return self.pods[(namespace, name)]

    def device(self, driver, pool, name, fact, allocation_node):
        """(node, model, device kind, Units) of an allocation result."""
        if (driver, pool, name) not in self.devices:
            self.prefetch({(driver, pool, name)}, ())
        found = self.devices[(driver, pool, name)]
        if found is None or found[0] not in _devices:
            note = "device not in the mirror: counted as a whole device"
            units = Units(0.0, "admin", "admin access") if fact.admin else Units(1.0, WHOLE, note)
            return allocation_node, "", "", units
        pk, node = found
        model, raw = _devices[pk]
        set_ids = self.pools.get((driver, pool), ())
        key = (pk, set_ids, fact.admin, json.dumps(fact.consumed, sort_keys=True) if fact.consumed else "")
        known = _units.get(key)
        if known is None:
            sets = [_sets[i] for i in set_ids if i in _sets]
            try:
                units = raw_device_units(driver, pool, raw, sets, consumed=fact.consumed, admin_access=fact.admin)
                kind = units.kind
            except Exception as exc:  # a device the engine cannot read: still ledgered, as a whole one
                units, kind = Units(1.0, WHOLE, f"unreadable device ({exc}): counted as a whole device"), ""
            known = _bounded(_units)[key] = (kind, units)
        return node or allocation_node, model, known[0], known[1]


def _workload(pod):
    """(kind, name) of the pod's owner; a ReplicaSet named <deployment>-<pod-template-hash> is its Deployment."""
    kind, name = pod.get("owner_kind") or "", pod.get("owner_name") or ""
    suffix = (pod.get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and suffix and name.endswith(f"-{suffix}"):
        return "Deployment", name[: -len(suffix) - 1]
    return kind, name


class _Held:
    """An interval while a batch works on it: a stored open row (pk set) or one to be written."""

    __slots__ = ("pk", "started_at", "consumers", "ended_at", "end_exact", "new", "device", "dropped")

    def __init__(self, pk, started_at, consumers, new=None, device=None):
        self.pk, self.started_at, self.consumers, self.new = pk, started_at, tuple(consumers), new
        # (node, model, device kind, Units) as the row holds them: a row reopened for new consumers
        # carries them over instead of reading the device again.
        self.device = device
        self.ended_at, self.end_exact, self.dropped = None, True, False


def apply_claim_events(cluster, ops):
    """Apply claim events in order: ops = [(uid, replaced uid or None, raw or None, at, exact)]."""
    if not enabled() or not ops:
        return
    uids = {op[0] for op in ops} | {op[1] for op in ops if op[1]}
    open_rows = AllocationInterval.objects.filter(
        cluster=cluster, ended_at__isnull=True, claim_uid__any_of=sorted(uids)
    )
    current = {}  # uid -> {key: _Held}
    # Plain tuples, not model instances: a busy stream closes and opens thousands per batch.
    for (
        pk,
        uid,
        request,
        driver,
        pool,
        device,
        share,
        started_at,
        consumers,
        *held_device,
    ) in open_rows.values_list(
        "pk",
        "claim_uid",
        "request",
        "driver",
        "pool",
        "device",
        "share_id",
        "started_at",
        "consumers",
        "node",
        "model",
        "device_kind",
        "units",
        "unit_rule",
        "unit_note",
    ):
        node, model, kind, units, rule, note = held_device
        current.setdefault(uid, {})[(request, driver, pool, device, share)] = _Held(
            pk, started_at, consumers, device=(node, model, kind, Units(units, rule, note, kind))
        )

    # What new rows will likely need, read together: allocations not open as they are now (a claim
    # with several events in the batch: all of its allocations). Anything else is read when needed.
    device_keys, pod_keys = set(), set()
    events_of = {}
    for op in ops:
        events_of[op[0]] = events_of.get(op[0], 0) + 1
    facts = [facts_of(op[2]) if op[2] is not None else {} for op in ops]  # read once per event
    for (uid, _replaced, raw, _at, _exact), desired in zip(ops, facts):
        if raw is None:
            continue
        ns = (raw.get("metadata") or {}).get("namespace") or ""
        held = current.get(uid, {})
        for key, fact in desired.items():
            row = held.get(key)
            if row is None:
                device_keys.add(key[1:4])  # a new allocation: its device is read
            if row is None or row.consumers != fact.consumers or events_of[uid] > 1:
                pod_keys.update((ns, c) for c in fact.consumers if "/" not in c)
    lookups = _Lookups(cluster)
    lookups.prefetch(device_keys, pod_keys)
    labels_wanted = chosen_labels()

    closed, created, dropped = [], [], []

    def close(row, at, exact):
        row.ended_at = max(at, row.started_at)
        row.end_exact = exact
        if row.ended_at == row.started_at:
            # Opened and closed at one moment (events replayed at a resume share its time): nothing
            # was held, and the next row of the allocation may start at that moment.
            if row.pk is None:
                row.dropped = True
            else:
                dropped.append(row.pk)
        elif row.pk is not None:
            closed.append(row)

    for (uid, replaced, raw, at, exact), desired in zip(ops, facts):
        if replaced:
            for row in current.pop(replaced, {}).values():
                close(row, at, exact)
        held = current.setdefault(uid, {})
        carried = {}
        for key, row in list(held.items()):
            fact = desired.get(key)
            if fact is None or row.consumers != fact.consumers:
                close(row, at, exact)
                del held[key]
                carried[key] = row.device
        for key, fact in desired.items():
            if key not in held:
                row = held[key] = _Held(
                    None, at, fact.consumers, new=(uid, raw, key, fact, exact), device=carried.get(key)
                )
                created.append(row)
    created = [row for row in created if not row.dropped]
    with transaction.atomic():  # one write (pgcopy's temporary table lives until the commit)
        _write(cluster, lookups, labels_wanted, closed, created, dropped)


def _write(cluster, lookups, labels_wanted, closed, created, dropped):
    # Closes first: a reopened allocation (a pod move) must find its old interval closed.
    if dropped:
        AllocationInterval.objects.filter(pk__in=dropped).delete()
    if closed:
        if pgcopy.available():  # COPY reads the columns as attributes: no model instances needed
            rows = [SimpleNamespace(id=r.pk, ended_at=r.ended_at, end_exact=r.end_exact) for r in closed]
            pgcopy.update(AllocationInterval, rows, ["ended_at", "end_exact"])
        else:
            rows = [AllocationInterval(pk=r.pk, ended_at=r.ended_at, end_exact=r.end_exact) for r in closed]
            AllocationInterval.objects.bulk_update(rows, ["ended_at", "end_exact"], batch_size=100)
    if created:
        rows = []
        for r in created:
            uid, raw, key, fact, exact = r.new
            row = _new_row(cluster, uid, raw, key, fact, r.started_at, exact, lookups, labels_wanted, r.device)
            row["ended_at"], row["end_exact"] = r.ended_at, r.end_exact
            rows.append(row)
        if pgcopy.available():
            pgcopy.insert_values(AllocationInterval, rows)
        else:
            AllocationInterval.objects.bulk_create([AllocationInterval(**row) for row in rows], batch_size=1000)


def _new_row(cluster, uid, raw, key, fact, at, exact, lookups, labels_wanted, device_fields=None):
    request, driver, pool, device, share = key
    meta = raw.get("metadata") or {}
    ns = meta.get("namespace") or ""
    node, model, kind, units = device_fields or lookups.device(driver, pool, device, fact, _node_of(raw))
    pods = [c for c in fact.consumers if "/" not in c]
    pod = lookups.pod(ns, pods[0]) if pods else None
    workload_kind, workload_name = _workload(pod) if pod else ("", "")
    source = (pod or {}).get("labels") if pod else meta.get("labels")
    labels = {k: (source or {})[k] for k in labels_wanted if k in (source or {})}
    return dict(
        cluster_id=cluster.pk,
        claim_uid=uid,
        namespace=ns,
        claim_name=meta.get("name") or "",
        request=request,
        driver=driver,
        pool=pool,
        device=device,
        device_kind=kind,
        share_id=share,
        node=node,
        model=model,
        units=units.units,
        unit_rule=units.rule,
        unit_note=units.note,
        consumed_capacity=fact.consumed,
        admin_access=fact.admin,
        pod_namespace=ns if pods else "",
        pod_name=pods[0] if pods else "",
        workload_kind=workload_kind,
        workload_name=workload_name,
        labels=labels,
        consumers=list(fact.consumers),
        started_at=at,
        start_exact=exact,
        ended_at=None,
        end_exact=True,
    )


# --- the hooks -----------------------------------------------------------------------------------


def _dict(value):
    return value if isinstance(value, dict) else {}


def ledger_view(raw):
    """The part of a claim the ledger reads (facts_of, _node_of, _new_row): its namespace, name and
    labels, the allocation's results and node selector, and reservedFor; the rest (spec, device status,
    managed fields) stays out of the queue."""
    meta, status = _dict(raw.get("metadata")), _dict(raw.get("status"))
    view_meta = {"namespace": meta.get("namespace") or "", "name": meta.get("name") or ""}
    if isinstance(meta.get("labels"), dict) and meta["labels"]:
        view_meta["labels"] = meta["labels"]
    view_status = {}
    allocation = _dict(status.get("allocation"))
    if allocation:
        results = _dict(allocation.get("devices")).get("results")
        view_status["allocation"] = {
            "devices": {"results": results if isinstance(results, list) else []},
            "nodeSelector": _dict(allocation.get("nodeSelector")),
        }
    if isinstance(status.get("reservedFor"), list) and status["reservedFor"]:
        view_status["reservedFor"] = status["reservedFor"]
    return {"metadata": view_meta, "status": view_status}


def queue_events(cluster, ops):
    """Queue a batch's claim events, inside its transaction (see the module's docstring); True when
    queued. A write the database refuses is logged and skipped (in a savepoint): the mirror's claims
    must land whatever the ledger. The sync calls it through tasks.on_claims, which also asks for the
    fold."""
    if not enabled() or not ops:
        return False
    rows = [
        {
            "cluster_id": cluster.pk,
            "claim_uid": uid,
            "replaced_uid": replaced or "",
            "observed_at": at,
            "exact": exact,
            "claim": "" if raw is None else fastjson.dumps(ledger_view(raw)).decode(),
        }
        for uid, replaced, raw, at, exact in ops
    ]
    try:
        with transaction.atomic():
            if pgcopy.available():
                pgcopy.insert_values(LedgerEvent, rows)
            else:
                LedgerEvent.objects.bulk_create([LedgerEvent(**row) for row in rows], batch_size=500)
    except DatabaseError:
        log.exception("%s: allocation ledger: %d claim events not queued", cluster, len(ops))
        return False
    return True


# --- folding the queue ---------------------------------------------------------------------------

FOLD_CHUNK = 20_000  # events per fold transaction
_FOLD_LOCK = 0x47444C46  # pg_advisory_xact_lock's first key ("GDLF"), the cluster id the second


def _fold_lock(cluster_id):
    """One fold (or relist) per cluster at a time, until the transaction ends. SQLite's transactions
    take the write lock when they begin (settings: IMMEDIATE), which serialises them already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_FOLD_LOCK, cluster_id])


def fold(cluster, limit=FOLD_CHUNK):
    """Fold the cluster's queued claim events into intervals, oldest first, `limit` per transaction,
    until the queue is empty; returns how many were folded."""
    folded = 0
    while True:
        with transaction.atomic():
            _fold_lock(cluster.pk)
            queued = list(
                LedgerEvent.objects.filter(cluster_id=cluster.pk)
                .order_by("id")
                .values_list("id", "claim_uid", "replaced_uid", "claim", "observed_at", "exact")[:limit]
            )
            if not queued:
                return folded
            ops = [
                (uid, replaced or None, fastjson.loads(claim) if claim else None, at, exact)
                for _id, uid, replaced, claim, at, exact in queued
            ]
            apply_claim_events(cluster, ops)
            # The ids read, not "up to the last id": a writer outside the watcher's fenced batches (a
            # release applying the API server's answer) may commit a lower id between the read and
            # this delete, and that event must stay queued for the next fold.
            LedgerEvent.objects.filter(id__any_of=[row[0] for row in queued]).delete()
        folded += len(queued)
        if len(queued) < limit:
            return folded


def fold_cluster(cluster_id):
    """The debounced job (tasks.fold_ledger): fold one cluster's queue."""
    from mirror.models import Cluster

    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return 0
    started = time.perf_counter()
    folded = fold(cluster)
    took = time.perf_counter() - started
    # A busy stream's folds are worth a line; the quiet ones (every few seconds per cluster) are not.
    level = logging.INFO if folded >= 1000 or took >= 1.0 else logging.DEBUG
    log.log(level, "%s: allocation ledger: folded %d claim events in %.2f s", cluster, folded, took)
    return folded


def fold_all():
    """Fold every cluster's queue (beat's and the embedded mode's periodic safety net: a fold request
    lost with a worker still gets folded). Returns {cluster id: events folded}."""
    from mirror.models import Cluster

    done = {}
    for cluster in Cluster.objects.filter(pk__in=LedgerEvent.objects.values("cluster_id")):
        try:
            done[cluster.pk] = fold(cluster)
        except DatabaseError:
            log.exception("%s: allocation ledger: fold failed; the events stay queued", cluster)
    return done


def queued_events():
    """{cluster id: (events waiting to be folded, when the oldest was observed)}."""
    rows = LedgerEvent.objects.values("cluster_id").annotate(n=Count("id"), oldest=Min("observed_at")).order_by()
    return {row["cluster_id"]: (row["n"], row["oldest"]) for row in rows}


def mark_alive(cluster_id, at):
    """hooks.ledger_alive: the claims stream of the cluster was complete up to `at`."""
    if not enabled():
        return
    updated = LedgerMark.objects.filter(cluster_id=cluster_id).filter(Q(alive_at__lt=at) | Q(alive_at=None))
    if not updated.update(alive_at=at) and not LedgerMark.objects.filter(cluster_id=cluster_id).exists():
        LedgerMark.objects.create(cluster_id=cluster_id, alive_at=at)


def _record_gap(cluster, at, last_alive, reason):
    """LedgerGap [last observed, at]: the later of the stored mark and the caller's hint."""
    mark = LedgerMark.objects.filter(cluster=cluster).values_list("alive_at", flat=True).first()
    start = max((t for t in (mark, last_alive) if t is not None), default=None)
    if start is None or start >= at:
        return
    # A gap that reaches the start (a resume whose watch then met a 410 and relisted) grows instead.
    joined = LedgerGap.objects.filter(cluster=cluster, started_at__lte=start, ended_at__gte=start).first()
    if joined is not None:
        if joined.ended_at < at:
            joined.ended_at, joined.reason = at, reason
            joined.save(update_fields=["ended_at", "reason"])
        return
    LedgerGap.objects.get_or_create(cluster=cluster, started_at=start, defaults={"ended_at": at, "reason": reason})


def on_relist(cluster, at, last_alive):
    """hooks.ledger_relist: the claims list taken at `at` is in the mirror. Its pages went through
    queue_events (changed claims, dated `at`, inexact); what is left: open intervals of claims the list no
    longer has, and allocated claims without an open interval (a list item unchanged since the mirror
    stored it, e.g. when the ledger was switched on). Only uids are compared; raw claims are read for
    the second kind only."""
    if not enabled():
        return
    from claims.models import ResourceClaim

    with transaction.atomic():
        _fold_lock(cluster.pk)
        fold(cluster)  # the open intervals must be those of every event queued before the list
        _record_gap(cluster, at, last_alive, "relist")
        claims = ResourceClaim.objects.filter(cluster=cluster)
        mirrored = set(claims.values_list("uid", flat=True))
        open_uids = set(
            AllocationInterval.objects.filter(cluster=cluster, ended_at__isnull=True).values_list(
                "claim_uid", flat=True
            )
        )
        held = set(claims.exclude(state=ResourceClaim.State.PENDING).values_list("uid", flat=True))
        ops = [(uid, None, None, at, False) for uid in sorted(open_uids - mirrored)]
        unseen = sorted(held - open_uids)
        if unseen:
            ops += [
                (uid, None, raw, at, False) for uid, raw in claims.filter(uid__any_of=unseen).values_list("uid", "raw")
            ]
        apply_claim_events(cluster, ops)
        mark_alive(cluster.pk, at)


def on_resume(cluster, at, last_alive):
    """hooks.ledger_resume: a new tenure resumes the claims watch at `at`."""
    if enabled():
        _record_gap(cluster, at, last_alive, "resume")
        mark_alive(cluster.pk, at)
