"""Putting objects from the API server into the mirror: idempotent, in bulk, never going back in time.

`apply_batch` is the one path every watcher uses: a list page or a run of watch events is validated,
replayed in order against what the database holds (so duplicates, replays and out-of-order events
change nothing), and the net result written with a handful of bulk statements. `apply_object` and
`delete_object` wrap it for one object (tests, release actions writing back what the API returned).
"""

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection, models, transaction
from django.db.models import TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast
from django.utils import timezone

from mirror.accelerators import has_pod_assignment
from mirror.models import resource_version_number

from . import changelog, fastjson, footprints, pgcopy
from . import events as events_mirror
from .hooks import hooks
from .kinds import KINDS_BY_NAME
from .publish import Change, publish_on_commit

log = logging.getLogger(__name__)

LISTED, ADDED, MODIFIED, DELETED = "LISTED", "ADDED", "MODIFIED", "DELETED"
_WRITE_BATCH = 1000


class MalformedObject(ValueError):
    """An object the mirror cannot store; the message names what is wrong and where."""


@dataclass
class BatchResult:
    changes: list = field(default_factory=list)  # publish.Change
    malformed: list = field(default_factory=list)  # (message, text) pairs
    seen_ids: set = field(default_factory=set)  # row ids of the objects in the batch that are stored now
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    # Pools whose stored device state is left for the caller to refresh (apply_batch(defer_device_state=True)).
    device_pools: set = field(default_factory=set)
    footprint_keys: set = field(
        default_factory=set
    )  # pods whose footprint is stored now (a pod relist's reconcile keeps them)
    analyze: bool = False  # statistics are due (many rows inserted) and left for the caller (defer_device_state=True)

    @property
    def written(self):
        return self.inserted + self.updated + self.deleted


# --- which pods are mirrored -------------------------------------------------------------------


def _driver_pod_rules():
    """(label key, substring) pairs and exact selectors that mark a DRA driver pod."""
    substrings = settings.GPUDASH_SYNC.get("DRIVER_POD_LABELS", {"app.kubernetes.io/name": "dra"})
    selectors = []
    ops = getattr(settings, "GPUDASH_OPS", {})
    if ops.get("DRIVER_POD_LABEL"):
        selectors.append({ops["DRIVER_POD_LABEL"]: None})  # any value
    for selector in (ops.get("DRIVER_POD_SELECTORS") or {}).values():
        pairs = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        if pairs:
            selectors.append(pairs)
    return substrings, selectors


def is_driver_pod(raw):
    labels = (raw.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict):
        return False
    substrings, selectors = _driver_pod_rules()
    for key, needle in substrings.items():
        value = labels.get(key)
        if isinstance(value, str) and needle in value:
            return True
    for selector in selectors:
        if all(key in labels and (want is None or labels[key] == want) for key, want in selector.items()):
            return True
    return False


def pod_is_mirrored(raw):
    """Only pods that use DRA (claims, DRA-backed extended resources), DRA driver pods and pods HAMi
    assigned vGPUs to (annotation, mirror/accelerators.py) are stored."""
    return KINDS_BY_NAME["Pod"].model.uses_dra(raw) or is_driver_pod(raw) or has_pod_assignment(raw)


# --- validation ---------------------------------------------------------------------------------

_char_limits_cache = {}


def _char_limits(model):
    if model not in _char_limits_cache:
        _char_limits_cache[model] = {
            f.attname: f.max_length
            for f in model._meta.concrete_fields
            if isinstance(f, models.CharField) and f.max_length
        }
    return _char_limits_cache[model]


def _describe(raw):
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if isinstance(meta, dict):
        return f"{meta.get('namespace') or ''}/{meta.get('name') or '?'}".lstrip("/")
    return "?"


