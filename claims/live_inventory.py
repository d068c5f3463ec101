"""The preview Inventory of each cluster, kept current from the sync's change log instead of rebuilt.

The sync (a Celery worker, or this process) numbers every transaction that writes mirrored rows and
logs the keys it changed (gpudash/sync/changelog.py). Here, per cluster and process, one Inventory
is built once from all rows, together with the log position it reflects; each preview first reads
the positions (one small query) and, when the sync has moved on, re-reads only the rows the log
names since, and applies them to a copy of the Inventory (claims/allocator/incremental.py) that
replaces the published one. Previews running meanwhile keep the copy they started with, so reads
never race the update, and the per-device CEL results and the views of untouched nodes carry over.

A full build happens on the first preview of a cluster, after the cluster's DRA feature settings
change, or when this process fell so far behind that the log was pruned past its position.
"""

import gc
import logging
import threading
import time
from dataclasses import dataclass

import orjson
from django.db import connection

from claims.allocator import Inventory
from claims.models import PodFootprint, ResourceClaim, ResourceClaimTemplate
from gpudash.sync import changelog
from inventory.models import DeviceClass, DeviceTaintRule, Namespace, Node, ResourceSlice

log = logging.getLogger(__name__)

# Mirrored kind -> (Inventory keyword, model), in the order the Inventory wants them.
SOURCES = {
    "DeviceClass": ("device_classes", DeviceClass),
    "ResourceSlice": ("resource_slices", ResourceSlice),
    "ResourceClaim": ("resource_claims", ResourceClaim),
    "ResourceClaimTemplate": ("resource_claim_templates", ResourceClaimTemplate),
    "Node": ("nodes", Node),
    "DeviceTaintRule": ("device_taint_rules", DeviceTaintRule),
    "Namespace": ("namespaces", Namespace),
    # Every pod's requests and host ports (the node filters' per-node usage), DRA or not.
    "PodFootprint": ("pod_footprints", PodFootprint),
}
if getattr(Inventory, "USES_PODS", False):  # node resource fit counts the pods bound to each node
    from claims.models import Pod

    SOURCES["Pod"] = ("pods", Pod)

_NAMES_PER_QUERY = 500


@dataclass(frozen=True)
class Snapshot:
    inventory: Inventory
    seen: dict  # kind -> (seq, epoch) of the change log this inventory reflects
    features: tuple
    built_at: float
    build_seconds: float = 0.0


def features_key(cluster):
    return tuple(sorted((cluster.features or {}).items()))


