"""Every object has a page (issue 11): node, ResourceSlice, device, DeviceClass, claim, template, pod. Each shows YAML
that parses back to the mirrored raw object, kubectl commands, breadcrumbs, mirrored Events, and links both ways."""

import html
import re
from datetime import timedelta

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone

from claims.models import Pod, ResourceClaim, ResourceClaimTemplate
from inventory.models import Device, DeviceClass, Node, ResourceSlice
from mirror.models import KubeEvent
from mirror.sync.apply import apply_object
from tests.fleet_data import meta
from tests.ui_fixtures import load_fleet, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]

YAML_BLOCK = re.compile(r'<pre class="yaml wrap" id="yaml"[^>]*>(.*?)</pre>', re.S)
SLICE_A = "node-a-gpu.nvidia.com-x1"


def now_iso(delta=0):
    return (timezone.now() - timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(name, namespace, kind, obj_name, reason, message, uid="", obj_namespace=None, delta=0):
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta(name, namespace),
        "involvedObject": {
            "kind": kind,
            "name": obj_name,
            "namespace": namespace if obj_namespace is None else obj_namespace,
            "uid": uid,
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 2,
        "lastTimestamp": now_iso(delta),
        "source": {"component": "kubelet"},
    }


def load_objects():
    """The UI fleet, plus a template, a pod with tricky annotations and Events (shared with the browser test)."""
    cluster = load_fleet()
    # A template, and a pod whose raw object holds values a careless YAML dump would not read back alike:
    # strings that look like booleans, numbers, timestamps and null, a very long line, unicode, a multi-line value.
    apply_object(
        cluster,
        "ResourceClaimTemplate",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": meta("gpu-template", "team-a"),
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
            },
        },
    )
    tricky = {
        "yes": "true",
        "number": "1.0",
        "octal": "0755",
        "when": "2026-01-05T10:00:00Z",
        "nothing": "null",
        "tilde": "~",
        "long": "x" * 3000,
        "unicode": "GPU 训练 ✓",
        "multi": "line one\nline two: value\n",
        "colon": "a: b",
        "empty": "",
    }
    apply_object(
        cluster,
        "Pod",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta("tpl-pod", "team-a"), "annotations": tricky},
            "spec": {
                "nodeName": "node-a",
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
                "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
            },
            "status": {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-1"}]},
        },
    )
    for raw in (
        event(
            "train-1-pod.1",
            "team-a",
            "Pod",
            "train-1-pod",
            "FailedPrepareDynamicResources",
            "prepare failed: driver busy",
            uid="uid-team-a-train-1-pod",
        ),
        event(
            "node-a.1",
            "default",
            "Node",
            "node-a",
            "NodeNotReady",
            "Node node-a status is now: NodeNotReady",
            obj_namespace="",
        ),
        event("train-1.1", "team-a", "ResourceClaim", "train-1", "AllocationFailed", "claim allocation retried"),
        event("rs.1", "team-a", "ReplicaSet", "train", "SuccessfulCreate", "not a kind the mirror keeps"),
        event("ghost.1", "team-a", "Pod", "not-mirrored", "Scheduled", "a pod the mirror does not store"),
    ):
        apply_object(cluster, "Event", raw)
    return cluster


@pytest.fixture
def alpha():
    return load_objects()


@pytest.fixture
def viewer(client, alpha):
    client.force_login(make_user("alice"))
    return client


