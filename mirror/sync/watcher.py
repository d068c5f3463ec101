"""The list+watch loop of one (cluster, kind).

Written here rather than taken from kubernetes.watch / SharedInformer: those use typed models (which
drop unknown fields), do not paginate or ask for bookmarks, and mishandle 410 and ERROR events with raw
bodies. The loop: LIST in pages (each page one transaction), remember the list's resourceVersion, WATCH
from it with bookmarks and a server timeout, resume from the last seen resourceVersion on reconnect,
relist + reconcile on 410. Every write is fenced by the (cluster, kind) lease.
"""

import json
import logging
import queue
import random
import threading
import time
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from dra.gcpause import collector_paused
from mirror.kube import KubeClient, KubeError
from mirror.models import Cluster, SyncState, resource_version_number

from . import apply, fastjson
from .hooks import hooks
from .kinds import KINDS_BY_NAME
from .lease import Lease, LeaseLost, increment, new_holder_id
from .publish import Change, publish_on_commit

log = logging.getLogger(__name__)

MAX_EVENTS_PER_BATCH = 2000


class Gone(Exception):
    """The resourceVersion we watch from has been compacted away (HTTP 410 or an ERROR event): relist."""


class NotServed(Exception):
    """The API server no longer serves this kind (404 on the collection)."""


class HandOver(Exception):
    """This (cluster, kind) is another live worker's share now: release the lease between batches."""


def sync_setting(name, default):
    return settings.GPUDASH_SYNC.get(name, default)


class Backoff:
    """Exponential backoff with jitter, capped at BACKOFF_MAX_SECONDS."""

    def __init__(self, base=0.5, cap=None):
        self.base = base
        self.cap = cap if cap is not None else float(sync_setting("BACKOFF_MAX_SECONDS", 30))
        self.failures = 0

    def next_delay(self):
        self.failures += 1
        delay = min(self.cap, self.base * (2 ** (self.failures - 1)))
        return delay * random.uniform(0.8, 1.0)

    def reset(self):
        self.failures = 0


class WatchStats:
    """Counters for the benchmark and the logs: where the time goes."""

    def __init__(self):
        self.events = 0
        self.batches = 0
        self.listed = 0
        self.parse_seconds = 0.0
        self.apply_seconds = 0.0
        self.list_fetch_seconds = 0.0


