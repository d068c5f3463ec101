"""Fleet history: a per-minute sample of the fleet's counts, kept for GPUDASH_HISTORY_DAYS, and the
series the charts and the API read from it.

`sample()` runs once a minute (Celery beat `sample-history`; in the embedded mode a thread of the web
process, monitoring/periodic.py). It stores, per cluster:
  - FleetSample: devices by (model, device kind) with a count per state, from the per-node summary
    through inventory.fleet.FleetSnapshot, so the history says exactly what the overview said;
  - NamespaceSample: per namespace, devices held by its claims (by kind) and its claims by state.
The utilization poll adds each namespace's idle held devices to the same rows (`record_idle`).
`prune()` (beat `prune-history`, hourly) deletes what is older than the retention.

Reading: a chart asks for a span; the span is cut into at most MAX_POINTS points on a step from STEPS,
aligned to the epoch, and only the samples of those minutes are read (an index lookup per point,
instead of reading and averaging every minute of 14 days). Counts are gauges, so the value at each
step is what a chart needs; a minute the sampler missed is a gap (null) in the series.
"""

import logging
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import BigIntegerField, Count, F, Func, Max, Sum
from django.utils import timezone

from .conf import setting
from .models import FleetSample, NamespaceSample

log = logging.getLogger(__name__)

STATE_FIELDS = (
    "free",
    "allocated",
    "admin",
    "partial",
    "tainted",
    "unhealthy",
    "stuck",
)  # = inventory.devicestate.STATES
KIND_FIELDS = ("gpu", "partition", "other")  # = inventory.devicekinds.KINDS
CLAIM_FIELDS = {"pending": "pending", "allocated": "claims_allocated", "reserved": "reserved", "deleting": "deleting"}
NAMESPACE_FIELDS = KIND_FIELDS + tuple(CLAIM_FIELDS.values()) + ("idle",)
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 240, 360, 720, 1440)  # minutes between chart points
MAX_POINTS = 1000


def retention_days():
    """GPUDASH_HISTORY_DAYS (default 14); a value that is not a positive number is refused by name."""
    value = setting("HISTORY_DAYS", 14)
    try:
        days = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"GPUDASH_HISTORY_DAYS must be a number of days, got {value!r}") from None
    if not math.isfinite(days) or days <= 0:
        raise ValueError(f"GPUDASH_HISTORY_DAYS must be more than 0, got {value!r}")
    return days


def minute_of(now):
    return now.replace(second=0, microsecond=0)


# --- writing --------------------------------------------------------------------------------------


def fleet_counts(cluster_ids=None):
    """{(cluster_id, model, kind): {state: devices, "gpus", "gpus_free"[, partition_slots()]}}: the
    overview's counts, per model and device kind (inventory/devicekinds.py)."""
    from inventory.fleet import FleetSnapshot

    snap = FleetSnapshot(cluster_ids)
    out = {}
    for row in snap.grouped("cluster_id", "model", "kind"):
        counts = {s: row["states"].get(s, 0) for s in STATE_FIELDS}
        out[(row["cluster_id"], row["model"], row["kind"])] = counts | {
            "gpus": row["gpus"] or 0,
            "gpus_free": row["gpus_free"] or 0,
        }
    for key, capacity in snap.partition_capacity("cluster_id", "model", "kind").items():
        if key in out:
            out[key].update(partition_slots(capacity))
    return out


def partition_slots(capacity):
    """A group's partition-aware figures as history columns: stranded GPUs, and the free and total
    count of its smallest profile (the one with the most placements)."""
    out = {"gpus_stranded": capacity["stranded"]}
    if capacity["profiles"]:
        smallest = max(capacity["profiles"].values(), key=lambda c: c["total"])
        out |= {"partition_slots_free": smallest["free"], "partition_slots": smallest["total"]}
    return out


def namespace_counts(cluster_ids=None):
    """{(cluster_id, namespace): {field: n}}: devices held per kind, claims per state."""
    from claims.models import ResourceClaim
    from inventory.devicestate import ADMIN
    from inventory.models import Device

    out = defaultdict(lambda: dict.fromkeys(KIND_FIELDS + tuple(CLAIM_FIELDS.values()), 0))
    devices = Device.objects.exclude(held_by_claim_id=None).exclude(allocation_state=ADMIN)
    claims = ResourceClaim.objects.all()
    if cluster_ids is not None:
        devices, claims = devices.filter(cluster_id__in=cluster_ids), claims.filter(cluster_id__in=cluster_ids)
    for cid, ns, kind, n in (
        devices.order_by().values_list("cluster_id", "held_by_namespace", "kind").annotate(n=Count("id"))
    ):
        out[(cid, ns)][kind] += n
    for cid, ns, state, n in claims.order_by().values_list("cluster_id", "namespace", "state").annotate(n=Count("id")):
        if state in CLAIM_FIELDS:  # the four ResourceClaim.State values
            out[(cid, ns)][CLAIM_FIELDS[state]] += n
    return dict(out)


def sample(now=None):
    """Store this minute's sample of every cluster (a second run in the same minute replaces it).
    Returns the number of rows written."""
    minute = minute_of(now or timezone.now())
    fleet = [
        FleetSample(cluster_id=cid, minute=minute, model=model, kind=kind, **counts)
        for (cid, model, kind), counts in sorted(fleet_counts().items())
    ]
    spaces = [
        NamespaceSample(cluster_id=cid, minute=minute, namespace=ns, **counts)
        for (cid, ns), counts in sorted(namespace_counts().items())
    ]
    counted = tuple(f for f in NAMESPACE_FIELDS if f != "idle")
    with transaction.atomic():
        FleetSample.objects.filter(minute=minute).delete()
        FleetSample.objects.bulk_create(fleet, batch_size=1000)
        # Upserted, not replaced: the utilization poll's `idle` of this minute stays.
        NamespaceSample.objects.filter(minute=minute).update(**dict.fromkeys(counted, 0))
        NamespaceSample.objects.bulk_create(
            spaces,
            batch_size=1000,
            update_conflicts=True,
            unique_fields=("minute", "cluster", "namespace"),
            update_fields=counted,
        )
    return len(fleet) + len(spaces)


