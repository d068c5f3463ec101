"""The preview Inventory of each cluster, kept current from the sync's change log instead of rebuilt.

The sync (a Celery worker, or this process) numbers every transaction that writes mirrored rows and
logs the keys it changed (mirror/sync/changelog.py). Here, per cluster and process, one Inventory
is built once from all rows, together with the log position it reflects; each preview first reads
the positions (one small query) and, when the sync has moved on, re-reads only the rows the log
names since, and applies them to a copy of the Inventory (dra/incremental.py) that
replaces the published one. Previews running meanwhile keep the copy they started with, so reads
never race the update, and the per-device CEL results and the views of untouched nodes carry over.

A full build happens on the first preview of a cluster (in the web process: at start, by the
warm-up thread, start_warm_up), after the cluster's DRA feature settings change, or when this process
fell so far behind that the log was pruned past its position.
"""

import gc
import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
from django.db import connection

from claims.models import Pod, PodFootprint, ResourceClaim, ResourceClaimTemplate
from dra import Features, Inventory, load_documents, preview, resolve_claims
from dra.gcpause import collector_paused
from dra.nodefilters import scheduling_pod
from dra.projection import ATTRIBUTE, CAPACITY, plain_value
from mirror.sync import changelog
from mirror.sync.kinds import KINDS_BY_NAME

log = logging.getLogger(__name__)


def _stored(kind):
    """The model the sync stores a mirrored kind in (mirror/sync/kinds.py): the inventory reads every
    kind's rows as mirrored, nodes, slices and classes (inventory's models) as much as claims."""
    return KINDS_BY_NAME[kind].model


# Mirrored kind -> (Inventory keyword, model), in the order the Inventory wants them.
SOURCES = {
    "DeviceClass": ("device_classes", _stored("DeviceClass")),
    "ResourceSlice": ("resource_slices", _stored("ResourceSlice")),
    "ResourceClaim": ("resource_claims", ResourceClaim),
    "ResourceClaimTemplate": ("resource_claim_templates", ResourceClaimTemplate),
    "Node": ("nodes", _stored("Node")),
    "DeviceTaintRule": ("device_taint_rules", _stored("DeviceTaintRule")),
    "Namespace": ("namespaces", _stored("Namespace")),
    # Every pod's requests and host ports (the node filters' per-node usage), DRA or not.
    "PodFootprint": ("pod_footprints", PodFootprint),
}
if getattr(Inventory, "USES_PODS", False):  # node resource fit counts the pods bound to each node
    SOURCES["Pod"] = ("pods", Pod)
_SLICES = SOURCES["ResourceSlice"][1]

_NAMES_PER_QUERY = 500


@dataclass(frozen=True)
class Snapshot:
    inventory: Inventory
    seen: dict  # kind -> (seq, epoch) of the change log this inventory reflects
    features: tuple
    built_at: float  # time.time() of the full build (updates keep it)
    build_seconds: float = 0.0


@dataclass(frozen=True)
class Obtained:
    """How one `LiveInventory.current` call got its inventory (the preview's `summary.inventory`)."""

    how: str  # "current" (nothing to do), "updated" (caught up from the change log), "built" (this call
    # built it: the first preview after start, or after a feature change), "waited" (another thread was
    # building or updating it: the start-up warm-up, say)
    seconds: float  # time spent in the call: reading the log, updating, building or waiting
    build_seconds: float  # how long the inventory's last full build took
    built_at: float  # time.time() of that build

    def as_dict(self):
        return {
            "obtained": self.how,
            "waitSeconds": round(self.seconds, 4),
            "buildSeconds": round(self.build_seconds, 3),
            "builtAt": datetime.fromtimestamp(self.built_at, UTC).isoformat(timespec="seconds"),
        }