class LiveInventory:
    """One cluster's Inventory in this process."""

    def __init__(self, cluster_id):
        self.cluster_id = cluster_id
        self.snapshot = None  # replaced whole, read without a lock
        self._update = threading.Lock()  # one builder/applier at a time; readers never take it
        self.builds = 0
        self.updates = 0
        self.last_update = None  # (kinds changed, seconds reading the log and rows, seconds applying)
        self._freeze_after = 0

    def _freeze(self):
        """Move every object alive now out of the cyclic collector's scans (gc.freeze): a full
        collection over a 5,000-node inventory takes ~2 s, and previews would pay it at random.
        What the freeze keeps that later turns into cyclic garbage (views replaced by updates) is
        not reclaimed: at most about one inventory's worth."""
        self._freeze_after -= 1
        gc.freeze()

    def current(self, cluster, features):
        """The Inventory including every change committed before this call."""
        if self._freeze_after:
            self._freeze()
        heads = _heads(self.cluster_id)
        snap = self.snapshot
        if snap is not None and snap.features == features_key(cluster) and _caught_up(snap.seen, heads):
            return snap.inventory
        with self._update:
            # Read again under the lock: another thread may have applied past what we read above.
            heads = _heads(self.cluster_id)
            snap = self.snapshot
            if snap is None or snap.features != features_key(cluster) or _needs_rebuild(snap.seen, heads):
                snap = self.snapshot = self._build(cluster, features)
            elif not _caught_up(snap.seen, heads):
                try:
                    snap = self.snapshot = self._catch_up(snap, heads)
                except Exception:  # never stay stuck on one update: start over from the rows
                    log.exception("updating the preview inventory of cluster %s failed; rebuilding it", cluster.name)
                    snap = self.snapshot = self._build(cluster, features)
            return snap.inventory

    def _build(self, cluster, features):
        started = time.perf_counter()
        heads = _heads(self.cluster_id)  # before the rows: later changes are applied after
        # Millions of long-lived objects: the cyclic collector, left on, re-scans them again and again
        # while they are made (more than half of the build); afterwards they are frozen out of its scans.
        collecting = gc.isenabled()
        gc.disable()
        try:
            objects = {kwarg: load_raw(model, self.cluster_id) for kwarg, model in SOURCES.values()}
            inv = Inventory(features=features, **objects)
            del objects
        finally:
            if collecting:
                gc.enable()
        self._freeze_after = 2  # now, and once more after the first preview filled the views and CEL caches
        self._freeze()
        self.builds += 1
        seconds = time.perf_counter() - started
        log.info("preview inventory of cluster %s built in %.2f s", cluster.name, seconds)
        return Snapshot(inv, {kind: (seq, epoch) for kind, (seq, _, epoch) in heads.items()}, features_key(cluster), time.time(), seconds)

    def _catch_up(self, snap, heads):
        started = time.perf_counter()
        since = {kind: seq for kind, (seq, _) in snap.seen.items()}
        until = {kind: seq for kind, (seq, _, _) in heads.items()}
        changed = changelog.changed_keys(self.cluster_id, since, until)
        upserts, removals = {}, {}
        for kind, keys in changed.items():
            if kind not in SOURCES:
                continue
            kwarg, model = SOURCES[kind]
            found = load_raw_by_key(model, self.cluster_id, keys)
            if model is ResourceSlice:
                share_device_values(found.values(), {})
            upserts[kwarg] = [found[k] for k in sorted(found)]
            namespaced = kwarg in ("resource_claims", "resource_claim_templates", "pods", "pod_footprints")
            removals[kwarg] = [k if namespaced else k[1] for k in sorted(keys - found.keys())]
        read = time.perf_counter()
        inv = snap.inventory.with_changes(upserts, removals)
        self.updates += 1
        self.last_update = (len(changed), read - started, time.perf_counter() - read)
        seen = {kind: (seq, epoch) for kind, (seq, _, epoch) in heads.items()}
        return Snapshot(inv, seen, snap.features, time.time(), snap.build_seconds)


def _caught_up(seen, heads):
    """`seen` already includes every change `heads` counts (same cursors, no fewer transactions)."""
    if seen.keys() - heads.keys():
        return False
    return all(kind in seen and seen[kind][1] == epoch and seen[kind][0] >= seq for kind, (seq, _, epoch) in heads.items())


def _heads(cluster_id):
    """The change-log cursors of the kinds the inventory reads: another kind's changes (Events, say,
    which come often and are pruned often) never make it catch up or rebuild."""
    return {kind: head for kind, head in changelog.cursors(cluster_id).items() if kind in SOURCES}


def _needs_rebuild(seen, heads):
    """The log cannot bring `seen` to `heads`: a cursor was re-created, went back, or was pruned past us."""
    for kind, (seq, epoch) in seen.items():
        head = heads.get(kind)
        if head is None or head[2] != epoch or head[0] < seq:
            return True
    for kind, (seq, pruned, _) in heads.items():
        if pruned > seen.get(kind, (0, None))[0]:
            return True
    return False


def load_raw(model, cluster_id):
    """Every row's raw JSON, in (namespace, name) order. Read as text and parsed with orjson: about
    twice as fast as letting the driver decode jsonb with the json module."""
    table = connection.ops.quote_name(model._meta.db_table)
    cast = "raw::text" if connection.vendor == "postgresql" else "raw"
    rows, memo = [], {} if model is ResourceSlice else None
    # Streamed (a server-side cursor on PostgreSQL) and shared row by row: the text of every row and
    # the unshared copies never all exist at once (a 20,000-node fleet's slices are 0.3 GB of text).
    with connection.chunked_cursor() as cursor:
        cursor.execute(f"SELECT {cast} FROM {table} WHERE cluster_id = %s ORDER BY namespace, name", [cluster_id])
        while True:
            chunk = cursor.fetchmany(2000)
            if not chunk:
                break
            for (text,) in chunk:
                row = orjson.loads(text)
                if memo is not None:
                    share_device_values((row,), memo)
                rows.append(row)
    return rows


