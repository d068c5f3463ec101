"""GPU utilization from dcgm-exporter series in a cluster's Prometheus: query, join to devices, store.

One poll = one bounded instant query per DCGM field, each aggregated in PromQL to one series per
GPU or GPU instance (dcgm-exporter repeats a series per pod and container using the device). The
series are joined to the mirrored devices by the GPU UUID the driver publishes (`uuid` attribute);
a MIG instance series carries its parent's UUID plus GPU_I_PROFILE/GPU_I_ID (no MIG UUID), so it is
matched through the exporter's DRA labels when present, else by (parent UUID, profile) when that
names exactly one partition. The values are stored per device and minute with the holder of that
moment (the fleet history); a failed poll stores nothing and records the error on the source.
"""

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.db.models.fields.json import KT
from django.db.models import Q
from django.utils import timezone

from .models import OpsCounter, PrometheusSource, UtilizationSample
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
ID_LABELS = ("UUID", "uuid", "GPU_I_ID", "GPU_I_PROFILE", "dra_driver_name", "dra_pool_name", "dra_device_name", "dra_mig_device_uuid")
HELD = "allocated"  # stored allocation state of a device held by an ordinary claim (admin watchers excluded)


def setting(name, default):
    from django.conf import settings

    return (getattr(settings, "GPUDASH_MONITORING", None) or {}).get(name, default)


def promql(metric, selector=""):
    return f"max by ({', '.join(ID_LABELS)}) ({metric}{{{selector}}})"


@dataclass
class DeviceIndex:
    """The cluster's devices by the identities dcgm-exporter series can carry."""

    by_uuid: dict = field(default_factory=dict)
    by_name: dict = field(default_factory=dict)  # (driver, pool, name) -> key
    by_parent_profile: dict = field(default_factory=dict)  # (parent UUID, profile) -> [keys]
    holders: dict = field(default_factory=dict)  # key -> (allocated, namespace, name)

    @classmethod
    def load(cls, cluster):
        from inventory.models import Device

        index = cls()
        rows = (Device.objects.filter(cluster=cluster)
                .filter(Q(attribute_values__has_key="uuid") | Q(attribute_values__has_key="parentUUID"))
                .annotate(uuid=KT("attribute_values__uuid"), parent=KT("attribute_values__parentUUID"), profile=KT("attribute_values__profile"))
                .values_list("driver", "pool", "name", "uuid", "parent", "profile", "allocation_state", "held_by_namespace", "held_by_name"))
        for driver, pool, name, uuid, parent, profile, state, ns, holder in rows.iterator(chunk_size=5000):
            key = (driver, pool, name)
            index.by_name[key] = key
            if uuid:
                index.by_uuid[uuid] = key
            if parent:
                index.by_parent_profile.setdefault((parent, profile or ""), []).append(key)
            index.holders[key] = (state == HELD, ns if state == HELD else "", holder if state == HELD else "")
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
            key = self.by_name.get((labels.get("dra_driver_name", ""), labels["dra_pool_name"], labels["dra_device_name"]))
            if key:
                return key, None
        candidates = self.by_parent_profile.get((gpu_uuid, labels.get("GPU_I_PROFILE", "")), [])
        if len(candidates) == 1:
            return candidates[0], None
        return None, ("several partitions of that GPU have this profile" if candidates else "unknown MIG instance")


@dataclass
class PollResult:
    matched: int = 0
    unmatched: Counter = field(default_factory=Counter)  # reason -> series
    stored: int = 0
    pruned: int = 0
    seconds: dict = field(default_factory=dict)
    error: str = ""