class BuildInProgress(Exception):
    """Another thread holds the inventory (building it, typically the start-up warm-up) past the
    caller's deadline. `running`: seconds the build has run; `typical`: the last build's seconds, or
    None before the first one."""

    def __init__(self, running, typical):
        super().__init__(f"building for {running:.1f} s")
        self.running, self.typical = running, typical


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
        self.building_since = None  # time.monotonic() while a full build runs
        self.last_build_seconds = None

    def _freeze(self):
        """Move every object alive now out of the cyclic collector's scans (gc.freeze): a full
        collection over a whole inventory takes seconds, and previews would pay it at random.
        What the freeze keeps that later turns into cyclic garbage (views replaced by updates) is
        not reclaimed: at most about one inventory's worth."""
        self._freeze_after -= 1
        gc.freeze()

    def current(self, cluster, features, deadline=None):
        """The Inventory including every change committed before this call."""
        return self.obtain(cluster, features, deadline)[0]

    def obtain(self, cluster, features, deadline=None):
        """(the Inventory as `current` gives it, Obtained: how and how long). `deadline`
        (deadline.Deadline): how long to wait for another thread's build or update (the start-up
        warm-up's, say) before raising BuildInProgress; a build this call has to make itself runs to
        its end (it cannot be cut short; the preview's own deadline then says what is left)."""
        started = time.monotonic()
        if self._freeze_after:
            self._freeze()
        heads = _heads(self.cluster_id)
        snap = self.snapshot
        if snap is not None and snap.features == features_key(cluster) and _caught_up(snap.seen, heads):
            return snap.inventory, self._obtained("current", started, snap)
        remaining = deadline.remaining() if deadline is not None else None
        waited = not self._update.acquire(blocking=False)  # someone else holds it: their build or update is ours now
        if waited and not self._update.acquire(timeout=-1 if remaining is None else remaining):
            since = self.building_since
            if since is None:  # an update held it this long, or the build ended just now: one more short try
                if not self._update.acquire(timeout=1.0):
                    raise BuildInProgress(0.0, self.last_build_seconds)
            else:
                raise BuildInProgress(time.monotonic() - since, self.last_build_seconds)
        try:
            # Read again under the lock: another thread may have applied past what we read above.
            heads = _heads(self.cluster_id)
            snap = self.snapshot
            how = "waited" if waited else "current"
            if snap is None or snap.features != features_key(cluster) or _needs_rebuild(snap.seen, heads):
                snap = self.snapshot = self._build(cluster, features)
                how = "built"
            elif not _caught_up(snap.seen, heads):
                how = "waited" if waited else "updated"
                try:
                    snap = self.snapshot = self._catch_up(snap, heads)
                except Exception:  # never stay stuck on one update: start over from the rows
                    log.exception("updating the preview inventory of cluster %s failed; rebuilding it", cluster.name)
                    snap = self.snapshot = self._build(cluster, features)
                    how = "built"
            return snap.inventory, self._obtained(how, started, snap)
        finally:
            self._update.release()

    @staticmethod
    def _obtained(how, started, snap):
        return Obtained(how, time.monotonic() - started, snap.build_seconds, snap.built_at)

    def warm(self, cluster, features, work):
        """Bring the inventory up to date as `current` does, and run `work(inventory)` (previews that
        fill its caches) under the same lock before a new build is published: previews arriving
        meanwhile wait for this build, then find it warm. Returns the inventory."""
        with self._update:
            heads = _heads(self.cluster_id)
            snap = self.snapshot
            fresh = snap is None or snap.features != features_key(cluster) or _needs_rebuild(snap.seen, heads)
            if fresh:
                snap = self._build(cluster, features)
            elif not _caught_up(snap.seen, heads):
                snap = self.snapshot = self._catch_up(snap, heads)
            try:
                work(snap.inventory)
            finally:
                if fresh:
                    self._freeze()  # what the first preview would have frozen: published frozen
                    self.snapshot = snap
            return snap.inventory

    def _build(self, cluster, features):
        self.building_since = time.monotonic()
        try:
            snap = self._build_now(cluster, features)
        finally:
            self.building_since = None
        self.last_build_seconds = snap.build_seconds
        return snap

    def _build_now(self, cluster, features):
        started = time.perf_counter()
        heads = _heads(self.cluster_id)  # before the rows: later changes are applied after
        # Millions of long-lived objects: the cyclic collector, left on, re-scans them again and again
        # while they are made (more than half of the build); afterwards they are frozen out of its scans.
        with collector_paused():
            plain = set()  # devices whose values are all plain: their first preview need not check them
            objects = load_all(self.cluster_id, plain)
            inv = Inventory(features=features, plain_devices=plain, **objects)
            del objects, plain
        self._freeze_after = 2  # now, and once more after the first preview filled the views and CEL caches
        self._freeze()
        self.builds += 1
        seconds = time.perf_counter() - started
        log.info("preview inventory of cluster %s built in %.2f s", cluster.name, seconds)
        return Snapshot(
            inv,
            {kind: (seq, epoch) for kind, (seq, _, epoch) in heads.items()},
            features_key(cluster),
            time.time(),
            seconds,
        )

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
            if model is _SLICES:
                share_device_values(found.values(), {})
            upserts[kwarg] = [found[k] for k in sorted(found)]
            namespaced = kwarg in ("resource_claims", "resource_claim_templates", "pods", "pod_footprints")
            removals[kwarg] = [k if namespaced else k[1] for k in sorted(keys - found.keys())]
        read = time.perf_counter()
        inv = snap.inventory.with_changes(upserts, removals)
        self.updates += 1
        self.last_update = (len(changed), read - started, time.perf_counter() - read)
        seen = {kind: (seq, epoch) for kind, (seq, _, epoch) in heads.items()}
        return Snapshot(inv, seen, snap.features, snap.built_at, snap.build_seconds)  # built_at: of the full build