def pages(cluster):
    """(url, the mirrored raw object the page's YAML must equal) for one object of every kind."""
    name = cluster.name
    node = Node.objects.get(cluster=cluster, name="node-a")
    slice_ = ResourceSlice.objects.get(cluster=cluster, name=SLICE_A)
    device = Device.objects.get(cluster=cluster, node_name="node-a", name="gpu-0")
    cls = DeviceClass.objects.get(cluster=cluster, name="gpu.nvidia.com")
    claim = ResourceClaim.objects.get(cluster=cluster, namespace="team-a", name="train-1")
    template = ResourceClaimTemplate.objects.get(cluster=cluster, namespace="team-a", name="gpu-template")
    pod = Pod.objects.get(cluster=cluster, namespace="team-a", name="train-1-pod")
    tricky = Pod.objects.get(cluster=cluster, namespace="team-a", name="tpl-pod")
    return [
        (reverse("inventory:node-detail", args=[name, "node-a"]), node.raw),
        (reverse("inventory:slice-detail", args=[name, SLICE_A]), slice_.raw),
        (reverse("inventory:device-detail", args=[name, device.driver, device.pool, device.name]), device.raw),
        (reverse("inventory:class-detail", args=[name, cls.name]), cls.raw),
        (reverse("claims:claim-detail", args=[name, "team-a", "train-1"]), claim.raw),
        (reverse("claims:template-detail", args=[name, "team-a", "gpu-template"]), template.raw),
        (reverse("claims:pod-detail", args=[name, "team-a", "train-1-pod"]), pod.raw),
        # A Pending pod on no node, a slice with shared counters (MIG), a pending claim: the pages' other branches.
        (
            reverse("claims:pod-detail", args=[name, "team-a", "waiting-pod"]),
            Pod.objects.get(cluster=cluster, name="waiting-pod").raw,
        ),
        (
            reverse("inventory:slice-detail", args=[name, "node-b-gpu.nvidia.com-x1"]),
            ResourceSlice.objects.get(cluster=cluster, name="node-b-gpu.nvidia.com-x1").raw,
        ),
        (
            reverse("claims:claim-detail", args=[name, "team-a", "pending-claim"]),
            ResourceClaim.objects.get(cluster=cluster, name="pending-claim").raw,
        ),
        (
            reverse("claims:pod-detail", args=[name, "team-a", "tpl-pod"]),
            tricky.raw,
        ),  # last: the browser test copies its YAML
    ]


def test_every_object_page_shows_yaml_that_parses_back_to_the_mirrored_raw_object(viewer, alpha):
    for url, raw in pages(alpha):
        response = viewer.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        [block] = YAML_BLOCK.findall(body)
        assert yaml.safe_load(html.unescape(block)) == raw, url
        assert 'data-copy="yaml"' in body, url  # the copy button
        assert 'class="breadcrumbs"' in body and 'aria-current="page"' in body, url
        assert "kubectl" in body and ("-o yaml" in body or "jsonpath" in body), url
    # Kubernetes order at the top (apiVersion, kind, metadata, spec, status), whatever order the row holds.
    body = viewer.get(reverse("claims:claim-detail", args=[alpha.name, "team-a", "train-1"])).content.decode()
    text = html.unescape(YAML_BLOCK.search(body).group(1))
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert keys == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert re.search(r"\n  name: train-1\n  namespace: team-a\n  uid: ", text)
    # The long annotation stays one line (the page wraps it; nothing is folded or clipped).
    body = viewer.get(reverse("claims:pod-detail", args=[alpha.name, "team-a", "tpl-pod"])).content.decode()
    assert "long: " + "x" * 3000 + "\n" in html.unescape(YAML_BLOCK.search(body).group(1))

    # kubectl commands name the cluster's context; breadcrumbs lead back up.
    alpha.context = "prod-admin"
    alpha.save()
    body = html.unescape(
        viewer.get(reverse("claims:claim-detail", args=[alpha.name, "team-a", "train-1"])).content.decode()
    )
    assert "kubectl --context prod-admin get resourceclaims.resource.k8s.io train-1 -n team-a -o yaml" in body
    assert "kubectl --context prod-admin describe resourceclaims.resource.k8s.io train-1 -n team-a" in body
    crumbs = re.search(r'<nav class="breadcrumbs".*?</nav>', body, re.S).group(0)
    assert list(re.findall(r">([^<>]+)</(?:a|span)>", crumbs)) == ["Claims", "team-a", "train-1"]
    assert f'href="/claims/?cluster={alpha.name}&namespace=team-a"' in crumbs
    body = html.unescape(
        viewer.get(
            reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-0"])
        ).content.decode()
    )
    assert (
        f"kubectl --context prod-admin get resourceslices.resource.k8s.io {SLICE_A} -o jsonpath='{{.spec.devices[?(@.name==\"gpu-0\")]}}'"
        in body
    )
    crumbs = re.search(r'<nav class="breadcrumbs".*?</nav>', body, re.S).group(0)
    assert re.findall(r">([^<>]+)</(?:a|span)>", crumbs) == ["Devices", "node-a", SLICE_A, "gpu-0"]