def record_idle(cluster_id, minute, idle_by_namespace):
    """The utilization poll's count of idle held devices per namespace for its minute."""
    rows = [
        NamespaceSample(cluster_id=cluster_id, minute=minute, namespace=ns, idle=n)
        for ns, n in sorted(idle_by_namespace.items())
        if n
    ]
    NamespaceSample.objects.filter(cluster_id=cluster_id, minute=minute).exclude(idle=0).update(idle=0)
    NamespaceSample.objects.bulk_create(
        rows,
        batch_size=1000,
        update_conflicts=True,
        unique_fields=("minute", "cluster", "namespace"),
        update_fields=("idle",),
    )


def prune(now=None):
    """Delete samples older than the retention; returns the rows deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=retention_days())
    fleet, _ = FleetSample.objects.filter(minute__lt=cutoff).delete()
    spaces, _ = NamespaceSample.objects.filter(minute__lt=cutoff).delete()
    return fleet + spaces


# --- reading --------------------------------------------------------------------------------------


def points(hours, now=None):
    """(step in minutes, [minutes]) for a chart of the last `hours`: at most MAX_POINTS, epoch-aligned."""
    end = minute_of(now or timezone.now())
    span = max(int(hours * 60), 1)
    step = next((s for s in STEPS if span / s <= MAX_POINTS), STEPS[-1])
    epoch_minutes = int(end.timestamp() // 60)
    last = epoch_minutes - epoch_minutes % step
    count = span // step + 1
    return step, [datetime.fromtimestamp((last - i * step) * 60, tz=UTC) for i in range(count - 1, -1, -1)]


class EpochSeconds(Func):
    """A timestamp as Unix seconds. The chart queries group and return minutes as integers: turning
    thousands of timestamps into aware datetimes costs more than the query itself (5x measured)."""

    output_field = BigIntegerField()
    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS bigint)"

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="CAST(strftime('%%%%s', %(expressions)s) AS integer)", **extra
        )


def _columns(minutes, rows):
    """{label: [value or None per minute]} from (Unix seconds, label, value) rows."""
    position = {int(m.timestamp()): i for i, m in enumerate(minutes)}
    out = defaultdict(lambda: [None] * len(minutes))
    for minute, label, value in rows:
        out[label][position[minute]] = value
    return out


def device_series(minutes, cluster_ids=None, kind=None, model=None, group_by="state", states=STATE_FIELDS):
    """{label: values}: devices per state (group_by="state"), or the devices in `states` per model,
    kind or cluster name."""
    rows = FleetSample.objects.filter(minute__in=minutes)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if kind:
        rows = rows.filter(kind=kind)
    if model:
        rows = rows.filter(model=model)
    rows = rows.order_by().annotate(t=EpochSeconds("minute"))
    if group_by == "state":
        sums = rows.values("t").annotate(**{s: Sum(s) for s in states})
        flat = ((r["t"], s, r[s]) for r in sums for s in states)
        columns = _columns(minutes, flat)
        return {s: columns[s] for s in states}  # every state, also one that never had a device
    total = sum((F(s) for s in states[1:]), F(states[0]))
    key = {"model": "model", "kind": "kind", "cluster": "cluster__name"}[group_by]
    sums = rows.values_list("t", key).annotate(n=Sum(total))
    # A model (kind, cluster) that is zero throughout is left out: NICs in "free GPUs by model".
    return {label: values for label, values in sorted(_columns(minutes, sums).items()) if any(values)}


def top_namespaces(minutes, cluster_ids=None, candidates=None, column="gpu", top=8):
    """The `top` namespaces (of `candidates`, None = any) by `column`'s highest value at `minutes`."""
    rows = NamespaceSample.objects.filter(minute__in=minutes)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    if candidates is not None:
        rows = rows.filter(namespace__in=candidates)
    ranked = (
        rows.order_by()
        .values_list("namespace")
        .annotate(m=Max(column))
        .filter(m__gt=0)
        .order_by("-m", "namespace")[:top]
    )
    return [ns for ns, _ in ranked]


def namespace_series(minutes, namespaces, cluster_ids=None, fields=None):
    """{label: values} of `namespaces`' `fields` ({label: NamespaceSample column}, default devices
    held by kind). Series are labelled by the namespace (one field), the field's label (one
    namespace), else "namespace label"."""
    fields = fields or {k: k for k in KIND_FIELDS}
    rows = NamespaceSample.objects.filter(minute__in=minutes, namespace__in=namespaces)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    sums = (
        rows.order_by()
        .annotate(t=EpochSeconds("minute"))
        .values("t", "namespace")
        .annotate(**{f"v_{label}": Sum(column) for label, column in fields.items()})
    )

    def name(ns, label):
        return ns if len(fields) == 1 else label if len(namespaces) == 1 else f"{ns} {label}"

    columns = _columns(
        minutes, ((r["t"], name(r["namespace"], label), r[f"v_{label}"]) for r in sums for label in fields)
    )
    return {name(ns, label): columns[name(ns, label)] for ns in sorted(namespaces) for label in fields}


def has_samples(cluster_ids=None):
    rows = FleetSample.objects.all()
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    return rows.exists()
