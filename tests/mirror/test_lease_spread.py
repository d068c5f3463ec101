"""Leases spread over several real worker processes watching several API servers.

Three `manage.py watch` processes (one a Celery worker when Redis is there) share the (cluster, kind)
leases of four devclusters while claims churn on every server: the shares even out, a `kill -9`'d
worker's share moves to the others, a worker frozen past its lease (SIGSTOP) applies nothing when it
wakes, a joining worker gets its share by clean hand-over, and at the end the mirror holds exactly
the servers' objects. Every change-log entry names the lease tenure (fence token) that wrote it: per
(cluster, kind) the tokens never go back, so no two workers ever applied the same (cluster, kind)
interleaved.
"""

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from mirror.models import Cluster, MirrorChange, SyncState, SyncWorker
from mirror.sync import workers
from mirror.sync.kinds import KINDS
from tests.browser import ROOT, celery_worker_command, stop_process, subprocess_env
from tests.sync_fixtures import assert_mirror_equals_server, make_claim, make_node, make_slice, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="worker processes share a server database"
    ),
]

CLUSTERS = 4
LEASE = 2.0
KINDS_CHECKED = ["Node", "ResourceSlice", "ResourceClaim"]


@pytest.fixture
def servers():
    from devcluster.server import DevCluster

    started = []
    try:
        for _ in range(CLUSTERS):
            server = DevCluster(bookmark_interval=0.3)
            server.start()
            started.append(server)
        yield started
    finally:
        for server in started:
            server.stop()