def validated_fields(kind, raw):
    """Column values for `raw`, or MalformedObject naming the problem."""
    spec = KINDS_BY_NAME[kind]
    if not isinstance(raw, dict):
        raise MalformedObject(f"{kind}: expected a JSON object, got {type(raw).__name__}")
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise MalformedObject(f"{kind}: metadata missing or not an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedObject(f"{kind}: metadata.name missing or not a string")
    for key in ("namespace", "uid", "resourceVersion"):
        if meta.get(key) is not None and not isinstance(meta.get(key), str):
            raise MalformedObject(f"{kind} {_describe(raw)}: metadata.{key} is not a string")
    if spec.namespaced and not meta.get("namespace"):
        raise MalformedObject(f"{kind} {name}: metadata.namespace missing on a namespaced kind")
    for key in ("spec", "status", "labels"):
        holder = meta if key == "labels" else raw
        if holder.get(key) is not None and not isinstance(holder.get(key), dict):
            raise MalformedObject(f"{kind} {_describe(raw)}: {key} is not an object")
    model = spec.model
    try:
        fields = model.fields_from_raw(raw)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise MalformedObject(f"{kind} {_describe(raw)}: cannot read fields ({type(exc).__name__}: {exc})") from exc
    for attname, limit in _char_limits(model).items():
        value = fields.get(attname)
        if isinstance(value, str) and len(value) > limit:
            raise MalformedObject(f"{kind} {_describe(raw)}: {attname} longer than {limit} characters")
    return fields


def _text(raw, limit=2000):
    try:
        text = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(raw)
    return text[:limit]


# --- the batch ------------------------------------------------------------------------------------

# The parts of `raw` each model's child_rows() reads. When an update leaves them equal, the child rows
# (devices of a slice, results of a claim) are left as they are instead of being rebuilt.
CHILD_SOURCES = {
    "ResourceSlice": ("spec",),
    "ResourceClaim": ("status__allocation", "status__reservedFor", "status__devices"),
    "Pod": (
        "spec__resourceClaims",
        "status__resourceClaimStatuses",
        "status__extendedResourceClaimStatus",
        "status__containerStatuses",
        "status__initContainerStatuses",
    ),
}


# Which of those parts each child model is built from, where they differ: a claim's results come from
# its allocation and its consumers from reservedFor, so a reservation leaves the results alone. Kinds
# not named build every child model from every part.
# A driver's device status (status.devices) and the kubelet's health reports (container statuses)
# rebuild their own rows only.
CHILD_MODEL_SOURCES = {
    "ResourceClaim": {"claims.AllocationResult": (0,), "claims.ClaimConsumer": (1,), "claims.ClaimDeviceStatus": (2,)},
    "Pod": {"claims.PodClaimRef": (0, 1, 2), "claims.PodResourceHealth": (0, 1, 3, 4)},
}


def _health_view(statuses):
    """What the health rows read of a pod's container statuses: names and allocatedResourcesStatus
    (a container turning ready or restarting leaves them as they are)."""
    if not isinstance(statuses, list):
        return statuses
    return [(s.get("name"), s.get("allocatedResourcesStatus")) if isinstance(s, dict) else s for s in statuses]


# Parts compared through a view for one child model: {(kind, label): {part index: view}}.
CHILD_SOURCE_VIEWS = {("Pod", "claims.PodResourceHealth"): {3: _health_view, 4: _health_view}}


def _stale_children(kind, model, old_src, new_src):
    """The child models (labels) of an updated row whose source in `raw` changed."""
    parts = CHILD_MODEL_SOURCES.get(kind)
    if parts is None:
        return set(model.child_models) if old_src != new_src else set()

    def changed(label, i):
        view = CHILD_SOURCE_VIEWS.get((kind, label), {}).get(i)
        return old_src[i] != new_src[i] if view is None else view(old_src[i]) != view(new_src[i])

    return {label for label in model.child_models if any(changed(label, i) for i in parts[label])}


def _child_source(kind, raw):
    out = []
    for path in CHILD_SOURCES[kind]:
        value = raw
        for key in path.split("__"):
            value = value.get(key) if isinstance(value, dict) else None
        out.append(value)
    return out


def _node_of(kind, fields):
    if kind == "Node":
        return fields.get("name") or ""
    return fields.get("node_name") or ""


def _state_of(kind, fields):
    if kind == "ResourceClaim":
        return fields.get("state")
    if kind == "Pod":
        return fields.get("phase") or None
    if kind == "Node":
        ready = fields.get("ready")
        return None if ready is None else ("Ready" if ready else "NotReady")
    return None


def _may_hold(cur):
    """Whether a stored claim may hold devices: not gone, not pending (a pending claim has no allocation)."""
    return cur is not None and not cur.deleted and cur.state != "pending"


@dataclass
class _Current:
    """What is (or would be, after the events so far) stored under one (namespace, name)."""

    id: int | None
    uid: str
    rv_num: int
    resource_version: str
    state: str | None
    node: str
    fields: dict | None = None  # set when an event in this batch produced it
    deleted: bool = False
    child_src: list | None = None  # what the stored row's children were built from (CHILD_SOURCES)


def _existing(model, cluster, keys, kind=None):
    """{(namespace, name): _Current} for the rows already stored under these keys."""
    found = {}
    names = sorted({name for _, name in keys})
    namespaces = sorted({namespace for namespace, _ in keys})
    has_state = any(f.attname == "state" for f in model._meta.concrete_fields)
    has_node = any(f.attname == "node_name" for f in model._meta.concrete_fields)
    # The child sources as JSON text, parsed here with orjson (the JSONField's json.loads per value
    # was a third of this read); text that does not parse leaves the source unknown: rebuilt.
    sources = {
        f"_src{i}": Cast(_key_transform("raw", path), TextField()) for i, path in enumerate(CHILD_SOURCES.get(kind, ()))
    }
    columns = ["id", "namespace", "name", "uid", "resource_version_num", "resource_version"]
    columns += ["state"] if has_state else []
    columns += ["node_name"] if has_node else []
    rows = (
        model.objects.filter(cluster=cluster, namespace__any_of=namespaces, name__any_of=names)
        .annotate(**sources)
        .values_list(*columns, *sources)
    )
    width = len(columns)
    for row in rows:
        key = (row[1], row[2])
        if key in keys:
            values = dict(zip(columns, row[:width]))
            node = values.get("node_name", values["name"] if model._meta.model_name == "node" else "")
            current = _Current(
                values["id"],
                values["uid"],
                values["resource_version_num"],
                values["resource_version"],
                values.get("state"),
                node,
            )
            if sources:
                current.child_src = _parsed_sources(row[width:])
            found[key] = current
    return found


def _key_transform(column, path):
    out = column
    for key in path.split("__"):
        out = KeyTransform(key, out)
    return out


def _parsed_sources(texts):
    try:
        return [None if text is None else fastjson.loads(text) for text in texts]
    except ValueError:
        return None


def _is_stale(current, new_rv_num):
    # resourceVersions are comparable integers on every conformant server; 0 means "unknown": apply.
    return bool(current is not None and current.rv_num and new_rv_num and new_rv_num <= current.rv_num)


def apply_batch(cluster, kind, events, publish=True, record_states=True, defer_device_state=False, observed=None):
    """Apply [(event type, raw), ...] in order; returns a BatchResult. Runs in one transaction.

    Event types: LISTED (an item of a list), ADDED, MODIFIED, DELETED. Malformed objects are logged,
    reported in the result and skipped; they never abort the batch. `observed`: when the sync saw
    each event and whether that is the moment it happened, as one (datetime, exact) for the batch or a
    list aligned with `events` (the watcher's receipt times; hooks.ledger_claims gets them); by default
    now, exact for watch events and not for list items.
    """
    spec = KINDS_BY_NAME[kind]
    model = spec.model
    result = BatchResult()
    now = timezone.now()
    ledger = kind == "ResourceClaim" and kind in hooks.ledger_kinds
    whens = []  # per op: (observed at, exact), for the ledger

    ops = []  # (event, key, fields or None for a delete, raw)
    for index, (event, raw) in enumerate(events):
        try:
            fields = validated_fields(kind, raw)
        except MalformedObject as exc:
            log.warning("malformed %s object skipped (%s): %s", kind, exc, _text(raw))
            result.malformed.append((str(exc), _text(raw)))
            continue
        key = (fields["namespace"], fields["name"])
        if event != DELETED and kind == "Pod" and not pod_is_mirrored(raw):
            event = "DROP"  # a pod that (no longer) uses DRA: remove it if stored
        ops.append((event, key, fields, raw))
        if ledger:
            when = observed[index] if isinstance(observed, list) else observed
            whens.append(when or (now, event != LISTED))
    if kind == "Event" and ops:  # only events about what the mirror holds (mirror/sync/events.py)
        dropped = events_mirror.unwanted(cluster, [op for op in ops if op[0] != DELETED])
        ops = [("DROP" if op[0] != DELETED and op[1] in dropped else op[0], *op[1:]) for op in ops]
    if not ops:
        return result

    with transaction.atomic():
        initial = _existing(model, cluster, {key for _, key, _, _ in ops}, kind)
        current = dict(initial)
        state_changes = []
        changes = {}
        ledger_ops = []  # (uid, replaced uid, raw or None, observed at, exact) of the events that apply
        for position, (event, key, fields, raw) in enumerate(ops):
            cur = current.get(key)
            rv_num = fields["resource_version_num"]
            if event in (DELETED, "DROP"):
                if cur is None or cur.deleted:
                    continue
                if event == DELETED and fields["uid"] and cur.uid and fields["uid"] != cur.uid:
                    continue  # the delete of an older incarnation of this name
                if cur.rv_num and rv_num and (rv_num < cur.rv_num if event == DELETED else rv_num <= cur.rv_num):
                    continue  # a replay from before the stored version
                if kind == "ResourceClaim" and record_states:
                    state_changes.append(
                        _state_change(
                            cluster, key, cur.uid, cur.state, "deleted", fields["resource_version"], cur.node, now
                        )
                    )
                changes[key] = Change(
                    cluster.pk,
                    cluster.name,
                    kind,
                    DELETED,
                    key[0],
                    key[1],
                    cur.uid,
                    cur.node,
                    fields["resource_version"] or cur.resource_version,
                    cur.state,
                )
                if ledger and _may_hold(cur):
                    ledger_ops.append((cur.uid, None, None, *whens[position]))
                # A tombstone: a late replay of an older version must not bring the object back.
                current[key] = _Current(
                    None, cur.uid, max(rv_num, cur.rv_num), fields["resource_version"], None, cur.node, deleted=True
                )
                continue
            if _is_stale(cur, rv_num):
                continue
            state = _state_of(kind, fields)
            node = _node_of(kind, fields)
            same_object = cur is not None and not cur.deleted and cur.uid == fields["uid"]
            # The ledger follows what claims hold: an event that finds and leaves the claim pending (no
            # allocation before or after, e.g. a new or annotated pending claim) changes nothing there.
            if ledger and (fields.get("allocated") or _may_hold(cur)):
                replaced = cur.uid if cur is not None and not cur.deleted and not same_object else None
                ledger_ops.append((fields["uid"], replaced, raw, *whens[position]))
            if kind == "ResourceClaim" and record_states:
                old_state = cur.state if same_object else ""
                if old_state != state:
                    at = _state_began(old_state, state, fields, now)
                    state_changes.append(
                        _state_change(
                            cluster, key, fields["uid"], old_state, state, fields["resource_version"], node, at
                        )
                    )
            change_event = MODIFIED if same_object and (cur.id is not None or key in changes) else ADDED
            if key in changes and changes[key].event == ADDED and same_object:
                change_event = ADDED  # added and modified within one batch: still new to listeners
            changes[key] = Change(
                cluster.pk,
                cluster.name,
                kind,
                change_event,
                key[0],
                key[1],
                fields["uid"],
                node,
                fields["resource_version"],
                state,
            )
            current[key] = _Current(
                cur.id if same_object else None, fields["uid"], rv_num, fields["resource_version"], state, node, fields
            )

        # The net effect per key against what the database held.
        to_delete, to_insert, to_update = [], [], []
        for key, final in current.items():
            before = initial.get(key)
            if final.deleted:
                if before is not None:
                    to_delete.append(before.id)
                continue
            if final.fields is None:  # untouched: stale or duplicate events only
                result.seen_ids.add(final.id)
                result.unchanged += 1
                continue
            if before is not None and (final.id is None or final.id != before.id):
                to_delete.append(before.id)  # same name, new uid: a re-created object
            row = model(cluster=cluster, **final.fields)
            row._from_raw_fields = final.fields.keys()
            if final.id is not None:
                row.pk = final.id
                to_update.append(row)
                if before.child_src is not None:
                    new_src = _child_source(kind, final.fields["raw"])
                    row._stale_children = _stale_children(kind, model, before.child_src, new_src)
                    # Device state follows the first child source only (a slice's spec, a claim's
                    # allocation): a claim whose reservedFor alone changed leaves its devices alone.
                    row._state_source_unchanged = before.child_src[0] == new_src[0]
            else:
                to_insert.append(row)

        restated = [row.pk for row in to_update if not getattr(row, "_state_source_unchanged", False)]
        touched = _device_pools(kind, to_delete + restated)  # what the rows held before the write
        replaced = _replaced_slices(kind, model, to_delete, to_update)
        _delete_ids(model, to_delete)
        _insert(model, to_insert)
        _update(model, to_update)
        _rebuild_children(model, to_insert, to_update)
        hooks.vanished_record(cluster, replaced, now)
        if len(to_insert) >= ANALYZE_AFTER_INSERTS:
            if defer_device_state:
                result.analyze = True  # a list's pages: once at its end (take_statistics), not per page
            else:
                _analyze(model)
        if kind in hooks.pools_of:
            pools = touched | _device_pools(kind, [row.pk for row in to_insert] + restated)
            if defer_device_state:
                result.device_pools = pools
            else:
                hooks.refresh_pools(pools)
        if kind in hooks.class_count_kinds and (to_insert or to_update or to_delete):
            hooks.request_class_counts(cluster, [kind])
        if state_changes:
            _insert(apps.get_model("claims.ClaimStateChange"), state_changes)
        if ledger_ops:
            hooks.ledger_claims(cluster, ledger_ops)
        if kind == "Pod":  # every pod, DRA or not: what it takes from its node (preview node filters)
            accelerator_nodes = hooks.nodes_of_pods(cluster.pk, ops)
            result.footprint_keys = footprints.apply(cluster, ops)
            hooks.refresh_nodes(cluster.pk, accelerator_nodes)  # device-plugin / HAMi GPUs in use
        if kind == "Node":  # device-plugin and HAMi GPUs the nodes offer (inventory/accelerators.py)
            hooks.refresh_nodes(
                cluster.pk,
                {k[1] for k, f in current.items() if f.deleted or f.fields},
                raws={k[1]: f.fields["raw"] for k, f in current.items() if not f.deleted and f.fields},
            )
        if kind == "Event":
            events_mirror.prune(cluster)  # bounded in count and age
        if kind in hooks.health_kinds and (to_insert or to_update or to_delete):
            hooks.refresh_health(cluster, kind)  # after the rows and their children are written
        changelog.record(cluster.pk, kind, changes)  # last write: its lock orders the log (changelog.py)

        result.inserted, result.updated, result.deleted = len(to_insert), len(to_update), len(to_delete)
        result.seen_ids.update(row.pk for row in to_insert + to_update)
        result.changes = list(changes.values())
        if publish:
            publish_on_commit(result.changes)
    return result


# PostgreSQL plans the device-state UPDATEs (correlated lookups of allocation results) from table
# statistics; right after a bulk load those say "empty" and it picks a nested loop that scans every
# result per device (a hundred times slower per batch). Autovacuum catches up only a minute later, so
# a batch that inserted many rows refreshes the statistics itself. A LIST does it once, at its end,
# before its deferred device-state refresh (take_statistics): ANALYZE of a device table of 50,000+ rows with JSON
# columns takes seconds, and once per page of 500 objects it was most of an initial sync's time.
ANALYZE_AFTER_INSERTS = 200
# What refresh_pools reads (inventory/devicestate.py): analyzed with a list's own tables when the
# list's end refreshes pools, since another kind's list may still be filling them.
DEVICE_STATE_TABLES = (
    "inventory.Device",
    "claims.AllocationResult",
    "inventory.SharedCounterSet",
    "inventory.NodeDeviceSummary",
)


def _analyze(model, also=()):
    """ANALYZE the model's tables (its own and its children's: the caller inserted many rows), and of
    `also` (labels) those whose statistics are stale: never taken, or counting under half the rows
    now committed. Another kind's list end may just have analyzed a shared table (the devices), and
    again would cost seconds for the same statistics."""
    if connection.vendor != "postgresql":
        return
    own = [model._meta.db_table] + [
        apps.get_model(label)._meta.db_table for label in getattr(model, "child_models", {})
    ]
    shared = sorted({apps.get_model(label)._meta.db_table for label in also} - set(own))
    with connection.cursor() as cursor:
        if shared:
            cursor.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid "
                "WHERE c.relname = ANY(%s) AND (c.reltuples < 0 OR s.n_live_tup > 2 * c.reltuples)",
                [shared],
            )
            shared = [name for (name,) in cursor.fetchall()]
        # Inside a transaction ANALYZE holds each table's lock (ShareUpdateExclusive) until commit: one
        # global order, the sorted names, so two of them wait for each other, never in a cycle (own
        # tables first deadlocked a slice and a claim list end before take_statistics ran outside).
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in sorted(set(own) | set(shared))))


