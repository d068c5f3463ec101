"""The allocation ledger written by the sync (usage/ledger.py), against the built-in API server over
real HTTP: a scripted run of allocations, a partition, a share, admin access, a pod move, releases, a
replayed event, a 410 relist and a watcher killed with SIGKILL yields exactly the expected intervals,
each bound either observed (between the write and the moment the row showed it) or marked inexact at
the edge of a recorded gap."""

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.sync_fixtures import assert_mirror_equals_server, make_pod, state, wait_for
from usage.models import AllocationInterval, LedgerEvent, LedgerGap
from usage.prune import prune

NVIDIA = "gpu.nvidia.com"
EXAMPLE = "gpu.example.com"
A100 = "NVIDIA A100 80GB PCIe"


def _slice(name, node, driver, count, devices=None, counters=None):
    spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}
    if devices is not None:
        spec["devices"] = devices
    if counters is not None:
        spec["sharedCounters"] = counters
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def fleet_slices():
    """node-a: two whole GPUs (example driver); node-m: one partitionable A100 (its counter set in a slice
    of its own, the whole GPU and two 3g.40gb placements); node-s: one GPU shared by consumable capacity."""
    slices_of = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
    counters = {"multiprocessors": {"value": "98"}, **slices_of}

    def mig(start):
        own = {
            "multiprocessors": {"value": "42"},
            **{f"memory-slice-{i}": {"value": "1"} for i in range(start, start + 4)},
        }
        return {
            "name": f"gpu-0-mig-3g40gb-9-{start}",
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": "3g.40gb"},
                "productName": {"string": A100},
            },
            "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": own}],
        }

    whole = {
        "name": "gpu-0",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": A100}},
        "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": counters}],
    }
    shared = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}}}},
    }
    plain = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}, "capacity": {"memory": {"value": "80Gi"}}}
        for i in range(2)
    ]
    return [
        _slice("node-a-gpus", "node-a", EXAMPLE, 1, devices=plain),
        _slice("node-m-counters", "node-m", NVIDIA, 2, counters=[{"name": "gpu-0-counter-set", "counters": counters}]),
        _slice("node-m-devices", "node-m", NVIDIA, 2, devices=[whole, mig(0), mig(4)]),
        _slice("node-s-gpus", "node-s", NVIDIA, 1, devices=[shared]),
    ]


def claim(name, request="gpu", admin=False):
    exactly = {"deviceClassName": "gpu"}
    if admin:
        exactly["adminAccess"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ml", "name": name},
        "spec": {"devices": {"requests": [{"name": request, "exactly": exactly}]}},
    }


def result(node, device, driver, **extra):
    return {"request": "gpu", "driver": driver, "pool": node, "device": device, **extra}


class Script:
    """Drives the API server and checks each step's ledger row against the write's time window."""

    def __init__(self, cluster, server):
        self.cluster, self.server, self.store = cluster, server, server.store

    def status(self, name, results=None, pods=(), node=""):
        obj = self.store.get("resourceclaims", "ml", name)
        status = {}
        if results:
            status["allocation"] = {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            }
        if pods:
            status["reservedFor"] = [
                {"resource": "pods", "name": p, "uid": self.store.get("pods", "ml", p)["metadata"]["uid"]} for p in pods
            ]
        obj["status"] = status
        return self.store.update("resourceclaims", obj, subresource="status")

    def step(self, write, settled):
        """(before, after): the time window of a write; `settled` says when the ledger shows it."""
        before = timezone.now()
        write()
        wait_for(lambda: settled(rows(self.cluster)), message="the ledger to show the step")
        return before, timezone.now()


def rows(cluster):
    return list(AllocationInterval.objects.filter(cluster=cluster).order_by("started_at", "claim_name", "id"))


def row_of(cluster, claim_name, **filters):
    return AllocationInterval.objects.filter(cluster=cluster, claim_name=claim_name, **filters).order_by("started_at")


def queued(cluster):
    return LedgerEvent.objects.filter(cluster=cluster).count()


