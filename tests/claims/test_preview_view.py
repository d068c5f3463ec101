"""The preview page with the Django test client and the real engine: summary counts against
run_preview's own answer, grouping by reason, caps and paging, highlighted devices, error positions,
pending claims, permissions; and the REST endpoint's headroom and schema."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from claims.preview import run_preview
from mirror import roles
from mirror.models import Cluster
from ops import preview_page
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.preview_fixtures import BAD_CEL, MALFORMED, TWO_GPUS, load_preview_fleet
from tests.ui_fixtures import make_user

pytestmark = [*PREVIEW_WORKER_MARKS, pytest.mark.sqlite_default]
URL = reverse("claims:preview") + "?cluster=wide"


@pytest.fixture
def wide():
    return load_preview_fleet()


@pytest.fixture
def operator(client, wide):
    client.force_login(make_user("olga", role=roles.OPERATOR))
    return client


def post(client, yaml_text, **extra):
    resp = client.post(URL, {"yaml": yaml_text, "namespace": "team-a", "headroom": "1", **extra})
    assert resp.status_code == 200, resp.content[:500]
    return resp


def test_summary_counts_match_the_engine(operator, wide):
    resp = post(operator, TWO_GPUS)
    engine = run_preview(wide, yaml_text=TWO_GPUS, namespace="team-a")
    report = resp.context["report"]
    assert report.total == engine["summary"]["nodes"] == 18
    assert report.fit_count == engine["summary"]["fits"] == 6
    assert [(r["code"], r["nodes"]) for r in report.reasons] == [
        (r["code"], r["nodes"]) for r in engine["summary"]["reasons"]
    ]
    body = resp.content.decode()
    assert 'data-fits="6" data-nodes="18"' in body
    assert "most common: devices already allocated to other claims" in body
    # Every failing node is in exactly one group, and the groups add up to the failing nodes.
    groups = resp.context["groups"]
    assert {g.key: g.total for g in groups} == {"allocated": 7, "too-few-devices": 3, "no-pool": 2}
    assert [g.key for g in groups] == ["allocated", "too-few-devices", "no-pool"]  # most common first
    assert resp.context["misfit_count"] == 12 == engine["summary"]["nodes"] - engine["summary"]["fits"]
    shown = [n["node"] for g in groups for n in g.rows]
    assert sorted(shown) == sorted(n["node"] for n in engine["nodes"] if not n["fits"])
    assert all(n["node"].startswith("busy-") for n in groups[0].rows)
    # The groups come in the summary's order (ties included), so the two lists read alike.
    assert [g.key for g in groups] == [r["code"] for r in report.reasons]


def test_fitting_nodes_show_the_chosen_devices_highlighted(operator, wide):
    body = post(operator, TWO_GPUS).content.decode()
    row = re.search(r'<tr data-node="fit-03">(.*?)</tr>', body, re.S).group(1)
    chosen = re.findall(r'class="cell s-(\w+)[^"]*pv-chosen"[^>]*data-device="([^"]+)"', row)
    assert chosen == [("free", "gpu-0"), ("free", "gpu-1")]
    assert reverse("inventory:device-detail", args=["wide", "gpu.nvidia.com", "fit-03", "gpu-1"]) in row
    assert "gpu.nvidia.com/fit-03/gpu-0" in row
    # No device of a failing node is drawn as chosen.
    assert body.count("pv-chosen") == 2 * 6 + 1  # two per fitting node + the legend's sample cell


def test_headroom_per_node_pool_and_model(operator, wide):
    resp = post(operator, TWO_GPUS)
    room = resp.context["headroom"]
    assert room["copies"] == 6
    assert room["by_pool"] == [{"name": "h100-free", "copies": 6, "pct": 100}]
    assert [r["name"] for r in room["by_model"]] == ["NVIDIA H100 80GB HBM3"]
    assert 'id="pv-headroom-copies">6<' in resp.content.decode()
    # Unchecked box: not computed at all.
    resp = operator.post(URL, {"yaml": TWO_GPUS, "namespace": "team-a"})
    assert resp.context["headroom"] is None and "headroom" not in resp.context["outcome"]


def test_lists_are_capped_and_paged_without_changing_counts(operator, wide, monkeypatch):
    monkeypatch.setattr(preview_page, "FITS_PER_PAGE", 4)
    monkeypatch.setattr(preview_page, "NODES_PER_GROUP_PAGE", 3)
    resp = post(operator, TWO_GPUS)
    fits = resp.context["fits"]
    assert (fits.total, len(fits.rows), fits.pages) == (6, 4, 2)
    body = resp.content.decode()
    assert body.count('<tr data-node="fit-') == 4
    assert "1–4 of 6" in body
    allocated = resp.context["groups"][0]
    assert (allocated.key, allocated.total, len(allocated.rows), allocated.pages) == ("allocated", 7, 3, 3)
    assert 'data-code="allocated" data-count="7"' in body  # the group header counts every node, not the page

    resp = post(operator, TWO_GPUS, show="fits:2")
    assert [n["node"] for n in resp.context["fits"].rows] == ["fit-04", "fit-05"]
    resp = post(operator, TWO_GPUS, show="allocated:3")
    group = resp.context["groups"][0]
    assert [n["node"] for n in group.rows] == ["busy-06"] and group.open
    assert "7–7 of 7" in resp.content.decode()
    # A page past the end shows the last page; garbage shows page 1.
    assert post(operator, TWO_GPUS, show="allocated:99").context["groups"][0].page == 3
    assert post(operator, TWO_GPUS, show="fits:x").context["fits"].page == 1


def test_invalid_cel_is_shown_once_with_its_position(operator, wide):
    resp = post(operator, BAD_CEL)
    body = resp.content.decode()
    [err] = resp.context["report"].error_groups
    assert err.count == 18
    pos = err.position
    assert (pos.kind, pos.line, pos.column, pos.yaml_line) == ("cel", 1, 51, 14)
    assert pos.expression == "device.attributes['gpu.nvidia.com'].productName ==== 'x'"
    assert pos.source_line[1] == " " * 50 + "^"
    assert body.count('class="pv-error pv-harderror"') == 1
    assert "Hard error on every node (18)" in body
    assert body.count("CEL compile error") == 1  # once: not per node, not again in the scheduler message
    assert 'id="preview-fits"' not in body and 'id="preview-misfits"' not in body
    assert 'data-line="14"' in body


def test_class_cel_error_points_into_the_device_class(operator, wide):
    from mirror.sync.apply import apply_object
    from tests.ui_fixtures import device_class

    apply_object(wide, "DeviceClass", device_class("broken.example.com", "device.driver ==\n  'x' &&& true"))
    text = TWO_GPUS.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: broken.example.com")
    [err] = post(operator, text).context["report"].error_groups
    assert err.position.owner == "class broken.example.com"
    assert err.position.line == 2 and err.position.expression.startswith("device.driver ==")
    assert err.position.source_line[0] == "  'x' &&& true"


def test_malformed_yaml_names_line_and_column(operator, wide):
    resp = post(operator, MALFORMED)
    assert "report" not in resp.context
    assert "malformed YAML at line 4, column 5" in resp.context["error"]
    assert (resp.context["error_position"].line, resp.context["error_position"].column) == (4, 5)
    body = resp.content.decode()
    assert 'id="preview-error"' in body and 'data-line="4" data-column="5"' in body
    assert "name: broken" in body  # the text stays in the box to be fixed
    assert 'id="pending-table"' in body  # the rest of the page still works


def test_empty_input_and_no_cluster(operator, wide):
    assert "Paste a ResourceClaim" in operator.post(URL, {"yaml": "  "}).context["error"]
    # One cluster: "All clusters" previews against it, there is nothing to pick.
    resp = operator.post(reverse("claims:preview") + "?cluster=all", {"yaml": TWO_GPUS})
    assert not resp.context.get("error") and resp.context["report"].summary["nodes"] > 0
    # Two: the user picks one.
    Cluster.objects.create(name="second")
    resp = operator.post(reverse("claims:preview") + "?cluster=all", {"yaml": TWO_GPUS})
    assert "Pick a cluster" in resp.context["error"]


def test_pending_claim_is_picked_from_the_list(operator, wide):
    body = operator.get(URL).content.decode()
    links = re.findall(r'class="pv-pick" href="([^"]+)"', body)
    assert sorted(links) == ["?cluster=wide&claim=team-a/wants-two", "?cluster=wide&claim=team-b/wants-nine"]
    resp = operator.get(URL + "&claim=team-b/wants-nine")
    report = resp.context["report"]
    assert report.fit_count == 0 and report.summary["claims"] == ["team-b/wants-nine"]
    assert {g.key: g.total for g in resp.context["groups"]} == {"too-few-devices": 9, "allocated": 7, "no-pool": 2}
    body = resp.content.decode()
    assert "0/18 nodes are available" in body
    assert "2 devices match class <code>gpu.nvidia.com</code>, 2 free &lt; count 9" in body
    assert "name: wants-nine" in body and "count: 9" in body  # the claim in the box, to tweak and re-run
    # Paging a claim preview is a plain link that keeps the claim.
    assert "claim=team-b%2Fwants-nine" in resp.context["rerun_query"]


def test_claim_detail_links_pending_claims_to_the_preview(operator, wide):
    body = operator.get(reverse("claims:claim-detail", args=["wide", "team-a", "wants-two"])).content.decode()
    assert 'id="claim-preview"' in body and "claim=team-a/wants-two" in body
    body = operator.get(reverse("claims:claim-detail", args=["wide", "team-b", "holder-00"])).content.decode()
    assert 'id="claim-preview"' not in body


def test_already_allocated_claim_is_refused(operator, wide):
    resp = operator.get(URL + "&claim=team-b/holder-00")
    assert "already allocated" in resp.context["error"] and "report" not in resp.context


def test_viewer_sees_an_explanation_and_no_form(client, wide):
    client.force_login(make_user("vera"))
    resp = client.get(URL)
    body = resp.content.decode()
    assert resp.status_code == 200
    assert 'id="preview-needs-operator"' in body and 'id="preview-form"' not in body
    resp = client.get(URL + "&claim=team-a/wants-two")
    assert resp.status_code == 200 and "report" not in resp.context  # nothing ran
    assert client.post(URL, {"yaml": TWO_GPUS}).status_code == 403


def test_scoped_operator(client, wide):
    client.force_login(make_user("sam", role=roles.OPERATOR, namespaces=["team-a"]))
    body = client.get(URL).content.decode()
    assert "wants-two" in body and "wants-nine" not in body
    refused = client.get(URL + "&claim=team-b/wants-nine")
    assert refused.status_code == 403 and refused.context["error"] == "namespace team-b is outside your scope"
    # The YAML names its own namespace: still refused outside the scope.
    assert client.post(URL, {"yaml": TWO_GPUS.replace("team-a", "team-b"), "namespace": "team-a"}).status_code == 403
    assert client.post(URL, {"yaml": TWO_GPUS, "namespace": "team-a"}).status_code == 200


def test_samples_use_the_clusters_classes(operator, wide):
    resp = operator.get(URL)
    samples = {k: text for k, _, text in resp.context["samples"]}
    assert set(samples) == {"claim", "template", "pod"}
    for key, text in samples.items():
        engine = run_preview(wide, yaml_text=text, namespace="team-a")  # every sample runs as is
        assert engine["summary"]["errors"] == 0, key
    assert run_preview(wide, yaml_text=samples["claim"], namespace="team-a")["summary"]["fits"] == 6


# -- REST ---------------------------------------------------------------------------------------------


def test_api_headroom_on_request(wide):
    api = APIClient()
    api.force_authenticate(make_user("ops", role=roles.OPERATOR))
    body = {"cluster": "wide", "namespace": "team-a", "yaml": TWO_GPUS}
    r = api.post("/api/v1/preview", {**body, "headroom": True}, format="json")
    assert r.status_code == 200, r.content
    room = r.json()["result"]["headroom"]
    assert room["copies"] == 6 and room["byNodePool"] == {"h100-free": 6}
    assert "headroom" not in api.post("/api/v1/preview", body, format="json").json()["result"]
    # Per-node entries keep the documented keys (no UI-only `code`).
    assert set(r.json()["result"]["nodes"][0]) == {"node", "fits", "results", "reason", "error", "filters"}
    err = api.post("/api/v1/preview", {**body, "yaml": MALFORMED}, format="json").json()["error"]
    assert err["field"] == "yaml" and "line 4, column 5" in err["message"]
    err = api.post("/api/v1/preview", {**body, "headroom": "maybe"}, format="json").json()["error"]
    assert err["field"] == "headroom"


def test_api_schema_documents_headroom_with_examples(wide):
    api = APIClient()
    api.force_authenticate(make_user("ops", role=roles.OPERATOR))
    import yaml

    schema = yaml.safe_load(api.get("/api/schema/").content)
    op = schema["paths"]["/api/v1/preview"]["post"]
    req = op["requestBody"]["content"]["application/json"]
    props = schema["components"]["schemas"]["PreviewRequest"]["properties"]
    assert "headroom" in props and "per node pool" in props["headroom"]["description"]
    assert any(ex["value"].get("headroom") is True for ex in req["examples"].values())
    ok = op["responses"]["200"]["content"]["application/json"]["examples"]
    assert any("headroom" in ex["value"]["result"] for ex in ok.values())
    bad = op["responses"]["400"]["content"]["application/json"]["examples"]
    assert any(ex["value"]["error"]["field"] == "yaml" for ex in bad.values())


def test_the_page_says_when_a_preview_built_its_inventory_and_not_when_it_reused_it(operator, wide, settings):
    # `wide` is a new cluster: no preview worker holds its inventory yet.
    first = post(operator, TWO_GPUS).content.decode()
    note = re.search(r'<p class="muted" id="preview-inventory-wait" data-obtained="built">(.*?)</p>', first, re.S)
    assert note and "first built the cluster's preview inventory" in note.group(1)
    # Each preview worker builds its own inventory once, then reuses it: the page has nothing to say then.
    for _ in range(settings.GPUDASH_PREVIEW_SERVICE["WORKERS"] + 1):
        again = post(operator, TWO_GPUS)
        if again.context["report"].summary["inventory"]["obtained"] == "current":
            break
    assert again.context["report"].summary["inventory"]["obtained"] == "current"
    assert 'id="preview-inventory-wait"' not in again.content.decode()  # reused: nothing to say


PREEMPTING_POD = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: team-a}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}}
---
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: team-a}
spec:
  priority: 100
  nodeSelector: {kubernetes.io/hostname: fit-00}
  containers: [{name: main, image: x, resources: {requests: {cpu: "10"}, claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"""


