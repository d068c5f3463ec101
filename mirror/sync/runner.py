"""Runs the watchers: discovery per cluster, then one Watcher thread per served (cluster, kind).

The same Supervisor runs in three places: `manage.py watch` (foreground), a Celery worker (started and
kept alive by the `ensure_watchers` beat task), and the web process itself when REDIS_URL is unset
(`start_in_process`). With several of them at once each takes only its share of the (cluster, kind)
leases (mirror/sync/workers.py: heartbeats, rendezvous hashing), and the leases decide who applies.
"""

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from mirror.kube import KubeClient, KubeError
from mirror.models import Cluster, SyncState

from . import workers
from .discovery import discover
from .kinds import KINDS
from .lease import lease_seconds, new_holder_id, renew_parked
from .watcher import Backoff, Watcher

log = logging.getLogger(__name__)


def discovery_interval():
    return float(settings.GPUDASH_SYNC.get("DISCOVERY_INTERVAL_SECONDS", 60))


class Supervisor:
    """Discovers what each cluster serves and keeps a Watcher thread per served kind."""

    def __init__(self, cluster_names=None, holder=None, once=False):
        self.cluster_names = list(cluster_names or [])
        self.holder = holder or new_holder_id()
        self.once = once
        self.stop_event = threading.Event()
        self.watchers = {}  # (cluster id, kind) -> (Watcher, Thread)
        self.thread = None
        self._backoff = {}
        self._next_discovery = {}
        self._served = {}  # cluster id -> {kind: version or None}, from the last discovery
        self.list_slots = threading.BoundedSemaphore(int(settings.GPUDASH_SYNC.get("LIST_CONCURRENCY", 8)))
        self.owned = set()  # (cluster id, kind) in this worker's share, from the last tick
        self._next_heartbeat = 0.0
        self._leaving = False

    # --- lifecycle ---------------------------------------------------------------------

    def start(self):
        self.thread = threading.Thread(target=self.run, name="gpudash-sync-supervisor", daemon=True)
        self.thread.start()
        return self

    def stop(self, timeout=10.0):
        # Leave first: the other workers start taking our share while our watchers finish their batches.
        self._leaving = True
        self._leave()
        self.stop_event.set()
        for watcher, _ in list(self.watchers.values()):
            watcher.close_stream()
        for _, thread in list(self.watchers.values()):
            thread.join(timeout)
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)
        self._leave()  # again, in case a tick in flight heartbeat after the first

    def _leave(self):
        if self.once:
            return
        try:
            workers.leave(self.holder)
        except DatabaseError:
            log.warning("sync supervisor: could not remove the heartbeat of %s", self.holder, exc_info=True)
        finally:
            connection.close()

    @property
    def alive(self):
        return self.thread is not None and self.thread.is_alive() and not self.stop_event.is_set()

    def clusters(self):
        qs = Cluster.objects.filter(enabled=True, is_snapshot=False)
        if self.cluster_names:
            qs = qs.filter(name__in=self.cluster_names)
        return list(qs)

    def run(self):
        try:
            if self.once:
                self.run_once()
                return
            while not self.stop_event.is_set():
                try:
                    close_old_connections()
                    self.tick()
                except DatabaseError:
                    log.warning("sync supervisor: database error", exc_info=True)
                    connection.close()
                self.stop_event.wait(1.0)
        finally:
            connection.close()

    # --- one pass ---------------------------------------------------------------------

    def tick(self):
        self.share()
        now = timezone.now().timestamp()
        clusters = self.clusters()
        wanted = {c.pk for c in clusters}
        for key, (watcher, thread) in list(self.watchers.items()):
            if key[0] not in wanted:
                watcher.stop.set()
                watcher.close_stream()
            if not thread.is_alive():
                del self.watchers[key]
                if watcher.not_served and key[0] in self._served:
                    self._served[key[0]][key[1]] = None  # until the next discovery says otherwise
        for cluster in clusters:
            if now >= self._next_discovery.get(cluster.pk, 0):
                found = self.discover(cluster)
                if found is not None:
                    self._served[cluster.pk] = dict(found)
            # Between discoveries too: a watcher thread that died (say, no database connection at
            # its start) is started again at the next tick.
            served = self._served.get(cluster.pk)
            if served is None:
                continue
            for kind, version in served.items():
                key = (cluster.pk, kind)
                running = self.watchers.get(key)
                if version is None:
                    if running:
                        running[0].stop.set()
                        running[0].close_stream()
                    continue
                if running is None or not running[1].is_alive() or running[0].version != version:
                    if running is not None:
                        running[0].stop.set()
                        running[0].close_stream()
                    self.start_watcher(cluster, kind, version)

    def share(self):
        """Heartbeat (every third of the lease time) and recompute this worker's share of the leases."""
        now = time.monotonic()
        if self._leaving:
            return
        if now >= self._next_heartbeat:
            held = sum(
                1
                for watcher, thread in self.watchers.values()
                if thread.is_alive() and watcher.lease is not None and watcher.lease.held
            )
            workers.heartbeat(self.holder, self.cluster_names, leases=held)
            self._next_heartbeat = now + lease_seconds() / 3.0
        owners = workers.assignment()
        self.owned = {key for key, owner in owners.items() if owner == self.holder}
        renew_parked(
            [w.lease for w, thread in self.watchers.values() if w.parked and w.lease is not None and thread.is_alive()]
        )

    def may_hold(self, key):
        return self.once or key in self.owned

    def discover(self, cluster):
        """{kind: version or None}, or None (error recorded, retried with backoff)."""
        now = timezone.now().timestamp()
        client = None
        try:
            client = KubeClient.for_cluster(cluster)
            served = discover(cluster, client)
        except KubeError as exc:
            backoff = self._backoff.setdefault(cluster.pk, Backoff())
            delay = backoff.next_delay()
            self._next_discovery[cluster.pk] = now + delay
            log.warning("cluster %s: discovery failed: %s (retry in %.1fs)", cluster.name, exc, delay)
            record_cluster_error(cluster, f"discovery: {exc}")
            return None
        finally:
            if client is not None:
                client.close()
        self._backoff.pop(cluster.pk, None)
        self._next_discovery[cluster.pk] = now + discovery_interval()
        return served

    def start_watcher(self, cluster, kind, version):
        key = (cluster.pk, kind)
        watcher = Watcher(
            cluster.pk,
            kind,
            version=version,
            holder=f"{self.holder}:{kind}"[:255],
            once=self.once,
            may_hold=lambda: self.may_hold(key),
            park_after=min(lease_seconds(), 2.0) if connection.vendor == "postgresql" and not self.once else None,
            list_slots=self.list_slots,
        )
        # A stop of the supervisor stops every watcher.
        watcher.stop = _ChainedEvent(self.stop_event)
        thread = threading.Thread(target=watcher.run, name=f"watch-{cluster.name}-{kind}", daemon=True)
        self.watchers[(cluster.pk, kind)] = (watcher, thread)
        thread.start()
        return watcher

    def run_once(self):
        """Discover and list every served kind once (in parallel), then return."""
        for cluster in self.clusters():
            served = self.discover(cluster)
            for kind, version in (served or {}).items():
                if version:
                    self.start_watcher(cluster, kind, version)
        for _, thread in list(self.watchers.values()):
            thread.join()

    def summary(self):
        return {
            f"{cid}:{kind}": {
                "alive": thread.is_alive(),
                "owned": (cid, kind) in self.owned,
                "held": bool(watcher.lease and watcher.lease.held),
            }
            for (cid, kind), (watcher, thread) in self.watchers.items()
        }


