"""A LIST defers device-state work to its end: after a paginated sync the stored state and the
per-node summary equal a full recomputation."""

import pytest

from devcluster.scenario import load_scenario
from inventory import devicestate
from inventory.models import Device, NodeDeviceSummary
from tests.sync_fixtures import cluster, devcluster, fast_sync, run_watcher, state, wait_for  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

STATE_COLUMNS = ("driver", "pool", "name", "allocation_state", "held_by_namespace", "held_by_name", "admin_watched")


def _snapshot(cluster):
    devices = sorted(Device.objects.filter(cluster=cluster).values_list(*STATE_COLUMNS))
    summary = sorted(
        tuple(sorted((k, v) for k, v in row.items() if k != "id"))
        for row in NodeDeviceSummary.objects.filter(cluster=cluster).values()
    )
    return devices, summary


def test_paged_list_leaves_the_same_state_as_a_full_refresh(devcluster, cluster, fast_sync, run_watcher):
    counts = load_scenario(devcluster.store, "demo")
    slices = run_watcher(cluster, "ResourceSlice")
    claims = run_watcher(cluster, "ResourceClaim")
    from claims.models import ResourceClaim

    # CONNECTED is written in the transaction that ends the list (reconcile + the deferred refresh).
    wait_for(
        lambda: all(state(cluster, kind).status == "connected" for kind in ("ResourceSlice", "ResourceClaim")),
        message="lists done",
    )
    assert ResourceClaim.objects.filter(cluster=cluster).count() == counts["resourceclaims"]
    slices.stop()
    claims.stop()
    synced = _snapshot(cluster)
    assert any(row[3] != devicestate.FREE for row in synced[0]), "the demo allocates devices"

    devicestate.refresh_pools(None)
    assert _snapshot(cluster) == synced
