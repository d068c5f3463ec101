"""The per-device health timeline, written from the sync (mirror/sync/hooks.py: refresh_health).

After a batch of slices, taint rules, claims or pods changed rows, the health notion (notion.gather) is
computed again for the cluster and compared with the stored DeviceHealth rows; each device whose state
differs gets a HealthChange row naming the claims allocated the device and their live pods at that
moment. Only devices that are not healthy are read and stored, so the cost follows the troubled
devices, not the fleet. The timeline is kept for the history period (GPUDASH_HISTORY_DAYS) and pruned
here at most hourly, and by the beat task health.tasks.prune_timeline.
"""

import logging
import time
from collections import defaultdict
from datetime import timedelta

from django.apps import apps
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from mirror.messages import english

from . import conf, notion
from .models import HEALTHY, DeviceHealth, HealthChange

# pg_advisory_xact_lock(class, cluster id) key class of the health refresh ("GDhl"): watchers of several
# kinds refresh one cluster's health at once; one at a time, each sees what the one before committed.
_REFRESH_LOCK = 0x4744686C
KINDS = frozenset({"ResourceSlice", "DeviceTaintRule", "ResourceClaim", "Pod"})
REPORT_KINDS = frozenset({"ResourceClaim", "Pod"})
_last_prune = {"at": 0.0}
log = logging.getLogger(__name__)
PRUNE_EVERY = 3600.0


def _stored_reasons(reasons):
    """Reasons as stored: the message kept for the page's language, its English beside it."""
    return [{**r, "english": english(r["text"])} for r in reasons]


def occupants(cluster_id, keys):
    """{(driver, pool, device): (claims, pods)}: "namespace/name" of the claims allocated each device and
    of their pods not finished."""
    AllocationResult = apps.get_model("claims", "AllocationResult")
    PodClaimRef = apps.get_model("claims", "PodClaimRef")
    keys = set(keys)
    out = {k: (set(), set()) for k in keys}
    if not keys:
        return {}
    claims_of = defaultdict(set)
    rows = AllocationResult.objects.filter(
        cluster_id=cluster_id, device__in={k[2] for k in keys}, driver__in={k[0] for k in keys}
    ).values_list("driver", "pool", "device", "claim__namespace", "claim__name")
    for driver, pool, device, ns, name in rows:
        if (driver, pool, device) in keys:
            out[(driver, pool, device)][0].add(f"{ns}/{name}")
            claims_of[(ns, name)].add((driver, pool, device))
    if claims_of:
        refs = (
            PodClaimRef.objects.filter(cluster_id=cluster_id, claim_name__in={n for _, n in claims_of})
            .exclude(pod__phase__in=notion.TERMINAL_PHASES)
            .values_list("namespace", "claim_name", "pod__name")
        )
        for ns, claim, pod in refs:
            for key in claims_of.get((ns, claim), ()):
                out[key][1].add(f"{ns}/{pod}")
    return {k: (sorted(c), sorted(p)) for k, (c, p) in out.items()}


def refresh(cluster, kind=None, now=None):
    """Compute the cluster's device health and record what changed. Returns the HealthChange rows written.

    Called inside a sync batch's transaction: in a savepoint of its own, so a failure here is logged and
    rolled back alone, never taking the batch (the mirror's rows) with it."""
    try:
        with transaction.atomic():
            return _refresh(cluster, kind, now)
    except DatabaseError:
        log.exception("%s: device health refresh after a %s batch failed", cluster.name, kind or "full")
        return []


def _refresh(cluster, kind, now):
    now = now or timezone.now()
    Device = apps.get_model("inventory", "Device")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_REFRESH_LOCK, cluster.pk])
        stored = {
            (r.driver, r.pool, r.device): r for r in DeviceHealth.objects.select_for_update().filter(cluster=cluster)
        }
        # Pods and claims change no taint: their batches re-read the pod reports only.
        computed = notion.gather(cluster.pk, taints_of=stored if kind in REPORT_KINDS else None)
        gone_keys = set(stored) - set(computed)
        existing = set()
        if gone_keys:  # a device no slice publishes any more is not "healthy again": it is gone
            existing = set(
                Device.objects.filter(cluster=cluster, name__in={k[2] for k in gone_keys}).values_list(
                    "driver", "pool", "name"
                )
            )
        changed, new_rows, updated, dropped = [], [], [], []
        for key in set(computed) | gone_keys:
            row = stored.get(key)
            if key in computed:
                state, reasons, node = computed[key]
            elif key in existing:
                state, reasons, node = HEALTHY, [], row.node_name
            else:
                dropped.append(row.pk)
                continue
            source, reason = notion.main_reason(reasons)
            old = row.state if row is not None else HEALTHY
            if old != state:
                changed.append((key, old, state, source, reason, reasons[0]["text"] if reasons else {}, node))
            if state == HEALTHY:
                dropped.append(row.pk)
            elif row is None:
                new_rows.append(
                    DeviceHealth(
                        cluster=cluster,
                        driver=key[0],
                        pool=key[1],
                        device=key[2],
                        node_name=node or "",
                        state=state,
                        source=source,
                        reason=reason,
                        reasons=_stored_reasons(reasons),
                        since=now,
                    )
                )
            else:
                stored_reasons = _stored_reasons(reasons)
                if (row.state, row.reasons, row.node_name) != (state, stored_reasons, node or ""):
                    if row.state != state:
                        row.since = now
                    row.state, row.source, row.reason, row.reasons = state, source, reason, stored_reasons
                    row.node_name = node or ""
                    updated.append(row)
        DeviceHealth.objects.filter(pk__in=dropped).delete()
        DeviceHealth.objects.bulk_create(new_rows, batch_size=500)
        if updated:
            DeviceHealth.objects.bulk_update(
                updated, ["state", "source", "reason", "reasons", "node_name", "since"], batch_size=500
            )
        on = occupants(cluster.pk, [c[0] for c in changed])
        changes = [
            HealthChange(
                cluster=cluster,
                driver=key[0],
                pool=key[1],
                device=key[2],
                node_name=node or "",
                at=now,
                from_state=old,
                to_state=state,
                source=source,
                reason=reason,
                reason_message=text,
                claims=on.get(key, ([], []))[0],
                pods=on.get(key, ([], []))[1],
            )
            for key, old, state, source, reason, text, node in changed
        ]
        HealthChange.objects.bulk_create(changes, batch_size=500)
    if time.monotonic() - _last_prune["at"] > PRUNE_EVERY:
        _last_prune["at"] = time.monotonic()
        prune(now)
    return changes


def prune(now=None):
    """Delete timeline rows older than the history period; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=conf.retention_days())
    deleted, _ = HealthChange.objects.filter(at__lt=cutoff).delete()
    return deleted


def refresh_all(now=None):
    Cluster = apps.get_model("mirror", "Cluster")
    return {c.name: len(refresh(c, now=now)) for c in Cluster.objects.filter(enabled=True)}