def share_device_values(slices, memo):
    """One object per distinct attribute / capacity value among the devices of `slices` (in place).

    A fleet's devices repeat the same few values (`{"string": "gpu"}`, `{"version": "580.95.5"}`,
    `{"value": "80Gi"}`) hundreds of thousands of times; parsed per row, each is its own dict and
    string, more than half of a 20,000-node inventory's memory. These rows are this module's own and
    read only by the engine, which never changes them, so equal values can be one object. `memo`
    ({(kind, type, value): dict}) is shared by the calls of one inventory."""
    for raw in slices:
        spec = raw.get("spec") if isinstance(raw, dict) else None
        devices = spec.get("devices") if isinstance(spec, dict) else None
        if not isinstance(devices, list):
            continue
        for dev in devices:
            if not isinstance(dev, dict):
                continue
            for field in ("attributes", "capacity"):
                values = dev.get(field)
                if type(values) is not dict:
                    continue
                for name, value in values.items():  # replacing values keeps the dict's size: safe while iterating
                    if type(value) is dict and len(value) == 1:
                        (kind, item), = value.items()
                        if type(item) in _SHAREABLE:
                            key = (kind, type(item), item)
                            shared = memo.get(key)
                            if shared is None:
                                shared = memo[key] = value
                            elif shared is not value:
                                values[name] = shared
    return slices


_SHAREABLE = (str, int, bool, float)


def load_raw_by_key(model, cluster_id, keys):
    """{(namespace, name): raw} of the rows of `keys` that exist now (by the (cluster, namespace,
    name) unique index)."""
    out = {}
    keys = sorted(keys)
    table = connection.ops.quote_name(model._meta.db_table)
    cast = "raw::text" if connection.vendor == "postgresql" else "raw"
    for start in range(0, len(keys), _NAMES_PER_QUERY):
        chunk = keys[start : start + _NAMES_PER_QUERY]
        marks = ", ".join(["(%s, %s)"] * len(chunk))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT namespace, name, {cast} FROM {table} WHERE cluster_id = %s AND (namespace, name) IN ({marks})",
                           [cluster_id, *(part for key in chunk for part in key)])
            for namespace, name, text in cursor.fetchall():
                out[(namespace, name)] = orjson.loads(text)
    return out


_live = {}
_live_lock = threading.Lock()


def live_inventory(cluster_id):
    with _live_lock:
        live = _live.get(cluster_id)
        if live is None:
            live = _live[cluster_id] = LiveInventory(cluster_id)
        return live


def forget(cluster_id=None):
    """Drop this process's inventories (all, or one cluster's): the next preview builds afresh."""
    with _live_lock:
        if cluster_id is None:
            _live.clear()
        else:
            _live.pop(cluster_id, None)


WARM_UP_CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpudash-warm-up, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly: {deviceClassName: %s}
"""


def warm_up(clusters=None):
    """Build the live inventory of every cluster (or `clusters`) and run one preview per DeviceClass,
    which fills the node views and the class selectors' CEL results: the first preview a user asks
    for is then a warm one. Meant for a background thread at server start (`manage.py serve`)."""
    from claims.preview import PreviewError, run_preview
    from inventory.models import Cluster

    started = time.perf_counter()
    try:
        for cluster in clusters if clusters is not None else Cluster.objects.all():
            try:
                for name in sorted(live_inventory(cluster.pk).current(cluster, _features(cluster)).classes):
                    run_preview(cluster, yaml_text=WARM_UP_CLAIM % name)
            except PreviewError as exc:  # bad feature settings: the cluster's previews say so themselves
                log.warning("preview warm-up of cluster %s skipped: %s", cluster.name, exc)
        log.info("preview inventories warmed up in %.1f s", time.perf_counter() - started)
    except Exception:  # a warm-up is an optimisation: never let it take the server down
        log.exception("preview warm-up failed")


def warm_up_in_background():
    """warm_up in a daemon thread (its own database connection, closed when done)."""

    def run():
        try:
            warm_up()
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="preview-warm-up", daemon=True)
    thread.start()
    return thread


def _features(cluster):
    from claims.preview import features_of

    return features_of(cluster)
