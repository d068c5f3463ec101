"""GPU utilization from dcgm-exporter series in a cluster's Prometheus: query, join to devices, store.

One poll = one bounded instant query per DCGM field (sent in parallel: Prometheus evaluates them on
several cores, and one query for every field would return a bigger answer because of `__name__`),
each aggregated in PromQL to one series per GPU or GPU instance (dcgm-exporter repeats a series per
pod and container using the device). The series are joined to the mirrored devices by the GPU UUID
the driver publishes (`uuid` attribute); a MIG instance series carries its parent's UUID plus
GPU_I_PROFILE/GPU_I_ID (no MIG UUID), so it is matched through the exporter's DRA labels when present,
else by (parent UUID, profile) when that names exactly one partition. The values are stored per
device and minute with the holder of that moment, and each namespace's idle held devices go into the
fleet history (monitoring/history.py); a failed poll stores nothing and records the error on the source.
"""

import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.db.models.fields.json import KT
from django.utils import timezone

from mirror.models import OpsCounter

from .conf import setting
from .history import record_idle
from .models import PrometheusSource, UtilizationSample
from .prometheus import PrometheusError, instant_query

log = logging.getLogger(__name__)

# Sample field -> (DCGM field, factor to base units, required). The profiling field needs DCP
# (Volta and newer, DCGM's profiling module): absent series are normal, not an error.
FIELDS = {
    "gpu_util": ("DCGM_FI_DEV_GPU_UTIL", 1.0, True),
    "fb_used_bytes": ("DCGM_FI_DEV_FB_USED", float(1 << 20), True),  # MiB
    "power_watts": ("DCGM_FI_DEV_POWER_USAGE", 1.0, True),
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.0, False),
}
# What identifies a GPU or GPU instance in dcgm-exporter's series (both UUID spellings: `uuid` with
# --use-old-namespace), plus the DRA attribution labels (KUBERNETES_ENABLE_DRA).
ID_LABELS = (
    "UUID",
    "uuid",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "dra_driver_name",
    "dra_pool_name",
    "dra_device_name",
    "dra_mig_device_uuid",
)
HELD = "allocated"  # stored allocation state of a device held by an ordinary claim (admin watchers excluded)
# pg_advisory_xact_lock(class, cluster id) key class of a poll's store ("GDut"): one writer per minute's rows.
_STORE_LOCK = 0x47447574


# Fleet-map colouring buckets (percent): cell class u-<index>.
BUCKETS = (5, 25, 50, 75)


def bucket(percent):
    return sum(1 for edge in BUCKETS if percent >= edge)


def promql(metric, selector=""):
    return f"max by ({', '.join(ID_LABELS)}) ({metric}{{{selector}}})"


@dataclass
class DeviceIndex:
    """The cluster's devices by the identities dcgm-exporter series can carry."""

    by_uuid: dict = field(default_factory=dict)
    by_name: dict = field(default_factory=dict)  # (driver, pool, name) -> key
    by_parent_profile: dict = field(default_factory=dict)  # (parent UUID, profile) -> [keys]
    holders: dict = field(default_factory=dict)  # key -> (namespace, claim name) of devices held now

    @classmethod
    def load(cls, cluster):
        """The identities (cached per process while the cluster's device rows stay the same: the
        sync replaces rows when a slice changes, so their count and highest id say when), then the
        holders, read fresh (only held devices, no JSON)."""
        from inventory.models import Device

        devices = Device.objects.filter(cluster=cluster)
        version = (cluster.pk, *devices.aggregate(n=Count("id"), top=Max("id")).values())
        with _index_lock:
            index = _index_cache.get(cluster.pk)
        if index is None or index[0] != version:
            index = (version, cls._identities(devices))
            with _index_lock:
                _index_cache[cluster.pk] = index
        index = index[1]
        held = devices.filter(allocation_state=HELD).values_list(
            "driver", "pool", "name", "held_by_namespace", "held_by_name"
        )
        return cls(
            index.by_uuid,
            index.by_name,
            index.by_parent_profile,
            {(d, p, n): (ns, holder) for d, p, n, ns, holder in held.iterator(chunk_size=5000)},
        )

    @classmethod
    def _identities(cls, devices):
        index = cls()
        rows = (
            devices.filter(Q(attribute_values__has_key="uuid") | Q(attribute_values__has_key="parentUUID"))
            .annotate(
                a_uuid=KT("attribute_values__uuid"),
                a_parent=KT("attribute_values__parentUUID"),
                a_profile=KT("attribute_values__profile"),
            )
            .values_list("driver", "pool", "name", "a_uuid", "a_parent", "a_profile")
        )
        for driver, pool, name, uuid, parent, profile in rows.iterator(chunk_size=5000):
            key = (driver, pool, name)
            index.by_name[key] = key
            if uuid:
                index.by_uuid[uuid] = key
            if parent:
                index.by_parent_profile.setdefault((parent, profile or ""), []).append(key)
        return index

    def match(self, labels):
        """(key, None) for the device a series belongs to, or (None, why not)."""
        gpu_uuid = labels.get("UUID") or labels.get("uuid") or ""
        if labels.get("GPU_I_ID", "") == "":
            key = self.by_uuid.get(gpu_uuid)
            return (key, None) if key else (None, "unknown GPU UUID")
        if labels.get("dra_mig_device_uuid"):
            key = self.by_uuid.get(labels["dra_mig_device_uuid"])
            if key:
                return key, None
        if labels.get("dra_pool_name") and labels.get("dra_device_name"):
            key = self.by_name.get(
                (labels.get("dra_driver_name", ""), labels["dra_pool_name"], labels["dra_device_name"])
            )
            if key:
                return key, None
        candidates = self.by_parent_profile.get((gpu_uuid, labels.get("GPU_I_PROFILE", "")), [])
        if len(candidates) == 1:
            return candidates[0], None
        return None, ("several partitions of that GPU have this profile" if candidates else "unknown MIG instance")