def within(at, window):
    return window[0] <= at <= window[1]


@pytest.fixture(autouse=True)
def fold_in_this_process(settings):
    """The sync queues claim events and a debounced job folds them into intervals (usage/ledger.py).
    Here that job runs as a timer thread of this process (the embedded default's path), after a short
    window; the Celery path is tested in tests/mirror/test_sync_celery.py and below."""
    settings.REDIS_URL = ""
    settings.USAGE_FOLD_SECONDS = 0.05


@pytest.fixture
def fleet(cluster, devcluster):
    for obj in fleet_slices():
        devcluster.store.create("resourceslices", obj)
    for pod in ("p1", "p2", "p3"):
        devcluster.store.create(
            "pods",
            make_pod("ml", pod, claim="c-whole", labels={"team": "vision", "app": "train", "tier": "x"}, node="node-a"),
        )
    return Script(cluster, devcluster)


@pytest.mark.sqlite_default
def test_ledger_follows_allocations_shares_partitions_moves_releases_and_a_410_relist(fleet, fast_sync, run_watcher):
    cluster, server, store = fleet.cluster, fleet.server, fleet.store
    for kind in ("ResourceSlice", "Pod"):
        run_watcher(cluster, kind)
    assert_mirror_equals_server(cluster, server, ["ResourceSlice", "Pod"])
    for name in ("c-whole", "c-mig", "c-share", "c-admin", "c-late"):
        store.create("resourceclaims", claim(name, admin=name == "c-admin"))
    watcher = run_watcher(cluster, "ResourceClaim")
    assert_mirror_equals_server(cluster, server, ["ResourceClaim"])
    assert server.wait_for_watches("resourceclaims")
    # The first list found nothing allocated: no interval, no gap (nothing was watched before).
    assert rows(cluster) == [] and not LedgerGap.objects.exists()

    # Allocations: a whole GPU with a consumer, a 3g.40gb partition, a share, admin access.
    w_whole = fleet.step(
        lambda: fleet.status("c-whole", [result("node-a", "gpu-0", EXAMPLE)], pods=["p1"], node="node-a"),
        lambda r: len(r) == 1,
    )
    w_mig = fleet.step(
        lambda: fleet.status("c-mig", [result("node-m", "gpu-0-mig-3g40gb-9-4", NVIDIA)], node="node-m"),
        lambda r: len(r) == 2,
    )
    share = result("node-s", "gpu-0", NVIDIA, shareID="7e0f1c2a-0000-4000-8000-000000000001")
    share["consumedCapacity"] = {"memory": "20Gi"}
    w_share = fleet.step(lambda: fleet.status("c-share", [share], node="node-s"), lambda r: len(r) == 3)
    w_admin = fleet.step(
        lambda: fleet.status("c-admin", [result("node-a", "gpu-0", EXAMPLE, adminAccess=True)], node="node-a"),
        lambda r: len(r) == 4,
    )
    whole = row_of(cluster, "c-whole").get()
    assert within(whole.started_at, w_whole) and whole.start_exact and whole.ended_at is None
    assert (whole.units, whole.unit_rule, whole.unit_note, whole.device_kind) == (1.0, "whole", "whole device", "other")
    assert (whole.node, whole.model, whole.pod_namespace, whole.pod_name) == ("node-a", "H100", "ml", "p1")
    assert whole.labels == {"team": "vision", "app": "train"} and whole.consumers == ["p1"]
    mig = row_of(cluster, "c-mig").get()
    assert within(mig.started_at, w_mig)
    assert (mig.units, mig.unit_rule, mig.unit_note, mig.device_kind) == (
        0.5,
        "partition",
        "3g.40gb: 4 of 8 memory slices",
        "partition",
    )
    assert (mig.model, mig.node, mig.pod_name) == (A100, "node-m", "")
    shared = row_of(cluster, "c-share").get()
    assert within(shared.started_at, w_share) and shared.share_id == share["shareID"]
    assert (shared.units, shared.unit_rule, shared.unit_note) == (0.25, "capacity", "memory: 20Gi of 80Gi")
    assert shared.consumed_capacity == {"memory": "20Gi"}
    admin = row_of(cluster, "c-admin").get()
    assert within(admin.started_at, w_admin) and admin.admin_access
    assert (admin.units, admin.unit_rule) == (0.0, "admin")

    # The pod moves: p1's interval ends where p2's begins, at the observed event.
    w_move = fleet.step(
        lambda: fleet.status("c-whole", [result("node-a", "gpu-0", EXAMPLE)], pods=["p2"], node="node-a"),
        lambda r: len(r) == 5,
    )
    first, second = row_of(cluster, "c-whole")
    assert first.ended_at == second.started_at and within(second.started_at, w_move)
    assert first.end_exact and second.start_exact and second.ended_at is None
    assert (first.pod_name, second.pod_name, second.labels) == ("p1", "p2", {"team": "vision", "app": "train"})
    # A second consumer joins: the consumer set changed, so again a new interval naming both.
    w_join = fleet.step(
        lambda: fleet.status("c-whole", [result("node-a", "gpu-0", EXAMPLE)], pods=["p2", "p3"], node="node-a"),
        lambda r: len(r) == 6,
    )
    third = row_of(cluster, "c-whole").last()
    assert within(third.started_at, w_join) and third.consumers == ["p2", "p3"] and third.pod_name == "p2"

    # Releases: a deallocation and a deleted claim end their intervals at the observed event.
    w_release = fleet.step(
        lambda: fleet.status("c-mig"), lambda r: any(x.claim_name == "c-mig" and x.ended_at for x in r)
    )
    w_delete = fleet.step(
        lambda: store.delete("resourceclaims", "ml", "c-share"),
        lambda r: any(x.claim_name == "c-share" and x.ended_at for x in r),
    )
    mig, shared = row_of(cluster, "c-mig").get(), row_of(cluster, "c-share").get()
    assert within(mig.ended_at, w_release) and mig.end_exact
    assert within(shared.ended_at, w_delete) and shared.end_exact

    # A replayed old event and a duplicate change nothing.
    before = [(r.pk, r.ended_at) for r in rows(cluster)]
    old = json.loads(json.dumps(store.get("resourceclaims", "ml", "c-whole")))
    old["metadata"]["resourceVersion"] = "1"
    server.inject_watch_line("resourceclaims", json.dumps({"type": "MODIFIED", "object": old}))
    server.inject_watch_line(
        "resourceclaims", json.dumps({"type": "MODIFIED", "object": store.get("resourceclaims", "ml", "c-whole")})
    )
    store.create("resourceclaims", claim("c-marker"))  # proves the injected lines were consumed
    assert_mirror_equals_server(cluster, server, ["ResourceClaim"])
    assert [(r.pk, r.ended_at) for r in rows(cluster)] == before

    # The watcher stops; meanwhile admin access ends and a late claim is allocated; history is compacted.
    watcher.stop()
    last_seen = timezone.now()
    fleet.status("c-admin")
    fleet.status("c-late", [result("node-a", "gpu-1", EXAMPLE)], pods=["p3"], node="node-a")
    server.compact()
    relists = state(cluster, "ResourceClaim").relist_count
    started = timezone.now()
    run_watcher(cluster, "ResourceClaim")
    wait_for(lambda: state(cluster, "ResourceClaim").relist_count == relists + 1, message="the 410 relist")
    wait_for(lambda: row_of(cluster, "c-late").exists(), message="the late allocation")
    gap = LedgerGap.objects.get(cluster=cluster)
    assert gap.started_at <= last_seen and gap.started_at >= w_delete[0] and gap.reason == "relist"
    assert started <= gap.ended_at <= timezone.now()
    admin, late = row_of(cluster, "c-admin").get(), row_of(cluster, "c-late").get()
    assert (admin.ended_at, admin.end_exact) == (gap.ended_at, False)
    assert (late.started_at, late.start_exact, late.ended_at) == (gap.ended_at, False, None)
    # Exactly these intervals: nothing invented, nothing doubled.
    assert [(r.claim_name, r.pod_name, r.ended_at is None) for r in rows(cluster)] == [
        ("c-whole", "p1", False),
        ("c-mig", "", False),
        ("c-share", "", False),
        ("c-admin", "", False),
        ("c-whole", "p2", False),
        ("c-whole", "p2", True),
        ("c-late", "p3", True),
    ]


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="a second process needs a shared server database",
)
def test_watcher_killed_leaves_a_gap_and_inexact_bounds(fleet, fast_sync, run_watcher, tmp_path):
    from tests.browser import ROOT, subprocess_env

    cluster, server, store = fleet.cluster, fleet.server, fleet.store
    for name in ("c-whole", "c-mig", "c-new"):
        store.create("resourceclaims", claim(name))
    env = dict(
        subprocess_env(),
        GPUDASH_LEASE_SECONDS="2",
        GPUDASH_WATCH_TIMEOUT="5",
        GPUDASH_BACKOFF_MAX="0.5",
        GPUDASH_USAGE_FOLD_SECONDS="0.05",
    )
    env.pop("REDIS_URL", None)  # its folds in its own process, as in the embedded default
    log = open(tmp_path / "watch.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "watch", "--cluster", "dev"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: f":{proc.pid}:" in state(cluster, "ResourceClaim").lease_holder, timeout=60, message="lease")
        assert_mirror_equals_server(cluster, server, ["ResourceSlice", "Pod", "ResourceClaim"], timeout=60)
        assert server.wait_for_watches("resourceclaims")
        w_whole = fleet.step(
            lambda: fleet.status("c-whole", [result("node-a", "gpu-0", EXAMPLE)], pods=["p1"], node="node-a"),
            lambda r: len(r) == 1,
        )
        fleet.step(
            lambda: fleet.status("c-mig", [result("node-m", "gpu-0-mig-3g40gb-9-0", NVIDIA)], node="node-m"),
            lambda r: len(r) == 2,
        )
        assert within(row_of(cluster, "c-whole").get().started_at, w_whole)
        killed_at = timezone.now()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # While nobody watches: a release, a new allocation, a pod move.
        fleet.status("c-mig")
        fleet.status("c-new", [result("node-a", "gpu-1", EXAMPLE)], pods=["p3"], node="node-a")
        fleet.status("c-whole", [result("node-a", "gpu-0", EXAMPLE)], pods=["p2"], node="node-a")
        resumed_after = timezone.now()
        successor = run_watcher(cluster, "ResourceClaim", holder="successor")
        assert_mirror_equals_server(cluster, server, ["ResourceClaim"])
        wait_for(lambda: successor.watcher.stats.events == 3, message="the successor to replay the three changes")
        assert successor.watcher.stats.listed == 0  # it resumed from the stored version, no relist
        wait_for(lambda: not queued(cluster), message="the replayed events to be folded")
        gap = LedgerGap.objects.get(cluster=cluster)
        # The gap runs from the dead watcher's last renewal (before the kill) to the resume.
        assert w_whole[0] <= gap.started_at <= killed_at <= resumed_after <= gap.ended_at <= timezone.now()
        assert gap.reason == "resume"
        mig = row_of(cluster, "c-mig").get()
        assert (mig.ended_at, mig.end_exact) == (gap.ended_at, False)
        new = row_of(cluster, "c-new").get()
        assert (new.started_at, new.start_exact, new.pod_name) == (gap.ended_at, False, "p3")
        p1, p2 = row_of(cluster, "c-whole")
        assert (p1.pod_name, p1.ended_at, p1.end_exact) == ("p1", gap.ended_at, False)
        assert (p2.pod_name, p2.started_at, p2.start_exact, p2.ended_at) == ("p2", gap.ended_at, False, None)
        # After the replay the stream is live again: the next release is observed exactly.
        w_end = fleet.step(
            lambda: fleet.status("c-new"), lambda r: any(x.claim_name == "c-new" and x.ended_at for x in r)
        )
        new.refresh_from_db()
        assert within(new.ended_at, w_end) and new.end_exact
        assert AllocationInterval.objects.filter(cluster=cluster).count() == 4
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def test_prune_removes_intervals_ended_before_the_retention_in_batches(cluster, settings):
    settings.USAGE_RETENTION_DAYS = 30
    now = timezone.now()
    common = dict(cluster=cluster, namespace="ml", claim_name="c", request="gpu", driver="d", pool="p")
    old = [
        AllocationInterval(
            claim_uid=f"old-{i}",
            device=f"gpu-{i}",
            started_at=now - timedelta(days=40),
            ended_at=now - timedelta(days=31),
            **common,
        )
        for i in range(7)
    ]
    kept = [
        AllocationInterval(
            claim_uid="recent",
            device="gpu-0",
            started_at=now - timedelta(days=40),
            ended_at=now - timedelta(days=29),
            **common,
        ),
        AllocationInterval(claim_uid="open", device="gpu-1", started_at=now - timedelta(days=400), **common),
    ]
    AllocationInterval.objects.bulk_create(old + kept)
    LedgerGap.objects.create(cluster=cluster, started_at=now - timedelta(days=35), ended_at=now - timedelta(days=34))
    assert prune(batch=3) == (7, 1)
    assert set(AllocationInterval.objects.values_list("claim_uid", flat=True)) == {"recent", "open"}
    assert prune(batch=3) == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_the_embedded_mode_prunes_the_ledger_on_the_one_periodic_thread(settings):
    """Without Redis the prune is a job of monitoring/periodic.py's thread (registered by usage's
    AppConfig), not a thread of its own."""
    import threading

    from mirror.models import Cluster
    from monitoring import periodic

    settings.USAGE_RETENTION_DAYS = 30
    assert [name for name, *_ in periodic._jobs()].count("ledger prune") == 1
    now = timezone.now()
    AllocationInterval.objects.create(
        cluster=Cluster.objects.create(name="embedded"),
        claim_uid="old",
        namespace="ml",
        claim_name="c",
        request="gpu",
        driver="d",
        pool="p",
        device="gpu-0",
        started_at=now - timedelta(days=40),
        ended_at=now - timedelta(days=31),
    )
    stop = threading.Event()
    thread = threading.Thread(target=periodic.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: not AllocationInterval.objects.exists(), 30)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive() and not AllocationInterval.objects.exists()


def _claim_raw(pods):
    status = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": EXAMPLE, "pool": "n", "device": "gpu-0"}]}}
    }
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in pods]
    return {"metadata": {"namespace": "ml", "name": "c", "uid": "u"}, "status": status}