# Kinds whose child rows decide the stored device state (inventory/devicestate.py registers them in
# hooks.pools_of): a slice's devices and counter sets, a claim's allocation results. Refreshed per
# batch, by pool.


def _device_pools(kind, ids):
    pools_of = hooks.pools_of.get(kind)
    return pools_of(ids) if pools_of and ids else set()


def _state_began(old_state, new_state, fields, now):
    """When the claim's own timestamps say a state began (the timeline shows the object's time, not
    the watcher's): deletionTimestamp for deleting, creationTimestamp for a claim first seen pending,
    allocationTimestamp for an allocation; otherwise when the watcher saw the change."""
    if new_state == "deleting":
        return fields.get("deletion_timestamp") or now
    if new_state == "pending" and not old_state:
        return fields.get("creation_timestamp") or now
    if new_state == "allocated" and old_state in ("", "pending"):
        return fields.get("allocation_timestamp") or now
    return now


def _state_change(cluster, key, uid, old, new, rv, node, at):
    model = apps.get_model("claims.ClaimStateChange")
    return model(
        cluster_id=cluster.pk,
        namespace=key[0],
        name=key[1],
        uid=uid or "",
        at=at,
        old_state=old or "",
        new_state=new or "",
        resource_version=rv or "",
        node_name=node or "",
    )