def test_a_pod_that_fits_nowhere_says_what_the_scheduler_does_next(operator, wide):
    from mirror.sync.apply import apply_object

    # fit-00's cpu is nearly all taken by a lower-priority batch pod: evicting it makes room.
    apply_object(
        wide,
        "Pod",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batch", "namespace": "team-b", "uid": "u-batch", "resourceVersion": "7"},
            "spec": {
                "nodeName": "fit-00",
                "priority": 0,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "60"}}}],
            },
            "status": {"phase": "Running"},
        },
    )
    resp = post(operator, PREEMPTING_POD)
    report = resp.context["report"]
    assert report.fit_count == 0
    assert report.summary["postFilter"]["preemption"]["candidates"] == [{"node": "fit-00", "lowerPriorityPods": 1}]
    body = resp.content.decode()
    assert "Preemption: evicting lower-priority pods would make room on fit-00" in body
    # The scheduler prints no PostFilter text when preemption succeeds.
    assert (
        report.summary["schedulerMessage"]
        == "0/18 nodes are available: 1 Insufficient cpu, 17 node(s) didn't match Pod's node affinity/selector."
    )


def _garbage_after(make_request):
    """What the cyclic collector would have to free after `make_request()` (a request through Django's
    handler, its response written and closed, then dropped): gc.DEBUG_SAVEALL keeps it to look at."""
    import gc

    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        status = make_request()
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    return status, garbage