def test_events_replayed_at_one_moment_leave_no_empty_rows_and_twice_changes_nothing(cluster):
    from usage.ledger import apply_claim_events

    at = timezone.now()
    apply_claim_events(cluster, [("u", None, _claim_raw([]), at - timedelta(hours=1), True)])
    # A resume replays reserve / release / reserve in two batches, all dated at the resume.
    apply_claim_events(cluster, [("u", None, _claim_raw(["p1"]), at, False), ("u", None, _claim_raw([]), at, False)])
    apply_claim_events(cluster, [("u", None, _claim_raw(["p2"]), at, False)])
    apply_claim_events(cluster, [("u", None, _claim_raw(["p2"]), at, False)])  # a duplicate
    got = [
        (r.started_at, r.ended_at, r.start_exact, r.end_exact, r.consumers)
        for r in AllocationInterval.objects.filter(cluster=cluster).order_by("started_at")
    ]
    assert got == [(at - timedelta(hours=1), at, True, False, []), (at, None, False, True, ["p2"])]


def test_a_relist_opens_allocations_the_ledger_never_saw_and_closes_vanished_ones(cluster):
    """The ledger switched on over a mirror that already holds allocated claims (list items unchanged
    since stored never reach it): the relist opens them, inexact; a claim gone from the mirror closes."""
    from mirror.sync.apply import apply_object
    from mirror.sync.hooks import hooks
    from usage.ledger import apply_claim_events, on_relist

    raw = _claim_raw(["p1"])
    raw.update(apiVersion="resource.k8s.io/v1", kind="ResourceClaim", spec={"devices": {"requests": []}})
    raw["metadata"].update(resourceVersion="5")
    kinds = hooks.ledger_kinds
    hooks.ledger_kinds = frozenset()  # stored while the ledger was off
    try:
        apply_object(cluster, "ResourceClaim", raw)
    finally:
        hooks.ledger_kinds = kinds
    earlier = timezone.now() - timedelta(hours=2)
    apply_claim_events(cluster, [("gone-uid", None, _claim_raw([]), earlier, True)])
    at = timezone.now()
    on_relist(cluster, at, None)
    got = {
        (r.claim_uid, r.started_at, r.start_exact, r.ended_at, r.end_exact, r.pod_name)
        for r in AllocationInterval.objects.filter(cluster=cluster)
    }
    assert got == {("u", at, False, None, True, "p1"), ("gone-uid", earlier, True, at, False, "")}
    assert not LedgerGap.objects.exists()  # nothing was observed before: no gap to state


