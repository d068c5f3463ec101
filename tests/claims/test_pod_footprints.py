"""Footprints of every pod (claims.PodFootprint): kept by the pod watcher over real HTTP, DRA or not,
and what the preview's node filters count per node."""

import pytest

from claims.models import Pod, PodFootprint
from dra import Inventory
from mirror.models import SyncState
from mirror.sync import apply
from tests.sync_fixtures import make_pod, state, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def busy_pod(namespace, name, node, cpu="500m", memory="1Gi", phase="Running", host_port=None, **kw):
    pod = make_pod(namespace, name, node=node, **kw)
    container = pod["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    pod["status"]["phase"] = phase
    return pod


def footprints(cluster):
    return {
        (f.namespace, f.name): (f.node_name, f.phase, f.raw["requests"])
        for f in PodFootprint.objects.filter(cluster=cluster)
    }


def test_every_pod_leaves_a_footprint_through_list_watch_and_relist(cluster, devcluster, fast_sync, run_watcher):
    store = devcluster.store
    for i in range(9):  # more than one list page (7)
        store.create("pods", busy_pod("web", f"w{i}", node=f"n{i % 3}"))
    store.create("pods", make_pod("ns", "uses-claim", claim="c1", node="n1"))
    w = run_watcher(cluster, "Pod")
    wait_for(lambda: len(footprints(cluster)) == 10, message="footprints of every listed pod")
    assert footprints(cluster)[("web", "w4")] == ("n1", "Running", {"cpu": 500, "memory": 2**30})
    assert set(Pod.objects.filter(cluster=cluster).values_list("name", flat=True)) == {
        "uses-claim"
    }  # full rows stay DRA-only
    wait_for(lambda: state(cluster, "Pod").status == SyncState.Status.CONNECTED, message="pods connected")

    # Watch events: a new pod, a pod that finished, a deleted pod.
    store.create("pods", busy_pod("web", "late", node="n2", cpu="2"))
    done = store.get("pods", "web", "w0")
    done["status"]["phase"] = "Succeeded"
    store.update("pods", done, subresource="status")
    store.delete("pods", "web", "w1")
    wait_for(
        lambda: (
            ("web", "late") in footprints(cluster)
            and ("web", "w1") not in footprints(cluster)
            and footprints(cluster)[("web", "w0")][1] == "Succeeded"
        ),
        message="watch events applied",
    )
    counted = {(f.namespace, f.name) for f in PodFootprint.objects.filter(cluster=cluster).on_nodes()}
    assert ("web", "w0") not in counted and ("web", "late") in counted

    # While nobody watches, a pod goes away; a relist after compaction removes its footprint.
    w.stop()
    store.delete("pods", "web", "w2")
    devcluster.compact()
    run_watcher(cluster, "Pod")
    wait_for(lambda: ("web", "w2") not in footprints(cluster), message="relist reconciled footprints")
    assert len(footprints(cluster)) == 9


def test_replays_never_go_back_and_odd_resources_are_kept_with_why(cluster):
    pod = busy_pod("web", "a", node="n1", cpu="1")
    pod["metadata"].update(uid="u1", resourceVersion="20")
    apply.apply_batch(cluster, "Pod", [(apply.ADDED, pod)])
    old = busy_pod("web", "a", node="n1", cpu="8")
    old["metadata"].update(uid="u1", resourceVersion="10")
    apply.apply_batch(cluster, "Pod", [(apply.MODIFIED, old)])
    assert footprints(cluster)[("web", "a")][2]["cpu"] == 1000
    odd = busy_pod("web", "b", node="n1", cpu="lots")
    odd["metadata"].update(uid="u2", resourceVersion="30")
    apply.apply_batch(cluster, "Pod", [(apply.ADDED, odd)])
    row = PodFootprint.objects.get(cluster=cluster, name="b")
    assert row.raw["requests"] == {} and "'lots' is not a quantity" in row.raw["problem"]
    # The engine reads the rows as they are: per-node usage of the non-terminal bound pods.
    inv = Inventory(
        nodes=[{"metadata": {"name": "n1"}}],
        pod_footprints=list(PodFootprint.objects.filter(cluster=cluster).values_list("raw", flat=True)),
    )
    usage = inv.usage_of("n1")
    assert usage.pods == 2 and usage.requested == {
        "cpu": 1000,
        "memory": 2**30,
    }  # b counts as a pod, its requests unknown


def test_a_footprint_stored_without_the_priority_is_derived_again_from_the_same_version(cluster):
    pod = busy_pod("web", "p", node="n1")
    pod["metadata"].update(uid="u1", resourceVersion="20")
    pod["spec"]["priority"] = 1000
    apply.apply_batch(cluster, "Pod", [(apply.ADDED, pod)])
    assert PodFootprint.objects.get(cluster=cluster, name="p").raw["priority"] == 1000
    # What an older gpudash stored (no priority), then the relist replays the same resourceVersion.
    row = PodFootprint.objects.get(cluster=cluster, name="p")
    row.raw = {k: v for k, v in row.raw.items() if k != "priority"}
    row.save()
    apply.apply_batch(cluster, "Pod", [(apply.MODIFIED, pod)])
    assert PodFootprint.objects.get(cluster=cluster, name="p").raw["priority"] == 1000
    # An older version of the pod still never replaces what is stored.
    older = busy_pod("web", "p", node="n1", cpu="8")
    older["metadata"].update(uid="u1", resourceVersion="10")
    apply.apply_batch(cluster, "Pod", [(apply.MODIFIED, older)])
    assert PodFootprint.objects.get(cluster=cluster, name="p").raw["requests"]["cpu"] == 500