def _delete_ids(model, ids):
    if ids:
        model.objects.filter(pk__any_of=ids).delete()


def _insert(model, rows):
    if rows and pgcopy.available():
        pgcopy.insert(model, rows)
    elif rows:
        # Returns primary keys on PostgreSQL and on SQLite >= 3.35 (RETURNING); children need them.
        model.objects.bulk_create(rows, batch_size=_WRITE_BATCH)


def _update(model, rows):
    if not rows:
        return
    now = timezone.now()
    for row in rows:
        row.synced_at = now
    # Only the columns read from raw: columns other parts of gpudash maintain are left alone.
    names = [
        f.name for f in model._meta.concrete_fields if f.attname in rows[0]._from_raw_fields or f.name == "synced_at"
    ]
    if pgcopy.available():
        pgcopy.update(model, rows, names)
        return
    # bulk_update's CASE expressions grow quadratically with the batch; small batches keep it linear.
    model.objects.bulk_update(rows, names, batch_size=100)


def _replaced_slices(kind, model, deleted, updated):
    """What the slices whose device rows this write drops held (inventory/vanished.py decides after
    the write which of it is gone for good)."""
    if kind != "ResourceSlice":
        return [], []
    rebuilt = [row.pk for row in updated if "inventory.Device" in getattr(row, "_stale_children", model.child_models)]
    return hooks.vanished_snapshot(deleted + rebuilt)