def _handle(environ):
    """Django's handler as a server calls it, response closed (the test client's extras, e.g.
    `response.json`, make cycles of their own)."""
    from django.test.client import ClientHandler

    return ClientHandler(enforce_csrf_checks=False)(environ).status_code


def _answers(garbage):
    return [o for o in garbage if type(o) is dict and "nodes" in o and "summary" in o]


def test_a_written_preview_leaves_no_answer_for_the_cyclic_collector(client, wide, monkeypatch):
    """Template contexts and DRF responses keep reference cycles once written; a fleet-wide answer
    inside one waited for a collection of the older generations. Written through Django's handler,
    the page's answer is freed with its response (mirror.acyclic.AcyclicTemplates), the API's at
    once (the worker's JSON passed through; AcyclicResponse for DRF's other renderers)."""
    from django.conf import settings
    from django.test import RequestFactory
    from rest_framework.authtoken.models import Token

    user = make_user("olga", role=roles.OPERATOR)
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    factory = RequestFactory()

    def page():
        environ = factory.post(URL, {"yaml": TWO_GPUS, "namespace": "team-a", "headroom": "1"}).environ
        environ["HTTP_COOKIE"] = f"{settings.SESSION_COOKIE_NAME}={session}"
        return _handle(environ)

    def api():
        environ = factory.post(
            "/api/v1/preview",
            {"cluster": "wide", "namespace": "team-a", "yaml": TWO_GPUS},
            content_type="application/json",
        ).environ
        environ["HTTP_AUTHORIZATION"] = f"Token {Token.objects.get_or_create(user=user)[0].key}"
        return _handle(environ)

    for make_request in (page, api):
        make_request()  # first use: caches, the inventory
        status, garbage = _garbage_after(make_request)
        assert status == 200
        assert _answers(garbage) == [], (
            make_request.__name__
        )  # (Django's own request cycles remain: sessions, messages)

    # The check sees an answer left in a cycle: Django's TemplateResponse and DRF's own Response, as
    # the views used them before.
    import orjson
    from django.template.backends.django import Template

    from claims.api import preview as api_preview
    from mirror.acyclic import AcyclicTemplate

    monkeypatch.setattr(AcyclicTemplate, "render", Template.render)
    # DRF renders the answer it is given, read in the view
    monkeypatch.setattr(api_preview, "AcyclicResponse", lambda encoded: api_preview.Response(orjson.loads(encoded)))
    for make_request in (page, api):
        status, garbage = _garbage_after(make_request)
        assert status == 200 and _answers(garbage), make_request.__name__


