"""The watcher task in a real Celery worker (Redis broker) mirrors the devcluster."""

import os
import subprocess

import pytest
from django.utils import timezone

from tests.browser import ROOT, celery_worker_command, stop_process, subprocess_env
from tests.sync_fixtures import allocation, assert_mirror_equals_server, make_claim, make_node, state, wait_for
from usage.models import AllocationInterval, LedgerEvent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="needs Redis (broker) and PostgreSQL shared with the worker",
    ),
]


def test_celery_worker_runs_the_watchers(cluster, devcluster, fast_sync, tmp_path):
    from mirror.sync.tasks import ensure_watchers

    devcluster.store.create("nodes", make_node("n1"))
    devcluster.store.create("resourceclaims", make_claim("ns", "c1"))
    env = dict(
        subprocess_env(),
        GPUDASH_LEASE_SECONDS="2",
        GPUDASH_WATCH_TIMEOUT="5",
        GPUDASH_BACKOFF_MAX="0.5",
        GPUDASH_USAGE_FOLD_SECONDS="0.2",
    )
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen(
        celery_worker_command(),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        ensure_watchers.delay()  # what beat sends every 15 s
        wait_for(
            lambda: f":{worker.pid}:" in state(cluster, "ResourceClaim").lease_holder,
            timeout=90,
            message=f"the worker to take the lease; log: {(tmp_path / 'worker.log').read_text()[-2000:]}",
        )
        assert_mirror_equals_server(cluster, devcluster, ["Node", "ResourceClaim"], timeout=60)
        devcluster.store.create("resourceclaims", make_claim("ns", "c2"))
        devcluster.store.delete("nodes", None, "n1")
        assert_mirror_equals_server(cluster, devcluster, ["Node", "ResourceClaim"])
        ensure_watchers.delay()  # a second beat changes nothing: still one holder
        assert f":{worker.pid}:" in state(cluster, "ResourceClaim").lease_holder
        # The allocation ledger: the watcher queues the claim's allocation, and the fold it asks for
        # runs as a task of the same worker.
        claim = devcluster.store.get("resourceclaims", "ns", "c2")
        claim["status"] = {"allocation": allocation("n1")}
        allocated = timezone.now()
        devcluster.store.update("resourceclaims", claim, subresource="status")
        interval = wait_for(
            lambda: AllocationInterval.objects.filter(cluster=cluster, claim_name="c2").first(),
            timeout=30,
            message="the worker to fold the allocation into the ledger",
        )
        assert allocated <= interval.started_at <= timezone.now() and interval.start_exact
        assert (interval.device, interval.ended_at) == ("gpu-0", None)
        assert not LedgerEvent.objects.filter(cluster=cluster).exists()
    finally:
        stop_process(worker, grace=20)
        log.close()
