"""The "last seen" page of a device or ResourceSlice that went away: the sync's apply path keeps a
tombstone where a device key or slice name disappears (inventory/vanished.py), and the detail pages
answer 404 with what was last mirrored, inside the site's layout."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from devcluster.scenario import scenario_objects
from inventory import vanished
from inventory.models import Vanished
from mirror import roles
from mirror.models import Cluster
from mirror.sync.apply import apply_object, delete_object
from monitoring.history import retention_days
from tests.fleet_data import load_scenario, make_user

pytestmark = pytest.mark.django_db
NODE, DRIVER = "gpu-h100-01", "gpu.nvidia.com"


def with_rv(raw, rv, **spec):
    return dict(raw, metadata=dict(raw["metadata"], resourceVersion=str(rv)), spec=dict(raw["spec"], **spec))


@pytest.fixture
def demo():
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    [gpu_slice] = [
        s
        for s in scenario_objects("demo")["resourceslices"]
        if s["spec"]["nodeName"] == NODE and s["spec"]["driver"] == DRIVER
    ]
    return cluster, gpu_slice


def device_url(name, pool=NODE):
    return reverse("inventory:device-detail", args=["demo", DRIVER, pool, name])


def test_a_device_dropped_from_its_slice_gets_a_styled_last_seen_page(client, demo):
    cluster, gpu_slice = demo
    client.force_login(make_user("vera", roles.VIEWER))
    kept = [d for d in gpu_slice["spec"]["devices"] if d["name"] != "gpu-7"]
    apply_object(cluster, "ResourceSlice", with_rv(gpu_slice, 90001, devices=kept))
    # The write rebuilt all eight rows; only the key that is really gone is remembered.
    [record] = Vanished.objects.filter(cluster=cluster, kind=Vanished.DEVICE)
    assert (record.name, record.node_name, record.slice_name) == ("gpu-7", NODE, gpu_slice["metadata"]["name"])
    assert record.held_by_namespace == "ml-training" and record.held_by_name.startswith("llama-pretrain-0-gpus-")

    response = client.get(device_url("gpu-7"))
    assert response.status_code == 404
    html = response.content.decode()
    assert 'id="vanished-title"' in html and "gpu-7" in html
    assert 'href="/devices/"' in html or reverse("inventory:device-list") in html  # the site's navigation
    assert "stylesheet" in html and "NVIDIA H100 80GB HBM3" in html  # layout, and the attributes last seen
    assert reverse("inventory:node-detail", args=["demo", NODE]) in html
    assert reverse("claims:claim-detail", args=["demo", "ml-training", record.held_by_name]) in html
    assert client.get(device_url("gpu-6")).status_code == 200  # still published: the live page


def test_a_deleted_slice_and_its_devices_are_remembered_until_they_return_or_the_prune(client, demo):
    cluster, gpu_slice = demo
    client.force_login(make_user("sam", roles.VIEWER, ["inference"]))
    delete_object(cluster, "ResourceSlice", with_rv(gpu_slice, 90002))
    name = gpu_slice["metadata"]["name"]
    response = client.get(reverse("inventory:slice-detail", args=["demo", name]))
    assert response.status_code == 404
    html = response.content.decode()
    assert 'id="vanished-devices"' in html and device_url("gpu-0") in html and 'id="vanished-note"' in html
    page = client.get(device_url("gpu-0")).content.decode()
    # A viewer scoped to another namespace learns the device was held, not by which claim.
    assert 'id="vanished-title"' in page and "llama-pretrain-0" not in page and "outside your namespaces" in page

    apply_object(cluster, "ResourceSlice", with_rv(gpu_slice, 90003))
    assert client.get(device_url("gpu-0")).status_code == 200
    assert client.get(reverse("inventory:slice-detail", args=["demo", name])).status_code == 200

    assert vanished.prune(retention_days(), now=timezone.now() + timedelta(days=13)) == 0
    assert vanished.prune(retention_days(), now=timezone.now() + timedelta(days=15)) == 9  # eight devices and the slice


def test_a_device_never_mirrored_is_a_plain_not_found(client, demo):
    client.force_login(make_user("vera", roles.VIEWER))
    response = client.get(device_url("gpu-99"))
    assert response.status_code == 404 and b"vanished-title" not in response.content
