"""Worker heartbeats and the share of (cluster, kind) leases each live worker takes.

Every Supervisor (a `manage.py watch`, a Celery worker process, the embedded web process)
heartbeats a `gpudash.SyncWorker` row every third of the lease time. A worker whose heartbeat is
older than the lease time is dead for the others: the assignment (mirror/sync/spread.py) is
recomputed without it, and its leases, no longer renewed, expire in the same time, so its share
moves to the others within about one lease time. The leases stay the only thing that decides who
writes: two workers that briefly disagree on the assignment both try, and one gets the lease.
"""

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from mirror.models import Cluster, SyncState, SyncWorker

from .kinds import KINDS
from .lease import lease_seconds
from .spread import assign

# Rows of workers silent for this long are deleted (they stay listed as dead until then).
FORGET_AFTER = timedelta(minutes=10)


def live_cutoff(now=None):
    return (now or timezone.now()) - timedelta(seconds=lease_seconds())


def heartbeat(name, clusters=(), leases=0):
    """Record that worker `name` is alive (creating its row after a restart or a purge)."""
    now = timezone.now()
    updated = SyncWorker.objects.filter(name=name).update(heartbeat=now, leases=leases, clusters=list(clusters))
    if not updated:
        SyncWorker.objects.update_or_create(
            name=name,
            defaults={
                "hostname": socket.gethostname()[:255],
                "pid": os.getpid(),
                "clusters": list(clusters),
                "heartbeat": now,
                "leases": leases,
            },
        )
    SyncWorker.objects.filter(heartbeat__lt=now - FORGET_AFTER).delete()


def leave(name):
    """A stopping worker removes its heartbeat first: the others take its share at their next tick."""
    SyncWorker.objects.filter(name=name).delete()


def live_workers(now=None):
    return list(SyncWorker.objects.filter(heartbeat__gte=live_cutoff(now)))


def wanted_keys():
    """{(cluster id, kind): cluster name} the workers share: every kind of every watched cluster,
    except kinds its discovery found not served."""
    clusters = dict(Cluster.objects.filter(enabled=True, is_snapshot=False).values_list("pk", "name"))
    not_served = set(
        SyncState.objects.filter(cluster_id__in=clusters, status=SyncState.Status.NOT_SERVED).values_list(
            "cluster_id", "kind"
        )
    )
    return {
        (cid, kind.kind): name for cid, name in clusters.items() for kind in KINDS if (cid, kind.kind) not in not_served
    }


def assignment(workers=None, keys=None):
    """{(cluster id, kind): worker name} for the live workers."""
    workers = live_workers() if workers is None else workers
    keys = wanted_keys() if keys is None else keys
    scopes = {w.name: set(w.clusters or ()) for w in workers}

    def eligible(worker, key):
        scope = scopes[worker]
        return not scope or keys[key] in scope

    return assign(keys, scopes, eligible)


def worker_of(holder, names):
    """The worker a lease holder (`<worker name>:<kind>`) belongs to, or ""."""
    for name in names:
        if holder.startswith(name + ":"):
            return name
    return ""


@dataclass
class WorkerShare:
    worker: SyncWorker
    live: bool
    held: list = field(default_factory=list)  # SyncStates whose lease it holds
    owned: int = 0  # keys the assignment gives it

    @property
    def name(self):
        return self.worker.name


@dataclass
class LeaseRow:
    state: SyncState
    holder_worker: str  # "" when free, expired or held by something that is no worker (a test, a bench)
    owner: str  # the live worker the assignment gives it to
    held: bool

    @property
    def handing_over(self):
        return self.held and bool(self.owner) and self.holder_worker != self.owner


def lease_table(now=None):
    """Who holds what: ([WorkerShare], [LeaseRow]) for the sync status page and /metrics."""
    now = now or timezone.now()
    cutoff = live_cutoff(now)
    workers = list(SyncWorker.objects.all())
    live = [w for w in workers if w.heartbeat >= cutoff]
    keys = wanted_keys()
    owners = assignment(live, keys)
    names = sorted((w.name for w in workers), key=len, reverse=True)  # longest first: no prefix mix-ups
    shares = {w.name: WorkerShare(w, w.heartbeat >= cutoff) for w in workers}
    rows = []
    states = (
        SyncState.objects.select_related("cluster")
        .filter(Q(cluster__is_snapshot=False))
        .order_by("cluster__name", "kind")
    )
    for state in states:
        held = bool(state.lease_holder) and state.lease_expires is not None and state.lease_expires > now
        holder_worker = worker_of(state.lease_holder, names) if held else ""
        owner = owners.get((state.cluster_id, state.kind), "")
        rows.append(LeaseRow(state, holder_worker, owner, held))
        if holder_worker:
            shares[holder_worker].held.append(state)
    for owner in owners.values():
        shares[owner].owned += 1
    return sorted(shares.values(), key=lambda s: (not s.live, s.name)), rows


def metric_families(gauge):
    """Prometheus families for /metrics (monitoring/metrics.py passes its GaugeMetricFamily)."""
    shares, rows = lease_table()
    live = [s for s in shares if s.live]
    workers_family = gauge("gpudash_sync_workers", "Sync workers whose heartbeat is recent (within the lease time).")
    workers_family.add_metric([], len(live))
    held = gauge("gpudash_sync_worker_leases", "(cluster, kind) leases each live sync worker holds.", labels=["worker"])
    owned = gauge(
        "gpudash_sync_worker_assigned",
        "(cluster, kind) leases each live sync worker's share holds (rendezvous hashing).",
        labels=["worker"],
    )
    for share in live:
        held.add_metric([share.name], len(share.held))
        owned.add_metric([share.name], share.owned)
    moving = gauge(
        "gpudash_sync_leases_unsettled",
        "Wanted (cluster, kind) leases not held by their assigned worker, by reason.",
        labels=["reason"],
    )
    moving.add_metric(["handing_over"], sum(1 for r in rows if r.handing_over))
    moving.add_metric(["not_held"], sum(1 for r in rows if r.owner and not r.held))
    return [workers_family, held, owned, moving]
