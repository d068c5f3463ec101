"""Per-cluster connection status as the UI shows it, summarised from the watchers' SyncState rows."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext

from .models import Cluster, SyncState

# A lease not renewed for this long means the watcher process is gone, whatever its last status said.
LEASE_GRACE = timedelta(seconds=30)
OPTIONAL_KINDS = ("Event",)


@dataclass
class Connection:
    cluster: Cluster
    status: str  # connected | lagging | disconnected | snapshot | never
    since: datetime | None
    last_event: datetime | None
    detail: str = ""

    @property
    def ok(self):
        return self.status in ("connected", "snapshot")


def summarise(cluster, states, now=None):
    now = now or timezone.now()
    last_event = max((s.last_event_at for s in states if s.last_event_at), default=None)
    if cluster.is_snapshot:
        return Connection(
            cluster, "snapshot", cluster.discovered_at, last_event, gettext("imported snapshot, not watched")
        )
    if not states:
        return Connection(cluster, "never", None, None, gettext("no watcher has run yet"))
    # The Events mirror is optional (its RBAC rule may be left out): its errors do not disconnect the cluster.
    errors = [s for s in states if s.status == SyncState.Status.ERROR and s.kind not in OPTIONAL_KINDS]
    if errors:
        since = min((s.last_error_at for s in errors if s.last_error_at), default=None)
        return Connection(cluster, "disconnected", since, last_event, f"{errors[0].kind}: {errors[0].last_error[:200]}")
    expired = [s for s in states if s.lease_expires and s.lease_expires + LEASE_GRACE < now]
    if expired:
        return Connection(
            cluster,
            "disconnected",
            min(s.lease_expires for s in expired),
            last_event,
            gettext("watcher lease of %(kind)s expired") % {"kind": expired[0].kind},
        )
    catching_up = [s for s in states if s.status in (SyncState.Status.LISTING, SyncState.Status.IDLE)]
    if catching_up:
        return Connection(
            cluster,
            "lagging",
            None,
            last_event,
            gettext("listing %(kinds)s") % {"kinds": ", ".join(s.kind for s in catching_up)},
        )
    since = min((s.connected_since for s in states if s.connected_since), default=None)
    return Connection(cluster, "connected", since, last_event)


def connections(clusters=None):
    """Connection for each cluster (all enabled clusters by default), in name order."""
    clusters = list(clusters if clusters is not None else Cluster.objects.filter(enabled=True))
    by_cluster = {}
    for s in SyncState.objects.filter(cluster__in=clusters):
        by_cluster.setdefault(s.cluster_id, []).append(s)
    return [summarise(c, by_cluster.get(c.id, [])) for c in clusters]