def _rebuild_children(model, inserted, updated):
    """Child rows of new parents, and of updated ones those whose source changed (`_stale_children`,
    every child model when the stored source was not read)."""
    child_models = getattr(model, "child_models", None)
    if not child_models:
        return
    every = set(child_models)
    stale = [(row, getattr(row, "_stale_children", every)) for row in updated]
    for label, fk_name in child_models.items():
        _child_delete(label, fk_name, [row.pk for row, labels in stale if label in labels])
    rows_by_model = defaultdict(list)
    for row, labels in [(row, every) for row in inserted] + [(row, labels) for row, labels in stale if labels]:
        for child in row.child_rows(labels):
            if child._meta.label in labels:
                rows_by_model[type(child)].append(child)
    for child_model, rows in rows_by_model.items():
        _insert(child_model, rows)


def _child_delete(label, fk_name, parent_ids):
    if not parent_ids:
        return
    child_model = apps.get_model(label)
    qs = child_model.objects.filter(**{f"{fk_name}_id__any_of": parent_ids})
    if child_model._meta.related_objects:
        qs.delete()  # something points at these rows: let the ORM cascade
    else:
        qs._raw_delete(qs.db)  # one DELETE statement, no collector


def apply_batch_safely(cluster, kind, events, **kwargs):
    """apply_batch, falling back to one object at a time when the database rejects the batch.

    A single object the database refuses (a value too long for a child column, say) must not stop
    the stream: it is reported as malformed and the rest still lands.
    """
    try:
        return apply_batch(cluster, kind, events, **kwargs)
    except DatabaseError as exc:
        if len(events) == 1:
            raw = events[0][1]
            log.warning("%s %s rejected by the database (%s): %s", kind, _describe(raw), exc, _text(raw))
            return BatchResult(malformed=[(f"{kind} {_describe(raw)}: rejected by the database: {exc}", _text(raw))])
        log.info("%s batch of %d rejected (%s); applying one by one", kind, len(events), exc)
    total = BatchResult()
    observed = kwargs.pop("observed", None)
    for index, event in enumerate(events):
        when = observed[index] if isinstance(observed, list) else observed
        part = apply_batch_safely(cluster, kind, [event], observed=when, **kwargs)
        total.changes += part.changes
        total.malformed += part.malformed
        total.seen_ids |= part.seen_ids
        total.inserted += part.inserted
        total.updated += part.updated
        total.deleted += part.deleted
        total.unchanged += part.unchanged
        total.device_pools |= part.device_pools
        total.footprint_keys |= part.footprint_keys
        total.analyze |= part.analyze
    return total