def _caught_up(seen, heads):
    """`seen` already includes every change `heads` counts (same cursors, no fewer transactions)."""
    if seen.keys() - heads.keys():
        return False
    return all(
        kind in seen and seen[kind][1] == epoch and seen[kind][0] >= seq for kind, (seq, _, epoch) in heads.items()
    )


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


def load_raw(model, cluster_id, plain=None):
    """Every row's raw JSON, in (namespace, name) order. Read as text and parsed with orjson: faster
    than letting the driver decode jsonb with the json module. Slices' device values are
    shared (share_device_values, which adds their plain devices to `plain`)."""
    rows = []
    parse = _parser(model, rows, plain)
    # Streamed (a server-side cursor on PostgreSQL) and shared row by row: the text of every row and
    # the unshared copies never all exist at once (a 20,000-node fleet's slices are 0.3 GB of text).
    with connection.chunked_cursor() as cursor:
        cursor.execute(_select_all(model), [cluster_id])
        while True:
            chunk = cursor.fetchmany(2000)
            if not chunk:
                break
            parse(chunk)
    return rows


def _select_all(model):
    table = connection.ops.quote_name(model._meta.db_table)
    cast = "raw::text" if connection.vendor == "postgresql" else "raw"
    return f"SELECT {cast} FROM {table} WHERE cluster_id = %s ORDER BY namespace, name"


def _parser(model, rows, plain):
    """A function that parses a chunk of (text,) rows onto `rows` (slices: values shared)."""
    loads, append = orjson.loads, rows.append
    if model is not _SLICES:

        def parse(chunk):
            for (text,) in chunk:
                append(loads(text))

        return parse
    memo = {}

    def parse_slices(chunk):
        for (text,) in chunk:
            row = loads(text)
            share_device_values((row,), memo, plain)
            append(row)

    return parse_slices


_READ_AHEAD = 8  # chunks of rows the reader thread may hold before this one parses them
_CHUNK_ROWS = 500