def test_api_answer_is_the_same_written_in_the_view_or_by_drf(wide):
    """The preview API passes the worker's JSON through as it is (mirror.acyclic.AcyclicResponse); pretty-printed
    and browsable-API requests are read and go through DRF's renderers: the same answer either way."""
    import json

    api = APIClient()
    api.force_authenticate(make_user("ops", role=roles.OPERATOR))
    body = {"cluster": "wide", "namespace": "team-a", "yaml": TWO_GPUS}
    compact = api.post("/api/v1/preview", body, format="json")
    pretty = api.post("/api/v1/preview", body, format="json", HTTP_ACCEPT="application/json; indent=2")
    page = api.post("/api/v1/preview", body, format="json", HTTP_ACCEPT="text/html")
    assert compact.status_code == pretty.status_code == page.status_code == 200
    assert compact["Content-Type"] == pretty["Content-Type"] == "application/json"
    assert b"\n" not in compact.content and b"\n  " in pretty.content

    def strip(answer):
        return {
            **answer["result"],
            "summary": {k: v for k, v in answer["result"]["summary"].items() if k not in ("seconds", "inventory")},
        }  # noqa: E731

    assert strip(json.loads(compact.content)) == strip(json.loads(pretty.content))
    assert page["Content-Type"].startswith("text/html") and b"two-gpus" in page.content