def take_statistics(kind, device_pools=()):
    """After a LIST whose pages inserted many rows (BatchResult.analyze): ANALYZE its tables, and the
    ones its deferred device-state refresh reads where stale. Call it outside a transaction, before
    reconcile: PostgreSQL then analyzes each table in a transaction of its own and holds no lock
    past it, so another kind's list end never waits on this one."""
    _analyze(KINDS_BY_NAME[kind].model, also=DEVICE_STATE_TABLES if device_pools and kind in hooks.pools_of else ())


def reconcile(cluster, kind, seen_ids, list_rv_num, publish=True, device_pools=(), footprint_keys=None):
    """After a full relist: delete rows the list did not contain.

    Rows changed after the list was taken (a higher resourceVersion, e.g. written back by a release
    action meanwhile) are kept: the watch that follows will tell about them. `device_pools`: pools the
    list's pages deferred (a list refreshes each pool once here instead of once per page touching it).
    `footprint_keys` (pods only): the pods whose footprints the list's pages stored; the others go.
    Statistics for the refresh's plans: take_statistics, before.
    """
    model = KINDS_BY_NAME[kind].model
    if kind == "Pod" and footprint_keys is not None:
        footprints.reconcile(cluster, footprint_keys, list_rv_num)
        hooks.refresh_cluster(cluster.pk)
    has_state = any(f.attname == "state" for f in model._meta.concrete_fields)
    has_node = any(f.attname == "node_name" for f in model._meta.concrete_fields)
    columns = ["id", "namespace", "name", "uid", "resource_version", "resource_version_num"]
    columns += ["state"] if has_state else []
    columns += ["node_name"] if has_node else []
    gone = [
        row
        for row in model.objects.filter(cluster=cluster).values(*columns).iterator(chunk_size=2000)
        if row["id"] not in seen_ids and (not list_rv_num or row["resource_version_num"] <= list_rv_num)
    ]
    if not gone:
        if device_pools:
            hooks.refresh_pools(set(device_pools))
        return []
    now = timezone.now()
    changes = []
    with transaction.atomic():
        touched = _device_pools(kind, [row["id"] for row in gone])
        replaced = _replaced_slices(kind, model, [row["id"] for row in gone], [])
        _delete_ids(model, [row["id"] for row in gone])
        hooks.vanished_record(cluster, replaced, now)
        if kind == "Node":
            hooks.refresh_nodes(cluster.pk, {row["name"] for row in gone}, raws={})
        if touched or device_pools:
            hooks.refresh_pools(touched | set(device_pools))
        if kind in hooks.class_count_kinds:
            hooks.request_class_counts(cluster, [kind])
        for row in gone:
            node = row.get("node_name", row["name"] if kind == "Node" else "")
            changes.append(
                Change(
                    cluster.pk,
                    cluster.name,
                    kind,
                    DELETED,
                    row["namespace"],
                    row["name"],
                    row["uid"],
                    node,
                    row["resource_version"],
                    row.get("state"),
                )
            )
        if kind == "ResourceClaim":
            apps.get_model("claims.ClaimStateChange").objects.bulk_create(
                [
                    _state_change(
                        cluster,
                        (r["namespace"], r["name"]),
                        r["uid"],
                        r.get("state"),
                        "deleted",
                        r["resource_version"],
                        r.get("node_name"),
                        now,
                    )
                    for r in gone
                ],
                batch_size=_WRITE_BATCH,
            )
        if kind in hooks.health_kinds:
            hooks.refresh_health(cluster, kind)
        changelog.record(
            cluster.pk, kind, [(row["namespace"], row["name"]) for row in gone]
        )  # last write (changelog.py)
        if publish:
            publish_on_commit(changes)
    return changes