def load_all(cluster_id, plain=None):
    """{Inventory keyword: rows} of every kind in SOURCES, as load_raw reads each.

    On PostgreSQL, outside a transaction, a second thread reads the rows (its own connection, in one
    transaction, so that its server-side cursors stream instead of being materialised first) while
    this one parses them: the server's part (turning jsonb into text, about as long as the parsing)
    overlaps with the parsing instead of coming before it. Elsewhere (SQLite, inside a transaction,
    e.g. in tests) each kind is read in this thread."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return {kwarg: load_raw(model, cluster_id, plain) for kwarg, model in SOURCES.values()}
    from django.db import transaction

    chunks = queue.Queue(maxsize=_READ_AHEAD)
    stop = threading.Event()

    def read():
        try:
            with transaction.atomic():
                for kwarg, model in SOURCES.values():
                    if stop.is_set():  # the parsing thread gave up (it raised)
                        break
                    with connection.chunked_cursor() as cursor:
                        cursor.execute(_select_all(model), [cluster_id])
                        while not stop.is_set():
                            chunk = cursor.fetchmany(_CHUNK_ROWS)
                            if not chunk:
                                break
                            chunks.put((kwarg, chunk))
            chunks.put((None, None))
        except BaseException as exc:  # handed to the parsing thread, which raises it
            chunks.put((None, exc))
        finally:
            connection.close()

    out, parsers = {}, {}
    for kwarg, model in SOURCES.values():
        out[kwarg] = []
        parsers[kwarg] = _parser(model, out[kwarg], plain)
    reader = threading.Thread(target=read, name="preview-inventory-reader", daemon=True)
    reader.start()
    try:
        while True:
            kwarg, chunk = chunks.get()
            if kwarg is None:
                if chunk is not None:
                    raise chunk
                break
            parsers[kwarg](chunk)
    finally:
        stop.set()
        while reader.is_alive():  # a reader blocked on a full queue finishes once it has room
            try:
                chunks.get(timeout=0.1)
            except queue.Empty:
                pass
        reader.join()
    return out


def share_device_values(slices, memo, plain=None):
    """One object per distinct attribute / capacity value among the devices of `slices` (in place).

    A fleet's devices repeat the same few values (`{"string": "gpu"}`, `{"version": "580.95.5"}`,
    `{"value": "80Gi"}`) hundreds of thousands of times; parsed per row, each is its own dict and
    string, more than half of a 20,000-node inventory's memory. These rows are this module's own and
    read only by the engine, which never changes them, so equal values can be one object. `memo`
    (a dict, filled here) is shared by the calls of one inventory.

    `plain` (a set): gets the id of every device dict whose values are all plain (projection.plain_value,
    judged once per distinct value): `Inventory(plain_devices=...)` then skips checking those devices
    one by one in the first preview. Equal consumesCounters and sharedCounters maps are shared too
    (_share_counters)."""
    if not memo:
        memo.update(
            {field: ({}, {}) for field in ("attributes", "capacity")}
        )  # per field: (plain, other) values by key
        memo["counters"] = {}  # consumesCounters and sharedCounters maps by their JSON text
    attr_memo, cap_memo, counter_memo = memo["attributes"], memo["capacity"], memo["counters"]
    for raw in slices:
        spec = raw.get("spec") if isinstance(raw, dict) else None
        shared_counters = spec.get("sharedCounters") if isinstance(spec, dict) else None
        if type(shared_counters) is list:  # a counter slice's totals repeat per GPU model as well
            _share_counters(shared_counters, counter_memo)
        devices = spec.get("devices") if isinstance(spec, dict) else None
        if not isinstance(devices, list):
            continue
        for dev in devices:
            if type(dev) is not dict:
                continue
            attrs, caps = dev.get("attributes"), dev.get("capacity")
            # Missing or empty (the engine reads {}) is plain; a map is plain when each value is.
            ok = _share_map(attrs, attr_memo, ATTRIBUTE) if type(attrs) is dict else not attrs
            ok = (_share_map(caps, cap_memo, CAPACITY) if type(caps) is dict else not caps) and ok
            if ok and plain is not None:
                plain.add(id(dev))
            consumes = dev.get("consumesCounters")
            if type(consumes) is list:
                _share_counters(consumes, counter_memo)
    return slices


def _share_counters(entries, memo):
    """Make equal `counters` maps of consumesCounters or sharedCounters entries one object. A MIG
    profile consumes the same 15 counters on every GPU of its model: at 20,000 nodes, 96,000 such maps
    of 3 distinct ones, about 320 MiB parsed one by one; the counter slices' 32,000 totals are as
    alike. Keyed by the map's JSON text, which orjson writes faster than Python could walk the map;
    the engine then parses each shared map once (model.parsed_counters)."""
    for entry in entries:
        counters = entry.get("counters") if type(entry) is dict else None
        if type(counters) is dict:
            text = orjson.dumps(counters)
            shared = memo.get(text)
            if shared is None:
                memo[text] = counters
            elif shared is not counters:
                entry["counters"] = shared


def _share_map(values, memo, wanted):
    """Share the values of one attribute or capacity map; True when all are `wanted` (plain_value)."""
    good, other = memo
    ok = True
    for name, value in values.items():  # replacing values keeps the dict's size: safe while iterating
        if type(value) is dict and len(value) == 1:
            ((kind, item),) = value.items()
            if type(item) in _SHAREABLE:
                key = (kind, type(item), item)
                shared = good.get(key)
                if shared is not None:
                    if shared is not value:
                        values[name] = shared
                    continue
                shared = other.get(key)
                if shared is None:
                    if plain_value(kind, item) is wanted:
                        good[key] = value
                        continue
                    other[key] = value
                elif shared is not value:
                    values[name] = shared
        ok = False
    return ok


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
            cursor.execute(
                f"SELECT namespace, name, {cast} FROM {table} WHERE cluster_id = %s AND (namespace, name) IN ({marks})",
                [cluster_id, *(part for key in chunk for part in key)],
            )
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
    for is then a warm one. Both happen under the inventory's update lock, before the inventory is
    published (LiveInventory.warm): a preview that arrives meanwhile waits for this build and gets
    the warmed inventory, it never starts a second build. Meant for a background thread at server
    start (start_warm_up)."""
    from mirror.models import Cluster

    started = time.perf_counter()
    try:
        for cluster in clusters if clusters is not None else Cluster.objects.all():
            try:
                live_inventory(cluster.pk).warm(cluster, _features(cluster), _warm_previews)
            except ValueError as exc:  # bad feature settings (PreviewError): the cluster's previews say so themselves
                log.warning("preview warm-up of cluster %s skipped: %s", cluster.name, exc)
        log.info("preview inventories warmed up in %.1f s", time.perf_counter() - started)
    except Exception:  # a warm-up is an optimisation: never let it take the server down
        log.exception("preview warm-up failed")