class Worker:
    def __init__(self, label, tmp_path, celery=False):
        self.label, self.celery = label, celery
        self.log_path = tmp_path / f"{label}.log"
        env = dict(
            subprocess_env(),
            GPUDASH_LEASE_SECONDS=str(LEASE),
            GPUDASH_WATCH_TIMEOUT="5",
            GPUDASH_BACKOFF_MAX="0.5",
            GPUDASH_DISCOVERY_INTERVAL="30",
            LOG_LEVEL="INFO",
        )
        if celery:
            cmd = celery_worker_command("-Q", f"leases-{os.getpid()}", "-n", f"{label}@%h")
        else:
            cmd = [sys.executable, "manage.py", "watch"]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self):
        return self.proc.pid

    def name(self):
        """Its SyncWorker name (host:pid:random), once it heartbeats."""
        row = SyncWorker.objects.filter(pid=self.pid).order_by("-started").first()
        return row.name if row else None

    def tail(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def close(self):
        stop_process(self.proc, grace=20)
        self.log.close()


def describe():
    shares, rows = workers.lease_table()
    held = {s.name: len(s.held) for s in shares}
    odd = [
        (r.state.cluster.name, r.state.kind, r.state.status, r.holder_worker or r.state.lease_holder, r.owner)
        for r in rows
        if r.owner and (not r.held or r.handing_over)
    ]
    return f"held {held}; unsettled {odd[:8]}"


def settle(expected_workers, total, what, procs=()):
    try:
        return wait_for(lambda: shares_even(expected_workers, total), timeout=90, interval=0.3, message=what)
    except AssertionError as exc:
        logs = " | ".join(p.tail()[-1500:] for p in procs)
        raise AssertionError(f"{exc}; {describe()}; logs: {logs}") from None


def shares_even(expected_workers, total):
    """Every wanted lease is held by its assigned owner, among exactly `expected_workers`, evenly."""
    shares, rows = workers.lease_table()
    rows = [r for r in rows if r.owner]  # the wanted ones (not "not served")
    live = {s.name: len(s.held) for s in shares if s.live}
    if set(live) != set(expected_workers):
        return False
    if len(rows) < total or any(not r.held or not r.holder_worker or r.handing_over for r in rows):
        return False
    even = total / len(expected_workers)
    counts = sorted(live.values())
    return counts if all(abs(n - even) <= 1 for n in counts) and sum(counts) == total else False


class Churn(threading.Thread):
    """Claims created, modified and deleted on every server while workers come and go."""

    def __init__(self, servers):
        super().__init__(daemon=True)
        self.servers, self.stop, self.ops = servers, threading.Event(), 0
        self.rng = random.Random(15)

    def run(self):
        for n in itertools.count():
            if self.stop.is_set():
                return
            server = self.servers[n % len(self.servers)]
            live = server.store.list("resourceclaims")
            roll = self.rng.random()
            if roll < 0.5 or len(live) < 5:
                server.store.create("resourceclaims", make_claim("ns", f"churn-{n}"))
            elif roll < 0.8:
                obj = self.rng.choice(live)
                obj["metadata"].setdefault("annotations", {})["churn"] = str(n)
                server.store.update("resourceclaims", obj)
            else:
                obj = self.rng.choice(live)
                server.store.delete("resourceclaims", obj["metadata"]["namespace"], obj["metadata"]["name"])
            self.ops += 1
            time.sleep(0.01)


def test_leases_spread_move_and_stay_fenced(servers, tmp_path, transactional_db):
    clusters = []
    for i, server in enumerate(servers):
        for n in range(3):
            server.store.create("nodes", make_node(f"n{n}"))
            server.store.create("resourceslices", make_slice(f"n{n}"))
        for n in range(8):
            server.store.create("resourceclaims", make_claim("ns", f"seed-{n}"))
        path = server.write_kubeconfig(tmp_path / f"kubeconfig-{i}", context="devcluster")
        clusters.append(Cluster.objects.create(name=f"c{i}", kubeconfig=str(path), context="devcluster"))

    use_celery = bool(os.environ.get("REDIS_URL"))
    procs = [Worker("a", tmp_path), Worker("b", tmp_path), Worker("c", tmp_path, celery=use_celery)]
    churn = Churn(servers)
    try:
        if use_celery:
            from mirror.sync.tasks import ensure_watchers

            ensure_watchers.apply_async(queue=f"leases-{os.getpid()}")  # what beat sends every 15 s
        names = wait_for(
            lambda: all(p.name() for p in procs) and [p.name() for p in procs],
            timeout=120,
            message="three workers to heartbeat",
        )
        total = wait_for(
            lambda: len(workers.wanted_keys()) if SyncState.objects.count() == CLUSTERS * len(KINDS) else 0,
            timeout=60,
            message="discovery on every cluster",
        )
        counts = settle(names, total, "the shares to even out over three workers", procs)
        print(f"{total} leases over 3 workers: {counts}")
        for cluster, server in zip(clusters, servers):
            assert_mirror_equals_server(cluster, server, KINDS_CHECKED, timeout=60)

        churn.start()
        # --- kill -9 one worker: its share moves to the two others ---
        victim = procs[0]
        dead_keys = {
            (r.state.cluster_id, r.state.kind) for r in workers.lease_table()[1] if r.holder_worker == names[0]
        }
        assert dead_keys
        os.kill(victim.pid, signal.SIGKILL)
        victim.proc.wait(10)
        killed = time.monotonic()
        counts = settle(names[1:], total, "the dead worker's share to move", procs)
        moved_after = time.monotonic() - killed
        print(f"after kill -9: {counts} in {moved_after:.1f} s (lease {LEASE} s)")
        # Its heartbeat and leases both lapse after LEASE s; the survivors notice at their next tick
        # (1 s) and acquire within a second. Printed, not asserted (timing on a shared machine): 8-15 s
        # were seen at load 12-30 on 2 cores; settle() bounds it at 90 s.

        # --- freeze a worker past its lease (a VM pause): the other takes what it can; woken, the
        # frozen worker's in-flight batch lands only if nobody took over meanwhile (the fence) ---
        frozen = procs[1]
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: SyncState.objects.filter(lease_holder__startswith=names[2] + ":").count() > counts[0] + 2,
                timeout=60,
                message="the other worker to take leases of the frozen one",
            )
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        settle(names[1:], total, "the woken worker to get its share back", procs)

        # --- a new worker joins: the others hand over the leases it now owns ---
        procs.append(Worker("d", tmp_path))
        joined = wait_for(procs[3].name, timeout=120, message="the new worker to heartbeat")
        counts = wait_for(
            lambda: shares_even([names[1], names[2], joined], total), timeout=60, message="hand-over to the new worker"
        )
        print(f"after join: {counts}")

        churn.stop.set()
        churn.join(10)
        assert churn.ops > 50
        # Nothing lost: every server's objects, uid and resourceVersion, are in the mirror.
        for cluster, server in zip(clusters, servers):
            assert_mirror_equals_server(cluster, server, KINDS_CHECKED, timeout=60)
        assert_fenced(names + [joined])
    finally:
        churn.stop.set()
        for p in procs:
            if p.proc.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for p in procs:
            p.close()
    # SIGTERM: the leaving workers released their leases and removed their heartbeats.
    assert not SyncWorker.objects.filter(name__in=[names[1], names[2], joined]).exists()
    assert not SyncState.objects.filter(lease_holder__startswith=names[1] + ":").exists()
    assert not SyncState.objects.filter(lease_holder__startswith=joined + ":").exists()


def assert_fenced(worker_names):
    """Per (cluster, kind), in commit order: tokens never decrease, each token is one holder's, and
    every entry was written under a lease by one of the workers."""
    entries = MirrorChange.objects.order_by("cluster_id", "kind", "seq").values_list(
        "cluster_id", "kind", "seq", "holder", "lease_token"
    )
    by_key = {}
    for cid, kind, seq, holder, token in entries:
        by_key.setdefault((cid, kind), []).append((seq, holder, token))
    assert by_key
    tenures = 0
    for key, rows in by_key.items():
        holders = {}
        last = 0
        for seq, holder, token in rows:
            assert token >= 1 and workers.worker_of(holder, worker_names), (key, seq, holder, token)
            assert token >= last, (
                f"{key}: entry {seq} by {holder} has token {token} after token {last} (applied out of its tenure)"
            )
            assert holders.setdefault(token, holder) == holder, (
                f"{key}: token {token} used by {holders[token]} and {holder}"
            )
            last = token
        tenures += len(holders)
    # Leases really moved between workers during the test.
    assert tenures > len(by_key)
