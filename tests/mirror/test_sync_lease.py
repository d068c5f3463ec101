"""Exactly one active watcher per (cluster, kind), and quick takeover when its holder dies."""

import os
import signal
import subprocess
import sys

import pytest

from mirror.models import SyncState
from tests.browser import ROOT, subprocess_env
from tests.sync_fixtures import assert_mirror_equals_server, make_claim, state, wait_for


@pytest.mark.sqlite_default
def test_two_workers_compete_only_one_applies(cluster, devcluster, fast_sync, run_watcher):
    for i in range(10):
        devcluster.store.create("resourceclaims", make_claim("ns", f"c{i}"))
    a = run_watcher(cluster, "ResourceClaim", holder="worker-a")
    b = run_watcher(cluster, "ResourceClaim", holder="worker-b")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    for i in range(10, 15):
        devcluster.store.create("resourceclaims", make_claim("ns", f"c{i}"))
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    holder = state(cluster, "ResourceClaim").lease_holder
    active, standby = (a, b) if holder == "worker-a" else (b, a)
    assert holder in ("worker-a", "worker-b")
    # The counters move just after the commit the mirror check saw: wait for them, then compare exactly.
    wait_for(
        lambda: (active.watcher.stats.listed, active.watcher.stats.events) == (10, 5),
        message="the active watcher's counts",
    )
    assert standby.watcher.stats.listed == 0 and standby.watcher.stats.events == 0

    active.stop()  # a clean stop releases the lease; the standby takes over
    wait_for(lambda: state(cluster, "ResourceClaim").lease_holder == standby.watcher.holder, message="takeover")
    devcluster.store.delete("resourceclaims", "ns", "c0")
    assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
    wait_for(
        lambda: standby.watcher.stats.events + standby.watcher.stats.listed >= 1,
        message="the standby to apply the delete",
    )


def test_watcher_that_lost_its_lease_applies_nothing(cluster, devcluster, fast_sync, run_watcher):
    w = run_watcher(cluster, "ResourceClaim", holder="worker-a")
    wait_for(lambda: state(cluster, "ResourceClaim").status == SyncState.Status.CONNECTED)
    assert devcluster.wait_for_watches("resourceclaims")
    # Someone else grabs the lease (as after a long pause of worker-a): its next write must be refused.
    SyncState.objects.filter(cluster=cluster, kind="ResourceClaim").update(lease_holder="intruder")
    devcluster.store.create("resourceclaims", make_claim("ns", "late"))
    wait_for(lambda: not w.watcher.lease.held, message="worker-a to notice")
    assert not cluster_claims(cluster)
    assert state(cluster, "ResourceClaim").lease_holder == "intruder"


def cluster_claims(cluster):
    from claims.models import ResourceClaim

    return list(ResourceClaim.objects.filter(cluster=cluster).values_list("name", flat=True))


@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres") is False,
    reason="a second process needs a shared server database",
)
def test_worker_killed_holding_the_lease_is_taken_over(cluster, devcluster, fast_sync, run_watcher, tmp_path):
    for i in range(5):
        devcluster.store.create("resourceclaims", make_claim("ns", f"c{i}"))
    env = dict(
        subprocess_env(),
        GPUDASH_LEASE_SECONDS="2",
        GPUDASH_WATCH_TIMEOUT="5",
        GPUDASH_BACKOFF_MAX="0.5",
        GPUDASH_LIST_PAGE_SIZE="3",
    )
    log = open(tmp_path / "watch.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "watch", "--cluster", "dev"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: f":{proc.pid}:" in state(cluster, "ResourceClaim").lease_holder,
            timeout=60,
            message="the subprocess to hold the lease",
        )
        assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"], timeout=60)
        wait_for(
            lambda: state(cluster, "ResourceClaim").status == SyncState.Status.CONNECTED, message="the list to finish"
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        dead = state(cluster, "ResourceClaim")
        dead_holder = dead.lease_holder
        assert dead.resource_version, (dead.status, dead.last_error, (tmp_path / "watch.log").read_text()[-3000:])
        devcluster.store.delete("resourceclaims", "ns", "c0")
        devcluster.store.create("resourceclaims", make_claim("ns", "after-kill"))
        successor = run_watcher(cluster, "ResourceClaim", holder="successor")
        assert_mirror_equals_server(cluster, devcluster, ["ResourceClaim"])
        assert state(cluster, "ResourceClaim").lease_holder == "successor" != dead_holder
        # It resumed from the dead worker's stored resourceVersion rather than relisting.
        wait_for(lambda: successor.watcher.stats.events == 2, message="the successor to apply both changes")
        assert successor.watcher.stats.listed == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()