class Watcher:
    """Keeps one (cluster, kind) mirrored while `stop` is not set. Run it in its own thread."""

    def __init__(
        self,
        cluster_id,
        kind,
        version=None,
        holder=None,
        stop=None,
        once=False,
        may_hold=None,
        park_after=None,
        list_slots=None,
    ):
        self.cluster_id = cluster_id
        self.kind = kind
        self.spec = KINDS_BY_NAME[kind]
        self.version = version or self.spec.version
        self.holder = holder or new_holder_id(kind)
        self.stop = stop or threading.Event()
        self.once = once  # list (or catch up) once, then return: `manage.py watch --once`
        # Whether this worker's share includes this (cluster, kind) (the Supervisor's assignment);
        # a lone watcher (tests, benchmarks) may always hold.
        self.may_hold = may_hold or (lambda: True)
        # After this many quiet seconds on a watch, hand the database connection back and let the
        # Supervisor renew the lease (one statement for all its parked watchers): a worker with 100
        # (cluster, kind)s must not hold 100 connections. None: never (SQLite, lone watchers).
        self.park_after = park_after
        self.parked = False
        # A worker-wide semaphore bounding its LISTs in flight (each holds a connection and CPU).
        self.list_slots = list_slots
        self.rv = ""
        self.stats = WatchStats()
        self.lease = None
        self.cluster = None
        self.client = None
        self.not_served = False
        self._response = None
        self.finished = threading.Event()
        # The allocation ledger (hooks.ledger_kinds): whether this kind's stream is followed, the last
        # moment this watcher's stream was observed complete, and after a new tenure resumed a watch,
        # (the resume time, the last resourceVersion that happened while nobody watched).
        self.ledger = kind in hooks.ledger_kinds
        self.alive_at = None
        self.earlier_alive = None  # an earlier tenure's last renewal while connected (Lease.previous)
        self.replay = None

    # --- the outer loop ---------------------------------------------------------------------

    def run(self):
        try:
            self._run()
        finally:
            if self.lease is not None and self.lease.held:
                try:
                    self._record(status=SyncState.Status.IDLE)
                    self.lease.release()
                except DatabaseError:
                    log.debug("releasing lease failed", exc_info=True)
            if self.client is not None:
                self.client.close()
            self.finished.set()
            connection.close()

    def _run(self):
        backoff = Backoff()
        while not self.stop.is_set():
            try:
                close_old_connections()
                if self.lease is None or not self.lease.held:
                    if not self.may_hold():
                        # Standby without touching the database (nor holding a connection): another worker's share.
                        if connection.connection is not None:
                            connection.close()
                        self.stop.wait(0.25)
                        continue
                    if self.lease is None:
                        # Here, inside the retry loop: a database hiccup at start is retried, not fatal.
                        self.cluster = Cluster.objects.get(pk=self.cluster_id)
                        state, _ = SyncState.objects.get_or_create(cluster=self.cluster, kind=self.kind)
                        self.lease = Lease(state.pk, self.holder)
                    self._configure_session()
                    if not self.lease.acquire():
                        if self.once:
                            return
                        # Ours but still held (a hand-over in progress, or its holder died): retry soon.
                        self.stop.wait(min(self.lease.renew_interval, 1.0))
                        continue
                    # Resume where the last holder left off: the rows match its stored version.
                    self.rv = SyncState.objects.values_list("resource_version", flat=True).get(pk=self.lease.state_id)
                    if self.ledger:
                        # A new tenure: whatever happened since the last observation is a gap. A relist
                        # reports it at its end; a resumed watch first (_ledger_resume).
                        self.alive_at, self.earlier_alive = None, self.lease.previous_alive()
                        self.replay = "pending" if self.rv else None
                    log.info(
                        "%s %s: lease taken by %s (resume from %r)", self.cluster_name, self.kind, self.holder, self.rv
                    )
                if self.client is None:
                    self.client = KubeClient.for_cluster(self.cluster)
                if not self.rv or self.once:
                    self._list_in_slot()
                    if self.stop.is_set():
                        return
                    if self.once:
                        return
                self.watch_once()
                backoff.reset()
                if self.once:
                    return
            except Gone:
                log.info("%s %s: resourceVersion %s expired; relisting", self.cluster_name, self.kind, self.rv)
                self._record(gone_count=increment("gone_count", 1))
                self.rv = ""
            except LeaseLost as exc:
                log.warning("%s %s: %s; stopping", self.cluster_name, self.kind, exc)
                self.lease.held = False
                self.rv = ""
            except HandOver:
                # Every batch so far is committed with its resourceVersion: the new owner resumes there.
                log.info("%s %s: handing the lease over (%s)", self.cluster_name, self.kind, self.holder)
                self.lease.release()
                self.rv = ""
            except NotServed as exc:
                self.not_served = True
                self._record(
                    status=SyncState.Status.NOT_SERVED, last_error=str(exc)[:4000], last_error_at=timezone.now()
                )
                return
            except (KubeError, DatabaseError, OSError, ValueError) as exc:
                if self.stop.is_set():
                    return  # the stream was closed under us on purpose
                delay = backoff.next_delay()
                log.warning("%s %s: %s (retry in %.1fs)", self.cluster_name, self.kind, exc, delay)
                self._record_error(exc)
                if isinstance(exc, DatabaseError):
                    connection.close()
                if self.client is not None and isinstance(exc, KubeError) and exc.status in (0, 401, 403):
                    # Connection or credential trouble: a fresh client re-reads the kubeconfig (rotated tokens).
                    self.client.close()
                    self.client = None
                if self.once:
                    raise
                self._sleep_holding_lease(delay)

    def _configure_session(self):
        """PostgreSQL: end this session's transaction if it idles (a frozen or stuck process) longer
        than a few lease times. Else its row locks (the fenced SyncState row) would keep the
        worker that now owns the lease from ever taking it; the frozen process, once awake, finds
        its connection closed and its lease gone (the fence), and applies nothing stale."""
        if connection.vendor != "postgresql":
            return
        connection.ensure_connection()
        raw = connection.connection
        if raw is getattr(self, "_configured", None):
            return
        seconds = float(sync_setting("IDLE_IN_TRANSACTION_SECONDS", 0) or 3 * self.lease.seconds)
        with connection.cursor() as cursor:
            cursor.execute(f"SET idle_in_transaction_session_timeout = {int(seconds * 1000)}")
        self._configured = raw

    def _list_in_slot(self):
        if self.list_slots is None:
            return self.list_and_reconcile()
        while not self.list_slots.acquire(timeout=self.lease.renew_interval):
            # Wait for a slot without a connection of our own, keeping the lease.
            if self.stop.is_set():
                return None
            with transaction.atomic():
                self.lease.fence()
            connection.close()
        try:
            return self.list_and_reconcile()
        finally:
            self.list_slots.release()

    def _sleep_holding_lease(self, delay):
        """Back off, keeping the lease (another worker would hit the same outage) while renewable."""
        if self.lease is None:  # failed before it could look its lease up
            self.stop.wait(delay)
            return
        deadline = time.monotonic() + delay
        while not self.stop.is_set() and time.monotonic() < deadline:
            self.stop.wait(min(self.lease.renew_interval, max(deadline - time.monotonic(), 0)))
            if self.lease.held and not self.may_hold():
                try:
                    self.lease.release()
                except DatabaseError:
                    connection.close()
                return
            if self.lease.held:
                try:
                    self.lease.renew()
                except DatabaseError:
                    connection.close()

    @property
    def cluster_name(self):
        return self.cluster.name if self.cluster is not None else f"cluster {self.cluster_id}"

    def _record(self, **values):
        if self.lease is None:
            return
        try:
            SyncState.objects.filter(pk=self.lease.state_id, lease_holder__in=(self.holder, "")).update(**values)
        except DatabaseError:
            log.debug("recording state failed", exc_info=True)
            connection.close()

    def _record_error(self, exc):
        self._record(
            status=SyncState.Status.ERROR,
            last_error=f"{type(exc).__name__}: {exc}"[:4000],
            last_error_at=timezone.now(),
        )

    def close_stream(self):
        """Unblock a reader waiting on the watch connection (stop, lease lost)."""
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:
                log.debug("closing watch stream failed", exc_info=True)

    # --- list -----------------------------------------------------------------------------------

    @property
    def path(self):
        return self.spec.list_path(self.version)

    def list_and_reconcile(self):
        """Full paginated LIST: every page applied in its own fenced transaction, then reconcile."""
        first_sync = not SyncState.objects.filter(pk=self.lease.state_id).exclude(last_list_at=None).exists()
        listed_at = timezone.now()  # the ledger's relist time: what the list shows held from then on
        with transaction.atomic():
            self.lease.fence(status=SyncState.Status.LISTING)
        page_size = int(sync_setting("LIST_PAGE_SIZE", 500))
        seen_ids, cont, list_rv = set(), "", ""
        # Refreshed once at the end of the list, not per page. Pools deferred by an earlier list whose end
        # failed (a deadlock, a lost connection) are kept: the retry's pages are unchanged and name none.
        device_pools = self._deferred_pools = getattr(self, "_deferred_pools", set())
        footprint_keys = set()  # pods the list's pages stored footprints of (every pod, DRA or not)
        analyze = False  # statistics due after the pages' inserts: taken once, at the end
        api_version = (
            self.spec.group_version if self.version == self.spec.version else f"{self.spec.group}/{self.version}"
        )
        while True:
            started = time.monotonic()
            try:
                page = self.client.get_json(self.path, {"limit": page_size, "continue": cont})
            except KubeError as exc:
                if exc.not_found:
                    raise NotServed(f"{self.path}: not served (404)") from exc
                if exc.gone and cont:
                    # The continue token expired mid-list: start over for a consistent snapshot.
                    seen_ids, cont, list_rv = set(), "", ""  # pages already applied keep their device_pools
                    footprint_keys = set()
                    continue
                raise
            self.stats.list_fetch_seconds += time.monotonic() - started
            meta = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
            if not list_rv:
                list_rv = str(meta.get("resourceVersion") or "")
            items = page.get("items")
            if not isinstance(items, list):
                raise KubeError(f"LIST {self.path}: response has no items list")
            for item in items:
                if isinstance(item, dict):
                    # List items come without apiVersion/kind; add them so every stored raw reads alike.
                    item.setdefault("apiVersion", api_version)
                    item.setdefault("kind", self.kind)
            started = time.monotonic()
            with collector_paused(), transaction.atomic():
                self.lease.fence(status=SyncState.Status.LISTING)
                result = apply.apply_batch_safely(
                    self.cluster,
                    self.kind,
                    [(apply.LISTED, item) for item in items],
                    defer_device_state=True,
                    observed=(listed_at, False) if self.ledger else None,
                )
                if result.malformed:
                    self.lease.fence(
                        malformed_count=increment("malformed_count", len(result.malformed)),
                        last_malformed=result.malformed[-1][0][:2000],
                        last_malformed_at=timezone.now(),
                    )
            self.stats.apply_seconds += time.monotonic() - started
            self.stats.listed += len(items)
            seen_ids |= result.seen_ids
            device_pools |= result.device_pools
            footprint_keys |= result.footprint_keys
            analyze |= result.analyze
            cont = str(meta.get("continue") or "")
            if not cont:
                break
        started = time.monotonic()
        if analyze:
            apply.take_statistics(self.kind, device_pools)  # outside the transaction: no locks held past it
        with transaction.atomic():
            self.lease.fence()
            apply.reconcile(
                self.cluster,
                self.kind,
                seen_ids,
                resource_version_number(list_rv),
                device_pools=device_pools,
                footprint_keys=footprint_keys if self.kind == "Pod" else None,
            )
            if self.ledger:
                hooks.ledger_relist(self.cluster, listed_at, self._ledger_last_alive())
                self.alive_at, self.earlier_alive, self.replay = listed_at, None, None
            now = timezone.now()
            self.lease.fence(
                status=SyncState.Status.CONNECTED,
                api_version=api_version,
                resource_version=list_rv,
                last_list_at=now,
                connected_since=now,
                object_count=self.spec.model.objects.filter(cluster=self.cluster).count(),
                relist_count=increment("relist_count", 0 if first_sync else 1),
            )
            publish_on_commit(
                [Change(self.cluster.pk, self.cluster.name, self.kind, "RELIST", resourceVersion=list_rv)]
            )
        self.stats.apply_seconds += time.monotonic() - started
        self._deferred_pools = set()
        self.rv = list_rv
        self._request_detection()
        log.info("%s %s: listed %d objects at resourceVersion %s", self.cluster.name, self.kind, len(seen_ids), list_rv)

    # --- watch ------------------------------------------------------------------------------------

    def _ledger_last_alive(self):
        return max((t for t in (self.alive_at, self.earlier_alive) if t is not None), default=None)

    def _ledger_resume(self):
        """A new tenure resumes the watch from a stored resourceVersion: the events replayed up to the
        collection's current version happened while nobody watched, at unknown times. Asks the server
        for that version (a one-item LIST) and records the gap before the first of them lands."""
        page = self.client.get_json(self.path, {"limit": 1})
        meta = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
        now = timezone.now()
        with transaction.atomic():
            self.lease.fence()
            hooks.ledger_resume(self.cluster, now, self._ledger_last_alive())
        self.replay = (now, resource_version_number(str(meta.get("resourceVersion") or "")))
        self.alive_at = now

    def _ledger_alive(self, at):
        """The stream was complete up to `at` (called inside a fenced transaction)."""
        self.alive_at = at
        hooks.ledger_alive(self.cluster.pk, at)

    def watch_once(self):
        """One WATCH connection from self.rv until the server closes it (timeoutSeconds) or stop."""
        if self.ledger and self.replay == "pending":
            self._ledger_resume()
        timeout = int(sync_setting("WATCH_TIMEOUT_SECONDS", 300))
        query = {"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true", "timeoutSeconds": timeout}
        try:
            response, lines = self.client.stream_lines(self.path, query, timeout=(10.0, timeout + 30.0))
        except KubeError as exc:
            if exc.gone:
                raise Gone(str(exc)) from exc
            if exc.not_found:
                raise NotServed(f"{self.path}: not served (404)") from exc
            raise
        self._response = response
        events = queue.Queue(maxsize=20000)
        reader = threading.Thread(target=_read_lines, args=(lines, events), name=f"watch-{self.kind}", daemon=True)
        reader.start()
        with transaction.atomic():
            self.lease.fence(status=SyncState.Status.CONNECTED, watch_restarts=increment("watch_restarts", 1))
        quiet, wait = 0.0, min(self.lease.renew_interval, 1.0)
        renewed = time.monotonic()
        try:
            while not self.stop.is_set():
                try:
                    first = events.get(timeout=wait)
                except queue.Empty:
                    if not self.may_hold():
                        raise HandOver() from None
                    if not self.lease.held:
                        raise LeaseLost(f"lease of sync state {self.lease.state_id} was taken while parked") from None
                    quiet += wait
                    if self.parked:
                        continue
                    parking = self.park_after is not None and quiet >= self.park_after
                    if parking or time.monotonic() - renewed >= self.lease.renew_interval:
                        with transaction.atomic():
                            self.lease.fence()  # keep the lease on a quiet stream
                            if self.ledger:
                                self._ledger_alive(timezone.now())  # nothing pending: complete until now
                        renewed = time.monotonic()
                    if parking:
                        self.parked = True  # from now on the Supervisor renews it
                        connection.close()
                    continue
                quiet = 0.0
                self.parked = False
                renewed = time.monotonic()  # the batch's fence renews
                batch = [first]
                while len(batch) < MAX_EVENTS_PER_BATCH:
                    try:
                        batch.append(events.get_nowait())
                    except queue.Empty:
                        break
                if self._apply_lines(batch):
                    return
                if not self.may_hold():
                    raise HandOver()  # after the batch in hand, never inside it
        finally:
            self._response = None
            self.parked = False
            try:
                response.shutdown()
            except Exception:
                log.debug("closing watch failed", exc_info=True)
            _stop_reader(reader, events)
            response.release_conn()

    def _request_detection(self):
        """Let the stuck-claim detector judge what was just committed (debounced per cluster there)."""
        try:
            hooks.request_detection(self.cluster, [self.kind])
        except Exception:  # a broker hiccup must not stop the sync; the periodic run catches up
            log.warning(
                "%s %s: could not request a stuck-claim detector run", self.cluster.name, self.kind, exc_info=True
            )

    @collector_paused()  # a batch's parsed events and rows live until it ends, none in a cycle (gcpause.py)
    def _apply_lines(self, batch):
        """Apply one run of watch lines. Returns True when the stream has ended."""
        started = time.monotonic()
        ended, error = False, None
        events, malformed = [], []
        observed = [] if self.ledger else None  # per event: (received at, exact), for the ledger
        seen_at = None  # the last line's arrival
        replay_at, replay_until = self.replay if isinstance(self.replay, tuple) else (None, 0)
        rv, rv_num = self.rv, resource_version_number(self.rv)
        for tag, payload, received in batch:
            if tag == "end":
                ended = True
                seen_at = received  # a clean end: nothing was left unsaid
                break
            if tag == "error":
                error = payload
                break
            try:
                event = fastjson.loads(payload)
            except ValueError as exc:
                malformed.append(f"undecodable watch line ({exc}): {payload[:2000]!r}")
                continue
            if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                malformed.append(f"watch event without an object: {payload[:2000]!r}")
                continue
            etype, obj = event.get("type"), event["object"]
            if etype == "ERROR":
                error = _status_error(obj)
                break
            obj_meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            obj_rv = obj_meta.get("resourceVersion")
            obj_rv_num = resource_version_number(obj_rv)
            seen_at = received  # not an ERROR: the stream was whole up to this line
            if etype == "BOOKMARK":
                if obj_rv and (not rv_num or obj_rv_num >= rv_num):
                    rv, rv_num = str(obj_rv), obj_rv_num
                continue
            if etype not in (apply.ADDED, apply.MODIFIED, apply.DELETED):
                malformed.append(f"watch event of unknown type {etype!r}: {payload[:2000]!r}")
                continue
            if obj_rv_num and rv_num and obj_rv_num < rv_num:
                log.info("%s %s: out-of-order event (rv %s < %s) ignored", self.cluster.name, self.kind, obj_rv, rv)
                continue
            events.append((etype, obj))
            if observed is not None:
                if replay_at is not None and obj_rv_num and obj_rv_num <= replay_until:
                    observed.append((replay_at, False))  # happened while nobody watched
                else:
                    observed.append((_when(received), True))
            if obj_rv_num:
                rv, rv_num = str(obj_rv), obj_rv_num
        self.stats.parse_seconds += time.monotonic() - started
        for text in malformed:
            log.warning("%s %s: malformed watch data skipped: %s", self.cluster.name, self.kind, text)

        started = time.monotonic()
        self._configure_session()
        with transaction.atomic():
            self.lease.fence()
            result = (
                apply.apply_batch_safely(self.cluster, self.kind, events, observed=observed)
                if events
                else apply.BatchResult()
            )
            bad = len(malformed) + len(result.malformed)
            values = {"resource_version": rv, "status": SyncState.Status.CONNECTED}
            if events:
                values.update(
                    last_event_at=timezone.now(),
                    events_applied=increment("events_applied", len(events)),
                    object_count=increment("object_count", result.inserted - result.deleted),
                )
            if bad:
                values["malformed_count"] = increment("malformed_count", bad)
                values["last_malformed"] = (result.malformed[-1][0] if result.malformed else malformed[-1])[:2000]
                values["last_malformed_at"] = timezone.now()
            self.lease.fence(**values)
            if self.ledger and seen_at is not None:
                self._ledger_alive(_when(seen_at))
        self.rv = rv
        self.stats.apply_seconds += time.monotonic() - started
        if result.changes:
            self._request_detection()
        self.stats.events += len(events)
        self.stats.batches += 1
        if error is not None:
            raise error
        return ended


def _when(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def _read_lines(lines, events):
    """Reader thread: hands raw lines to the applier; the applier parses (one place for errors)."""
    # Each line with the moment it arrived: the allocation ledger dates events by it (usage/ledger.py).
    try:
        for line in lines:
            events.put(("line", line, time.time()))
        events.put(("end", None, time.time()))
    except KubeError as exc:
        events.put(("error", exc, time.time()))
    except Exception as exc:  # never die silently: the applier reports it
        events.put(("error", KubeError(f"watch stream failed: {exc}"), time.time()))


def _stop_reader(reader, events, timeout=5.0):
    """Wait for the reader thread after the applier stopped early (error, stop). It may be blocked
    handing a line to the full queue, so keep emptying it: else the thread and its connection leak."""
    deadline = time.monotonic() + timeout
    while reader.is_alive() and time.monotonic() < deadline:
        try:
            while True:
                events.get_nowait()
        except queue.Empty:
            pass
        reader.join(0.05)


def _status_error(status):
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    message = status.get("message") or status.get("reason") or json.dumps(status)[:300]
    if code == 410 or status.get("reason") in ("Expired", "Gone"):
        return Gone(message)
    return KubeError(f"watch ERROR event: {message}", status=code)