def _warm_previews(inventory):
    """One engine preview per DeviceClass (as run_preview makes it for WARM_UP_CLAIM: a would-be pod,
    node filters on), for the caches it leaves behind; the answers are dropped."""
    for name in sorted(inventory.classes):
        try:
            documents = load_documents(WARM_UP_CLAIM % name, "YAML")
            claims, bound = resolve_claims(inventory, documents)
            preview(inventory, claims, bound=bound, pod=scheduling_pod(documents))
        except Exception as exc:  # e.g. a class whose name is no valid object name: its previews say so
            log.warning("preview warm-up of class %s skipped: %s", name, exc)


_warm_up_thread = None
_warm_up_times = {}  # "started" / "finished": time.monotonic() of this process's warm-up

# Readiness waits this long for the warm-up at most (mirror/health.py): a cluster so big that its
# build takes longer is served cold rather than kept out of its Service for good.
WARM_UP_READY_WAIT = 300.0


def warm_up_status():
    """This process's preview warm-up for the readiness probe: ("off" | "warming" | "done", seconds).
    "warming" only while it runs and for at most WARM_UP_READY_WAIT seconds ("done" after that: the
    previews build the inventory themselves, as they do whenever it is missing)."""
    thread, times = _warm_up_thread, dict(_warm_up_times)
    if thread is None or "started" not in times:
        return "off", 0.0
    finished = times.get("finished")
    if finished is not None:
        return "done", finished - times["started"]
    running = time.monotonic() - times["started"]
    if running >= WARM_UP_READY_WAIT or not thread.is_alive():
        return "done", running
    return "warming", running


def start_warm_up():
    """warm_up in a daemon thread (its own database connection, closed when done), once per process
    and only when settings.GPUDASH_PREVIEW_WARM_UP is on (the default; off in the test suite). Called
    as the web process starts (gpudash/asgi.py, `manage.py serve`). Returns the thread, or None."""
    global _warm_up_thread
    from django.conf import settings

    if not getattr(settings, "GPUDASH_PREVIEW_WARM_UP", False):
        return None
    with _live_lock:
        if _warm_up_thread is not None:
            return _warm_up_thread

        def run():
            try:
                warm_up()
            finally:
                _warm_up_times["finished"] = time.monotonic()
                connection.close()

        _warm_up_times.clear()
        _warm_up_times["started"] = time.monotonic()
        _warm_up_thread = threading.Thread(target=run, name="preview-warm-up", daemon=True)
        _warm_up_thread.start()
        return _warm_up_thread


def _features(cluster):
    """The cluster's scheduler feature gates; a ValueError names a bad setting (as preview.features_of's)."""
    try:
        return Features.from_dict(cluster.features)
    except ValueError as exc:
        raise ValueError(f"cluster {cluster.name}: {exc}") from None


def node_raws(cluster, names):
    """{name: raw Node} of the named nodes: the what-if clones and drains whole Node objects, which the
    preview inventory keeps only in part (what node filters read)."""
    return dict(_stored("Node").objects.filter(cluster=cluster, name__in=names).values_list("name", "raw"))