def poll(source, now=None):
    """Query, join and store one cluster's utilization. Never raises for Prometheus trouble: the
    error is stored on the source (and returned), the history is left as it was."""
    now = now or timezone.now()
    result = PollResult()
    timeout = float(setting("QUERY_TIMEOUT_SECONDS", 10))
    started = time.monotonic()
    try:
        series = {}
        for name, (metric, factor, required) in FIELDS.items():
            series[name] = [(labels, value * factor) for labels, value in
                            instant_query(source.url, promql(metric, source.series_selector), auth_header=source.auth_header, timeout=timeout)]
    except PrometheusError as exc:
        result.error = str(exc)[:4000]
        PrometheusSource.objects.filter(pk=source.pk).update(last_poll_at=now, last_error=result.error, last_error_at=now)
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
            slot = values.setdefault(key, {})
            slot[name] = max(value, slot.get(name, value))
    result.matched = len(values)
    result.seconds["join"] = time.monotonic() - started

    started = time.monotonic()
    minute = now.replace(second=0, microsecond=0)
    rows = []
    for key, fields in values.items():
        allocated, namespace, holder = index.holders[key]
        rows.append(UtilizationSample(
            cluster_id=source.cluster_id, driver=key[0], pool=key[1], device=key[2], minute=minute,
            gpu_util=fields.get("gpu_util"), fb_used_bytes=fields.get("fb_used_bytes"), power_watts=fields.get("power_watts"),
            gr_engine_active=fields.get("gr_engine_active"), allocated=allocated, held_by_namespace=namespace, held_by_name=holder,
        ))
    cutoff = minute - timedelta(hours=float(setting("HISTORY_HOURS", 24)))
    with transaction.atomic():
        result.stored = upsert(rows)
        result.pruned, _ = UtilizationSample.objects.filter(cluster_id=source.cluster_id, minute__lt=cutoff).delete()
        PrometheusSource.objects.filter(pk=source.pk).update(
            last_poll_at=now, last_success_at=now, last_minute=minute, last_error="",
            devices_matched=result.matched, series_unmatched=sum(result.unmatched.values()),
        )
        OpsCounter.add("utilization_polls", source.cluster.name, "ok")
    result.seconds["store"] = time.monotonic() - started
    if result.unmatched:
        log.info("cluster %s: %d utilization series matched no device: %s", source.cluster.name, sum(result.unmatched.values()), dict(result.unmatched))
    return result


_COLUMNS = ("cluster_id", "driver", "pool", "device", "minute", "gpu_util", "fb_used_bytes", "power_watts", "gr_engine_active",
            "allocated", "held_by_namespace", "held_by_name")
_UPDATED = _COLUMNS[5:]


def upsert(rows):
    """Insert the samples; a second poll in the same minute overwrites that minute's values."""
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        UtilizationSample.objects.bulk_create(rows, batch_size=2000, update_conflicts=True,
                                              unique_fields=("cluster", "driver", "pool", "device", "minute"), update_fields=list(_UPDATED))
        return len(rows)
    # PostgreSQL: COPY into a temporary table, then one INSERT ... ON CONFLICT (the ORM's bulk upsert
    # quotes every parameter client-side: seconds for 40,000 rows).
    table = UtilizationSample._meta.db_table
    qn = connection.ops.quote_name
    cols = ", ".join(qn(c) for c in _COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS monitoring_sample_load")
        cursor.execute(f"CREATE TEMP TABLE monitoring_sample_load ON COMMIT DROP AS SELECT {cols} FROM {qn(table)} WITH NO DATA")
        with cursor.cursor.copy(f"COPY monitoring_sample_load ({cols}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row((r.cluster_id, r.driver, r.pool, r.device, r.minute, r.gpu_util, r.fb_used_bytes, r.power_watts,
                                r.gr_engine_active, r.allocated, r.held_by_namespace, r.held_by_name))
        updates = ", ".join(f"{qn(c)} = EXCLUDED.{qn(c)}" for c in _UPDATED)
        cursor.execute(f"INSERT INTO {qn(table)} ({cols}) SELECT {cols} FROM monitoring_sample_load "
                       f"ON CONFLICT (cluster_id, driver, pool, device, minute) DO UPDATE SET {updates}")
    return len(rows)


def poll_all(cluster_names=None):
    """Poll every enabled source of an enabled, live cluster: {cluster name: PollResult}."""
    sources = PrometheusSource.objects.select_related("cluster").filter(enabled=True, cluster__enabled=True, cluster__is_snapshot=False)
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
    from .templatetags.utilization import bucket

    found = latest({d["cluster_id"] for d in devices}, [(d["cluster_id"], d["driver"], d["pool"], d["name"]) for d in devices])
    for d in devices:
        sample = found.get((d["cluster_id"], d["driver"], d["pool"], d["name"]))
        d["util"] = sample.gpu_util if sample is not None else None
        d["util_bucket"] = "none" if d["util"] is None else bucket(d["util"])