def _intervals(cluster):
    return [
        (r.claim_uid, r.started_at, r.ended_at, r.start_exact, r.end_exact, r.consumers)
        for r in AllocationInterval.objects.filter(cluster=cluster).order_by("started_at", "claim_uid")
    ]


@pytest.mark.sqlite_default
def test_queued_claim_events_fold_into_the_same_intervals_whatever_the_chunk(cluster):
    """The sync only queues events (no interval yet, no spec in the queue); a fold writes the intervals
    once and empties the queue, in one transaction or in many."""
    from mirror.models import Cluster
    from usage.ledger import fold, queue_events

    other = Cluster.objects.create(name="other")
    t0 = timezone.now() - timedelta(hours=3)
    raw = _claim_raw([])
    raw["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
    events = [
        ("u", None, raw, t0, True),
        ("u", None, _claim_raw(["p1"]), t0 + timedelta(hours=1), True),
        ("v", None, _claim_raw(["p9"]), t0 + timedelta(hours=1), False),
        ("u", None, _claim_raw(["p2"]), t0 + timedelta(hours=2), True),
        ("u", None, None, t0 + timedelta(minutes=150), True),
    ]
    for target in (cluster, other):
        queue_events(target, events[:2])
        queue_events(target, events[2:])
    assert queued(cluster) == 5 and not AllocationInterval.objects.exists()
    first = json.loads(LedgerEvent.objects.filter(cluster=cluster).order_by("id").first().claim)
    assert "spec" not in first and first["metadata"] == {"namespace": "ml", "name": "c"}
    assert LedgerEvent.objects.filter(cluster=cluster).order_by("id").last().claim == ""  # the delete

    assert fold(cluster, limit=2) == 5  # three transactions
    assert fold(other) == 5  # one
    assert queued(cluster) == queued(other) == 0
    expected = [
        ("u", t0, t0 + timedelta(hours=1), True, True, []),
        ("u", t0 + timedelta(hours=1), t0 + timedelta(hours=2), True, True, ["p1"]),
        ("v", t0 + timedelta(hours=1), None, False, True, ["p9"]),
        ("u", t0 + timedelta(hours=2), t0 + timedelta(minutes=150), True, True, ["p2"]),
    ]
    assert _intervals(cluster) == _intervals(other) == expected
    assert fold(cluster) == 0 and _intervals(cluster) == expected


def test_a_fold_that_fails_leaves_its_events_queued_for_the_next(cluster, monkeypatch):
    """The interval write and the queue's delete share one transaction: a fold the database fails
    (simulated here by the write raising) folds nothing and loses nothing."""
    from django.db import OperationalError

    from usage import ledger

    at = timezone.now() - timedelta(hours=1)
    ledger.queue_events(cluster, [("u", None, _claim_raw(["p1"]), at, True)])
    real_write = ledger._write

    def failing_write(*args):
        real_write(*args)
        raise OperationalError("connection lost mid-fold")

    monkeypatch.setattr(ledger, "_write", failing_write)
    with pytest.raises(OperationalError):
        ledger.fold(cluster)
    assert queued(cluster) == 1 and not AllocationInterval.objects.exists()
    monkeypatch.setattr(ledger, "_write", real_write)
    assert ledger.fold_all() == {cluster.pk: 1}
    assert _intervals(cluster) == [("u", at, None, True, True, ["p1"])]


@pytest.mark.sqlite_default
def test_an_event_committed_during_a_fold_stays_queued(cluster, monkeypatch):
    """Ids are taken when a row is written, not when it commits: a release applied by gpudash itself
    (outside the watcher's batches) can commit a lower id than events a running fold has read. Here
    the late event is queued from inside the fold's transaction (what the fold's delete would see of a
    commit made between its read and its delete); it must be left for the next fold, not deleted."""
    from usage import ledger

    t0 = timezone.now() - timedelta(hours=2)
    ledger.queue_events(cluster, [("u", None, _claim_raw(["p1"]), t0, True)])
    real_apply = ledger.apply_claim_events
    late = ("v", None, _claim_raw(["p9"]), t0 + timedelta(hours=1), True)

    def apply_while_another_commits(target, ops):
        real_apply(target, ops)
        if not LedgerEvent.objects.filter(claim_uid="v").exists():
            ledger.queue_events(target, [late])
            below = min(op[0] for op in LedgerEvent.objects.values_list("id")) - 1  # under every id the fold read
            LedgerEvent.objects.filter(claim_uid="v").update(id=below)

    monkeypatch.setattr(ledger, "apply_claim_events", apply_while_another_commits)
    assert ledger.fold(cluster) == 1
    assert list(LedgerEvent.objects.filter(cluster=cluster).values_list("claim_uid", flat=True)) == ["v"]
    monkeypatch.setattr(ledger, "apply_claim_events", real_apply)
    assert ledger.fold(cluster) == 1 and queued(cluster) == 0
    assert _intervals(cluster) == [
        ("u", t0, None, True, True, ["p1"]),
        ("v", t0 + timedelta(hours=1), None, True, True, ["p9"]),
    ]


@pytest.mark.sqlite_default
def test_a_relist_folds_the_queue_before_it_reconciles(cluster):
    """A release still queued when a relist comes ends its interval at the observed event, not at the
    relist (which would make it inexact and longer)."""
    from usage.ledger import fold, on_relist, queue_events

    t0 = timezone.now() - timedelta(hours=2)
    queue_events(cluster, [("gone", None, _claim_raw(["p1"]), t0, True)])
    fold(cluster)
    released = t0 + timedelta(hours=1)
    queue_events(cluster, [("gone", None, None, released, True)])  # queued, not folded yet
    on_relist(cluster, timezone.now(), None)
    assert queued(cluster) == 0
    assert _intervals(cluster) == [("gone", t0, released, True, True, ["p1"])]


def test_the_queue_view_keeps_what_the_ledger_reads():
    from usage.ledger import facts_of, ledger_view

    raw = _claim_raw(["p1", "p2"])
    raw["metadata"].update(labels={"team": "vision"}, managedFields=[{"manager": "kube-scheduler"}])
    raw["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": []}]}
    raw["status"]["devices"] = [{"driver": EXAMPLE, "pool": "n", "device": "gpu-0", "data": {"big": "x" * 1000}}]
    view = ledger_view(raw)
    assert facts_of(view) == facts_of(raw)
    assert view["metadata"] == {"namespace": "ml", "name": "c", "labels": {"team": "vision"}}
    assert set(view["status"]) == {"allocation", "reservedFor"}
    assert view["status"]["allocation"]["nodeSelector"] == raw["status"]["allocation"]["nodeSelector"]
    # Malformed parts give an empty view, not an error: the sync stores the claim whatever the ledger.
    assert ledger_view({"metadata": [], "status": {"allocation": "x", "reservedFor": {}}}) == {
        "metadata": {"namespace": "", "name": ""},
        "status": {},
    }