class _ChainedEvent(threading.Event):
    """A watcher's own stop flag that is also set when the supervisor stops."""

    def __init__(self, parent):
        super().__init__()
        self.parent = parent

    def is_set(self):
        return super().is_set() or self.parent.is_set()

    def wait(self, timeout=None):
        # Poll the parent in short steps: a stopping supervisor is noticed within 0.2 s.
        step = 0.2
        remaining = timeout
        while True:
            if self.is_set():
                return True
            chunk = step if remaining is None else min(step, remaining)
            if super().wait(chunk):
                return True
            if remaining is not None:
                remaining -= chunk
                if remaining <= 0:
                    return self.is_set()


def record_cluster_error(cluster, message):
    """Show a cluster-wide problem (discovery failed) on every kind no watcher is handling."""
    try:
        for kind in KINDS:
            SyncState.objects.get_or_create(cluster=cluster, kind=kind.kind)
        SyncState.objects.filter(cluster=cluster).exclude(status=SyncState.Status.CONNECTED).update(
            status=SyncState.Status.ERROR, last_error=message[:4000], last_error_at=timezone.now()
        )
    except DatabaseError:
        log.debug("recording cluster error failed", exc_info=True)


# --- process-wide supervisor (Celery worker, web process) ------------------------------------------

_process_supervisor = None
_process_lock = threading.Lock()


def ensure_supervisor():
    """Start this process's supervisor unless it is running; returns it."""
    global _process_supervisor
    with _process_lock:
        if _process_supervisor is None or not _process_supervisor.alive:
            _process_supervisor = Supervisor().start()
        return _process_supervisor


def start_in_process(loop=None):
    """Run the watchers inside this (web) process: the embedded default without Redis.

    `loop`: the server's running event loop, so change messages reach the in-memory channel layer
    from the loop that owns it.
    """
    if loop is not None:
        from .publish import publisher

        publisher.use_event_loop(loop)
    return ensure_supervisor()


def stop_process_supervisor():
    global _process_supervisor
    with _process_lock:
        if _process_supervisor is not None:
            _process_supervisor.stop()
            _process_supervisor = None
