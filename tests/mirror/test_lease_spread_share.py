"""The share each sync worker takes (bounded-load rendezvous hashing), and where it is shown: the
sync status page and /metrics. The real worker processes are in test_lease_spread.py."""

import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from mirror import roles
from mirror.models import Cluster, SyncState, SyncWorker
from mirror.sync import workers
from mirror.sync.spread import assign
from tests.fleet_data import make_user

KINDS = ["DeviceClass", "Node", "Pod", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"]


def names(n, seed):
    return [f"host:{1000 + i}:{uuid.UUID(int=seed * 1000 + i).hex[:8]}" for i in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_twelve_clusters_over_three_workers_a_third_each(seed):
    keys = [(c, k) for c in range(1, 13) for k in KINDS]
    three = names(3, seed)
    owners = assign(keys, three)
    assert set(owners) == set(keys)
    assert sorted(Counter(owners.values()).values()) == [24, 24, 24]
    # Each kind spread too: every worker gets 4 of the 12 clusters' ResourceClaims, etc.
    assert set(Counter((w, k) for (_, k), w in owners.items()).values()) == {4}
    # Deterministic: any worker computing it gets the same answer, whatever the input order.
    assert assign(list(reversed(keys)), list(reversed(three))) == owners


@pytest.mark.parametrize("seed", range(5))
def test_join_and_leave_move_little_besides_the_share(seed):
    keys = [(c, k) for c in range(1, 13) for k in KINDS]
    three = names(3, seed)
    before = assign(keys, three)
    after_leave = assign(keys, three[:2])
    assert sorted(Counter(after_leave.values()).values()) == [36, 36]
    # Every key of the leaver moves; of the others' keys only a few reshuffle to keep the shares even.
    survivors_moved = sum(1 for k in keys if before[k] != three[2] and after_leave[k] != before[k])
    assert survivors_moved <= len(keys) // 6
    newcomer = "host:9:newcomer"
    after_join = assign(keys, three + [newcomer])
    assert sorted(Counter(after_join.values()).values()) == [18, 18, 18, 18]
    moved_not_to_newcomer = sum(1 for k in keys if after_join[k] not in (before[k], newcomer))
    assert moved_not_to_newcomer <= len(keys) // 6


def test_uneven_counts_and_scoped_workers():
    keys = [(c, k) for c in range(1, 6) for k in KINDS[:2]]  # 10 keys
    owners = assign(keys, names(3, 7))
    assert sorted(Counter(owners.values()).values()) == [3, 3, 4]
    assert assign(keys, []) == {}
    # A worker that watches only cluster 1 gets nothing else; keys nobody may take stay unassigned.
    only_one = names(1, 8)[0]
    owners = assign(keys, [only_one], eligible=lambda w, key: key[0] == 1)
    assert set(owners) == {(1, "DeviceClass"), (1, "Node")}


@pytest.fixture
def two_workers(db, settings):
    # Long leases: the two stay live however slowly a loaded machine runs the test.
    settings.GPUDASH_SYNC = {**settings.GPUDASH_SYNC, "LEASE_SECONDS": 600.0}
    now = timezone.now()
    live = [SyncWorker.objects.create(name=f"w{i}:1:abc{i}", hostname="h", pid=i, heartbeat=now) for i in range(2)]
    dead = SyncWorker.objects.create(name="gone:9:dead", hostname="h", pid=9, heartbeat=now - timedelta(minutes=15))
    clusters = [Cluster.objects.create(name=f"s{i}", kubeconfig="/nonexistent") for i in range(2)]
    owners = workers.assignment()
    assert {w.name for w in live} == set(owners.values())
    for (cid, kind), owner in owners.items():
        SyncState.objects.create(
            cluster_id=cid,
            kind=kind,
            status=SyncState.Status.CONNECTED,
            lease_holder=f"{owner}:{kind}",
            lease_expires=now + timedelta(seconds=600),
        )
    return live, dead, clusters, owners


def test_status_page_and_metrics_show_who_holds_what(client, two_workers, settings):
    live, dead, clusters, owners = two_workers
    settings.GPUDASH_MONITORING = {**getattr(settings, "GPUDASH_MONITORING", {}), "METRICS_TOKEN": ""}
    client.force_login(make_user("vera", roles.VIEWER))
    # One lease handed over half-way: held by w0 but now assigned to w1.
    key = next(k for k, w in owners.items() if w == live[1].name)
    SyncState.objects.filter(cluster_id=key[0], kind=key[1]).update(lease_holder=f"{live[0].name}:{key[1]}")
    page = client.get("/sync/")
    assert page.status_code == 200
    html = page.content.decode()
    total = len(owners)
    assert f"{total} (cluster, kind), 1 handing over" in html
    for worker in live:
        assert f'data-worker="{worker.name}"' in html
    assert ">dead<" in html and "gone:9:dead" in html

    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").content.decode())}
    assert families["gpudash_sync_workers"].samples[0].value == 2
    held = {s.labels["worker"]: s.value for s in families["gpudash_sync_worker_leases"].samples}
    assigned = {s.labels["worker"]: s.value for s in families["gpudash_sync_worker_assigned"].samples}
    share = Counter(owners.values())
    assert assigned == {w: float(n) for w, n in share.items()}
    assert held == {live[0].name: share[live[0].name] + 1.0, live[1].name: share[live[1].name] - 1.0}
    unsettled = {s.labels["reason"]: s.value for s in families["gpudash_sync_leases_unsettled"].samples}
    assert unsettled == {"handing_over": 1.0, "not_held": 0.0}