_index_cache = {}  # cluster id -> ((cluster id, device rows, highest id), DeviceIndex without holders)
_index_lock = threading.Lock()
_queries = ThreadPoolExecutor(max_workers=len(FIELDS), thread_name_prefix="gpudash-promql")


@dataclass
class PollResult:
    matched: int = 0
    unmatched: Counter = field(default_factory=Counter)  # reason -> series
    stored: int = 0
    seconds: dict = field(default_factory=dict)
    error: str = ""


def query_fields(source, timeout):
    """{sample field: [(labels, value in base units)]}, the fields queried in parallel."""

    def one(item):
        name, (metric, factor, _required) = item
        found = instant_query(
            source.url, promql(metric, source.series_selector), auth_header=source.auth_header, timeout=timeout
        )
        return name, [(labels, value * factor) for labels, value in found]

    return dict(_queries.map(one, FIELDS.items()))


def poll(source, now=None):
    """Query, join and store one cluster's utilization. Never raises for Prometheus trouble: the
    error is stored on the source (and returned), the history is left as it was."""
    now = now or timezone.now()
    result = PollResult()
    timeout = float(setting("QUERY_TIMEOUT_SECONDS", 10))
    started = time.monotonic()
    try:
        series = query_fields(source, timeout)
    except PrometheusError as exc:
        result.error = str(exc)[:4000]
        PrometheusSource.objects.filter(pk=source.pk).update(
            last_poll_at=now, last_error=result.error, last_error_at=now
        )
        OpsCounter.add("utilization_polls", source.cluster.name, "error")
        log.warning("cluster %s: utilization poll failed: %s", source.cluster.name, exc)
        return result
    result.seconds["query"] = time.monotonic() - started

    started = time.monotonic()
    index = DeviceIndex.load(source.cluster)
    values = {}
    for name, samples in series.items():
        for labels, value in samples:
            key, why = index.match(labels)
            if key is None:
                if name == "gpu_util":
                    result.unmatched[why] += 1
                continue
            slot = values.get(key)
            if slot is None:
                slot = values[key] = {}
            old = slot.get(name)
            slot[name] = value if old is None or value > old else old
    result.matched = len(values)
    threshold = float(setting("IDLE_THRESHOLD_PERCENT", 5))
    idle = Counter()
    rows = []
    for (driver, pool, device), fields in values.items():
        namespace, holder = index.holders.get((driver, pool, device), ("", ""))
        util = fields.get("gpu_util")
        if holder and util is not None and util < threshold:
            idle[namespace] += 1
        rows.append(
            (
                source.cluster_id,
                driver,
                pool,
                device,
                util,
                fields.get("fb_used_bytes"),
                fields.get("power_watts"),
                fields.get("gr_engine_active"),
                bool(holder),
                namespace,
                holder,
            )
        )
    result.seconds["join"] = time.monotonic() - started

    started = time.monotonic()
    minute = now.replace(second=0, microsecond=0)
    with transaction.atomic():
        result.stored = store(source.cluster_id, minute, rows)
        record_idle(source.cluster_id, minute, idle)
        PrometheusSource.objects.filter(pk=source.pk).update(
            last_poll_at=now,
            last_success_at=now,
            last_minute=minute,
            last_error="",
            devices_matched=result.matched,
            series_unmatched=sum(result.unmatched.values()),
        )
        OpsCounter.add("utilization_polls", source.cluster.name, "ok")
    result.seconds["store"] = time.monotonic() - started
    if result.unmatched:
        log.info(
            "cluster %s: %d utilization series matched no device: %s",
            source.cluster.name,
            sum(result.unmatched.values()),
            dict(result.unmatched),
        )
    return result


