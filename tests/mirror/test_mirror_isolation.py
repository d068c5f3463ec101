"""One bad mirrored object never stops a feature for the rest of the cluster, and is never dropped
silently: the watcher counts it as malformed with the reason (shown by the readiness check "Mirrored
objects"), and a DeviceClass whose selector cannot be evaluated is marked while every other class
is still counted."""

import pytest

from claims.models import ResourceClaim
from inventory import classmatch
from inventory.models import DeviceClass
from mirror.models import SyncState
from mirror.sync.apply import apply_object
from ops.readiness import check_mirror
from tests.api_fixtures import load_fleet
from tests.sync_fixtures import make_claim, state, wait_for

LONG = "x" * 300  # Kubernetes allows 253 characters


def test_a_claim_with_an_over_long_name_is_recorded_as_malformed_with_its_reason(
    cluster, devcluster, fast_sync, run_watcher
):
    devcluster.store.create("resourceclaims", make_claim("ns", LONG))  # seen by the LIST
    devcluster.store.create("resourceclaims", make_claim("ns", "listed"))
    run_watcher(cluster, "ResourceClaim")
    wait_for(lambda: state(cluster, "ResourceClaim").status == SyncState.Status.CONNECTED)
    assert devcluster.wait_for_watches("resourceclaims")
    devcluster.store.create("resourceclaims", make_claim("other", LONG))  # seen by the WATCH
    devcluster.store.create("resourceclaims", make_claim("ns", "watched"))
    wait_for(lambda: ResourceClaim.objects.filter(name="watched").exists(), message="the watch goes on")
    wait_for(lambda: state(cluster, "ResourceClaim").malformed_count == 2, message="both long names counted")
    synced = state(cluster, "ResourceClaim")
    assert "longer than 253 characters" in synced.last_malformed and "other/xxx" in synced.last_malformed
    assert synced.last_malformed_at is not None
    assert set(ResourceClaim.objects.values_list("name", flat=True)) == {"listed", "watched"}
    mirror = check_mirror(cluster)
    assert mirror["status"] == "warn"
    assert "2 malformed ResourceClaim object(s) skipped" in mirror["items"][0]["text"]
    assert "longer than 253 characters" in mirror["items"][0]["text"]


def device_class(name, selectors):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "5"},
        "spec": {"selectors": selectors},
    }


@pytest.mark.django_db
def test_a_class_whose_selector_cannot_be_evaluated_does_not_stop_the_other_counts():
    alpha, _ = load_fleet()
    hundred = ",".join(["1"] * 100)
    bad = {
        "selectors-not-a-list": 5,
        "selector-not-an-object": [5],
        "nested-all": [
            {
                "cel": {
                    "expression": f"[{hundred}].all(x, [{hundred}].all(y, y == 1)) && device.driver == 'gpu.nvidia.com'"
                }
            }
        ],
        "does-not-compile": [{"cel": {"expression": "device.driver =="}}],
    }
    for name, selectors in bad.items():
        apply_object(alpha, "DeviceClass", device_class(name, selectors))
    apply_object(
        alpha,
        "DeviceClass",
        device_class(
            "h100",
            [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}],
        ),
    )
    classmatch.refresh_cluster(alpha.id)
    counts = {c.name: (c.match_count, c.match_error) for c in DeviceClass.objects.filter(cluster=alpha)}
    assert counts["gpu.nvidia.com"] == (10, "") and counts["h100"] == (8, "")
    for name in ("selectors-not-a-list", "selector-not-an-object", "does-not-compile"):
        assert counts[name][0] is None and counts[name][1], (name, counts[name])
    assert "could not be evaluated" in counts["selectors-not-a-list"][1]
    assert "selector error" in counts["does-not-compile"][1]
    # Kubernetes accepts 100 x 100 nested comprehensions: counted, or marked, never fatal.
    assert counts["nested-all"] == (10, "") or (counts["nested-all"][0] is None and counts["nested-all"][1])
    mirror = check_mirror(alpha)
    texts = " ".join(i["text"] for i in mirror["items"])
    assert (
        mirror["status"] == "warn"
        and "DeviceClass selectors-not-a-list:" in texts
        and "DeviceClass does-not-compile:" in texts
    )
    assert "DeviceClass h100" not in texts
