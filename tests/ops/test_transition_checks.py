"""Transition checks on the readiness page (issue 14): they fire on exactly the nodes of the "mixed"
scenario built to trigger them, computed here from the objects, and each says what to do."""

import pytest
from django.urls import reverse

from devcluster.scenario import scenario_objects
from mirror.models import Cluster
from ops import readiness
from tests.fleet_data import load_scenario, make_user

pytestmark = pytest.mark.django_db


def offered(node, resource):
    return int(node["status"]["allocatable"].get(resource, "0")) > 0


def test_transition_findings_fire_on_exactly_the_built_nodes(client):
    cluster = load_scenario(Cluster.objects.create(name="mixed"), "mixed")
    objects = scenario_objects("mixed")
    nodes = {n["metadata"]["name"]: n for n in objects["nodes"]}
    dra_nodes = {s["spec"]["nodeName"] for s in objects["resourceslices"] if s["spec"].get("devices")}
    ext = {
        c["spec"]["extendedResourceName"]: c["metadata"]["name"]
        for c in objects["deviceclasses"]
        if c["spec"].get("extendedResourceName")
    }
    advertising = {
        n
        for n, raw in nodes.items()
        if any(r.startswith("nvidia.com/") and offered(raw, r) for r in raw["status"]["allocatable"])
    }
    legacy = {
        (p["spec"]["nodeName"], r)
        for p in objects["pods"]
        if p["spec"].get("nodeName") in dra_nodes - advertising and p["status"]["phase"] == "Running"
        for r in (p["spec"]["containers"][0]["resources"].get("limits") or {})
    }

    result = readiness.check_transition(cluster)
    by_finding = {}
    for i in result["items"]:
        by_finding.setdefault(i["data"]["finding"], []).append(i)
    [both] = by_finding["dra_and_device_plugin"]
    assert set(both["data"]["nodes"]) == dra_nodes & advertising == {"both-01"}
    [shadowed] = by_finding["extended_resource_name_shadowed"]
    assert (shadowed["data"]["device_class"], shadowed["data"]["resource"]) == (ext["nvidia.com/gpu"], "nvidia.com/gpu")
    assert (
        set(shadowed["data"]["nodes"])
        == {n for n in advertising if offered(nodes[n], "nvidia.com/gpu")}
        == {"both-01", "dp-only-01", "hami-01"}
    )
    requests = by_finding["device_plugin_request_on_dra_node"]
    assert (
        {(i["data"]["node"], i["data"]["resource"]) for i in requests} == legacy == {("dra-only-01", "nvidia.com/gpu")}
    )
    assert requests[0]["data"]["pods"] == ["ml/legacy-job-0"]
    # each finding says what to do
    assert (
        "label the node" in both["text"]
        and "Remove the device plugin" in shadowed["text"]
        and "ResourceClaim" in requests[0]["text"]
    )
    assert result["status"] == "warn"

    # the readiness page shows them (mirror-only: the cluster has no API server here)
    client.force_login(make_user("admin-t", "admin"))
    page = client.get(reverse("ops:readiness") + f"?cluster={cluster.name}").content.decode()
    assert "DRA beside device plugins and HAMi" in page and "both-01" in page and "ml/legacy-job-0" in page


def test_no_transition_findings_on_a_dra_only_fleet():
    cluster = load_scenario(Cluster.objects.create(name="demo"), "demo")
    result = readiness.check_transition(cluster)
    assert [i["status"] for i in result["items"]] == ["pass"]