_COLUMNS = (
    "cluster_id",
    "driver",
    "pool",
    "device",
    "gpu_util",
    "fb_used_bytes",
    "power_watts",
    "gr_engine_active",
    "allocated",
    "held_by_namespace",
    "held_by_name",
)


def store(cluster_id, minute, rows):
    """Store a minute's samples (tuples in _COLUMNS order); a second poll in the same minute replaces
    that minute's. Append-only otherwise: no unique index to check, so PostgreSQL takes them in one COPY."""
    UtilizationSample.objects.filter(cluster_id=cluster_id, minute=minute).delete()
    if connection.vendor != "postgresql":
        UtilizationSample.objects.bulk_create(
            [UtilizationSample(minute=minute, **dict(zip(_COLUMNS, r))) for r in rows], batch_size=2000
        )
        return len(rows)
    table = connection.ops.quote_name(UtilizationSample._meta.db_table)
    cols = ", ".join(connection.ops.quote_name(c) for c in _COLUMNS + ("minute",))
    with connection.cursor() as cursor:
        # Two polls of one cluster in the same minute (beat and a manual run) must not both append.
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_STORE_LOCK, cluster_id])
        cursor.execute(f"DELETE FROM {table} WHERE cluster_id = %s AND minute = %s", [cluster_id, minute])
        with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row((*r, minute))
    return len(rows)


def retention(now):
    """The oldest minute of per-device samples kept: GPUDASH_UTILIZATION_HISTORY_HOURS, and never less
    than the idle period (the idle finding reads that far back)."""
    hours = max(float(setting("HISTORY_HOURS", 24)), float(setting("IDLE_PERIOD_SECONDS", 1800)) / 3600 + 0.25)
    return now - timedelta(hours=hours)


def prune(now=None):
    """Delete per-device samples older than the retention (the hourly history prune runs this)."""
    deleted, _ = UtilizationSample.objects.filter(minute__lt=retention(now or timezone.now())).delete()
    return deleted


def poll_all(cluster_names=None):
    """Poll every enabled source of an enabled, live cluster: {cluster name: PollResult}."""
    sources = PrometheusSource.objects.select_related("cluster").filter(
        enabled=True, cluster__enabled=True, cluster__is_snapshot=False
    )
    if cluster_names:
        sources = sources.filter(cluster__name__in=cluster_names)
    return {s.cluster.name: poll(s) for s in sources}


# --- reading --------------------------------------------------------------------------------------


def latest(cluster_ids=None, keys=None):
    """{(cluster_id, driver, pool, device): sample} of each cluster's last successful poll."""
    sources = PrometheusSource.objects.exclude(last_minute=None)
    if cluster_ids is not None:
        sources = sources.filter(cluster_id__in=cluster_ids)
    q = Q(pk__in=[])
    for cid, minute in sources.values_list("cluster_id", "last_minute"):
        q |= Q(cluster_id=cid, minute=minute)
    samples = UtilizationSample.objects.filter(q)
    if keys is not None:
        keys = set(keys)
        samples = samples.filter(device__in={k[3] for k in keys}, pool__in={k[2] for k in keys})
    out = {(s.cluster_id, s.driver, s.pool, s.device): s for s in samples}
    return out if keys is None else {k: v for k, v in out.items() if k in keys}


def status(cluster):
    """The cluster's utilization source and how its last poll went (None: no Prometheus configured)."""
    return PrometheusSource.objects.filter(cluster=cluster).first()


def attach_latest(devices):
    """Set `util` (percent or None) and `util_bucket` (fleet-map colour class) on device dicts of a map page."""
    found = latest(
        {d["cluster_id"] for d in devices}, [(d["cluster_id"], d["driver"], d["pool"], d["name"]) for d in devices]
    )
    for d in devices:
        sample = found.get((d["cluster_id"], d["driver"], d["pool"], d["name"]))
        d["util"] = sample.gpu_util if sample is not None else None
        d["util_bucket"] = "none" if d["util"] is None else bucket(d["util"])