# --- one object (public API used across the project) ---------------------------------------------


def apply_object(cluster, kind, raw):
    """Insert or update one object. Returns the row, or None when the stored copy is newer (or, for
    a pod, when it is not one gpudash mirrors: then any stored copy is removed).

    An older resourceVersion never overwrites a newer one, so replays and duplicates change nothing.
    A different uid under the same name is a re-created object and replaces the old row.
    """
    model = KINDS_BY_NAME[kind].model
    meta = (raw.get("metadata") or {}) if isinstance(raw, dict) else {}
    if not meta.get("name"):
        raise ValueError(f"{kind} without metadata.name")
    result = apply_batch(cluster, kind, [(MODIFIED, raw)])
    if result.malformed:
        raise MalformedObject(result.malformed[0][0])
    if not (result.inserted or result.updated):
        return None
    return model.objects.get(cluster=cluster, namespace=meta.get("namespace") or "", name=meta["name"])


def delete_object(cluster, kind, raw):
    """Remove one object (a DELETED event). Returns True when a row was removed."""
    result = apply_batch(cluster, kind, [(DELETED, raw)])
    return bool(result.deleted)


__all__ = (
    "apply_object",
    "delete_object",
    "apply_batch",
    "apply_batch_safely",
    "reconcile",
    "resource_version_number",
    "MalformedObject",
)