def test_links_both_ways_and_mirrored_events(viewer, alpha):
    c = alpha.name
    pod_url = reverse("claims:pod-detail", args=[c, "team-a", "train-1-pod"])
    claim_url = reverse("claims:claim-detail", args=[c, "team-a", "train-1"])
    device_url = reverse("inventory:device-detail", args=[c, "gpu.nvidia.com", "node-a", "gpu-0"])
    node_url = reverse("inventory:node-detail", args=[c, "node-a"])
    slice_url = reverse("inventory:slice-detail", args=[c, SLICE_A])
    class_url = reverse("inventory:class-detail", args=[c, "gpu.nvidia.com"])
    template_url = reverse("claims:template-detail", args=[c, "team-a", "gpu-template"])

    def links(url):
        response = viewer.get(url)
        assert response.status_code == 200, url
        return set(re.findall(r'href="([^"?#]+)', response.content.decode()))

    # Pod names link to the pod page from the pods list and the node page's pods.
    assert pod_url in links(reverse("claims:pod-list"))
    # device -> claim, pod (the pod holding it), node, slice, the classes whose selectors match it (CEL)
    assert {claim_url, pod_url, node_url, slice_url, class_url} <= links(device_url)
    assert reverse("inventory:class-detail", args=[c, "mig.nvidia.com"]) not in links(device_url)
    # claim -> consumer pod (the pod page, not a search), device, node, class
    assert {pod_url, device_url, node_url, class_url} <= links(claim_url)
    # pod -> claim, device, node; a template pod -> its template
    assert {claim_url, device_url, node_url} <= links(pod_url)
    assert template_url in links(reverse("claims:pod-detail", args=[c, "team-a", "tpl-pod"]))
    # node -> slice, device, pod; slice -> node, device; class -> claim; template -> pod, class
    assert {slice_url, device_url, pod_url} <= links(node_url)
    assert {node_url, device_url, claim_url} <= links(slice_url)
    assert claim_url in links(class_url)
    assert {reverse("claims:pod-detail", args=[c, "team-a", "tpl-pod"]), class_url} <= links(template_url)

    # Only events about what the mirror holds are kept: not the ReplicaSet's, not an unmirrored pod's.
    assert set(KubeEvent.objects.filter(cluster=alpha).values_list("involved_kind", "involved_name")) == {
        ("Pod", "train-1-pod"),
        ("Node", "node-a"),
        ("ResourceClaim", "train-1"),
    }
    for url, reason in (
        (reverse("claims:pod-detail", args=[alpha.name, "team-a", "train-1-pod"]), "FailedPrepareDynamicResources"),
        (reverse("inventory:node-detail", args=[alpha.name, "node-a"]), "NodeNotReady"),
        (reverse("claims:claim-detail", args=[alpha.name, "team-a", "train-1"]), "AllocationFailed"),
    ):
        body = viewer.get(url).content.decode()
        section = re.search(r'<section class="events" id="events">.*?</section>', body, re.S).group(0)
        assert reason in section, url
    body = viewer.get(reverse("claims:pod-detail", args=[alpha.name, "team-a", "tpl-pod"])).content.decode()
    assert "No events mirrored for this object." in body


def test_namespaced_pages_are_scoped(client, alpha):
    client.force_login(make_user("bob", namespaces=["team-b"]))
    for url in (
        reverse("claims:pod-detail", args=[alpha.name, "team-a", "train-1-pod"]),
        reverse("claims:pod-detail", args=[alpha.name, "team-a", "no-such-pod"]),
        reverse("claims:template-detail", args=[alpha.name, "team-a", "gpu-template"]),
    ):
        assert client.get(url).status_code == 404, url
    # The class page lists only the claims of the user's namespaces.
    body = client.get(reverse("inventory:class-detail", args=[alpha.name, "gpu.nvidia.com"])).content.decode()
    assert "team-a/train-1" not in body and "team-b/stuck-claim" in body
    # The device page does not name a pod of another namespace.
    body = client.get(
        reverse("inventory:device-detail", args=[alpha.name, "gpu.nvidia.com", "node-a", "gpu-0"])
    ).content.decode()
    assert "train-1-pod" not in body


@pytest.mark.parametrize(
    "driver, pool, name",
    [
        ("gpu.nvidia.com", "node-a", "gpu-0"),
        ("gpu.nvidia.com", "rack/7/node a", "gpu-0-mig-1g.10gb-3"),
        ("näive.example.com", "pool?#%", "dev;x=1&y@z:w"),
        ("d", "p", ""),  # reverse() refuses an empty part: the maker gives reverse()'s own answer (the error)
    ],
)
def test_device_url_maker_gives_what_reverse_gives(driver, pool, name):
    from django.urls import NoReverseMatch

    from mirror.templatetags.gpudash_ui import device_url_maker

    make = device_url_maker("prod-1")
    try:
        expected = reverse("inventory:device-detail", args=["prod-1", driver, pool, name])
    except NoReverseMatch:
        with pytest.raises(NoReverseMatch):
            make(driver, pool, name)
        return
    assert make(driver, pool, name) == expected
