"""Namespace scope, as a matrix: viewer / scoped operator / admin x own namespace / other namespace x
existing / missing object, for the preview API, the preview page and findings (list, detail, API).

A scoped user gets, for anything in another namespace, one answer that does not depend on whether
the object exists (no existence oracle) and that names nothing of it. The websocket's share of the
matrix is tests/mirror/test_scope_websocket.py. Fleet: tests/api_fixtures.py (cluster "alpha"), plus one
pending claim in team-b.
"""

import html
import json
import re
from urllib.parse import quote

import pytest
import yaml
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from claims import stuck
from claims.finding_scope import scoped_summary_and_evidence
from claims.models import Finding
from claims.preview_scope import OutOfScope, check_documents, redact_result
from mirror import roles
from mirror.sync.apply import apply_object
from tests.api_fixtures import claim, client_for, load_fleet
from tests.conftest import PREVIEW_WORKER_MARKS
from tests.fleet_data import make_user
from tests.ops_fixtures import apply, claim_raw, node_raw, pod_raw, slice_raw

pytestmark = PREVIEW_WORKER_MARKS

OWN, OTHER = "team-a", "team-b"
MISSING = "does-not-exist"
# Existing objects of each namespace in the fleet: a pending claim, an allocated one (team-b/stuck is
# bound to node-b), a template.
EXISTING = {
    OWN: {"pending": "pending", "allocated": "train", "template": "tpl"},
    OTHER: {"pending": "queued", "allocated": "stuck", "template": "nic"},
}
USERS = ("viewer", "scoped", "admin")
FORMS = ("claim", "pod-pending-claim", "pod-allocated-claim", "pod-template")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # users are made per test


@pytest.fixture
def alpha(db):
    cluster, _ = load_fleet()
    apply_object(cluster, "ResourceClaim", claim("queued", OTHER))
    return cluster


@pytest.fixture
def users(db):
    return {
        "viewer": make_user("vic", roles.VIEWER, namespaces=[OWN]),
        "scoped": make_user("sco", roles.OPERATOR, namespaces=[OWN]),
        "admin": make_user("ada", roles.ADMIN),
    }


@pytest.fixture
def api(users):
    return {who: client_for(user) for who, user in users.items()}


def pod_yaml(namespace, key, name):
    ref = {"resourceClaimTemplateName": name} if key == "template" else {"resourceClaimName": name}
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {
                "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", **ref}],
            },
        }
    )


def target(form, namespace, exists):
    """(name of the object referenced, request fields). Pod forms keep the request's namespace the
    user's own: only the YAML names the other one (the way around the old request-only check)."""
    key = {
        "claim": "pending",
        "pod-pending-claim": "pending",
        "pod-allocated-claim": "allocated",
        "pod-template": "template",
    }[form]
    name = EXISTING[namespace][key] if exists else MISSING
    if form == "claim":
        return name, {"namespace": namespace, "claim": name}
    return name, {"namespace": OWN, "yaml": pod_yaml(namespace, key, name)}


def expected_status(who, namespace, exists):
    if who == "viewer" or (who == "scoped" and namespace == OTHER):
        return 403
    return 200 if exists else 400


def assert_names_nothing(text, namespace, name):
    for secret in (f"{namespace}/{name}", "node-a", "node-b", "gpu-0"):
        assert secret not in text, (secret, text[:400])


# -- the preview API --------------------------------------------------------------------------------


@pytest.mark.parametrize("who", USERS)
def test_preview_api_matrix(alpha, api, who):
    for form, namespace in ((f, ns) for f in FORMS for ns in (OWN, OTHER)):
        answers = {}
        for exists in (True, False):
            name, fields = target(form, namespace, exists)
            response = api[who].post("/api/v1/preview", {"cluster": "alpha", **fields}, format="json")
            assert response.status_code == expected_status(who, namespace, exists), (
                form,
                namespace,
                exists,
                response.content[:400],
            )
            answers[exists] = (name, response.json())
        status = expected_status(who, namespace, True)
        if status == 403:
            assert answers[True][1] == answers[False][1]  # the same answer whether the object exists
            assert_names_nothing(json.dumps(answers[True][1]), namespace, answers[True][0])
            if who == "scoped":
                assert answers[True][1]["error"] == {
                    "code": "permission_denied",
                    "message": f"namespace {namespace} is outside your scope",
                    "field": None,
                }
        else:
            result = answers[True][1]["result"]
            assert len(result["nodes"]) == 2  # alpha's node-a and node-b were previewed
            assert MISSING in answers[False][1]["error"]["message"]


def test_admin_sees_what_the_scoped_operator_may_not(alpha, api):
    """The leak the matrix closes: a pod naming team-b/stuck shows node-b, where that claim is bound."""
    _, fields = target("pod-allocated-claim", OTHER, True)
    result = api["admin"].post("/api/v1/preview", {"cluster": "alpha", **fields}, format="json").json()["result"]
    assert [n["node"] for n in result["nodes"] if n["fits"]] == ["node-b"]
    _, fields = target("pod-pending-claim", OTHER, True)
    result = api["admin"].post("/api/v1/preview", {"cluster": "alpha", **fields}, format="json").json()["result"]
    assert result["summary"]["claims"] == ["team-b/queued"]


PLAIN = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: plain, namespace: %s}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
"""


def test_plain_claims_and_lists_naming_another_namespace(alpha, api):
    def ask(who, text):
        return api[who].post("/api/v1/preview", {"cluster": "alpha", "namespace": OWN, "yaml": text}, format="json")  # noqa: E731

    assert ask("scoped", PLAIN % OWN).status_code == 200
    for namespace in (OTHER, "no-such-namespace"):
        refused = ask("scoped", PLAIN % namespace)
        assert (
            refused.status_code == 403
            and refused.json()["error"]["message"] == f"namespace {namespace} is outside your scope"
        )
        assert ask("admin", PLAIN % namespace).status_code == 200
    # One document of several, and a kind: List, are enough to refuse the whole paste.
    assert ask("scoped", PLAIN % OWN + "---\n" + PLAIN.replace("plain", "second") % OTHER).status_code == 403
    listed = yaml.safe_dump({"kind": "List", "items": [yaml.safe_load(PLAIN % OTHER)]})
    assert ask("scoped", listed).status_code == 403
    # Without a namespace of its own an object is in the request's namespace.
    no_ns = PLAIN.replace(", namespace: %s", "")
    assert ask("scoped", no_ns).status_code == 200
    other_request = api["scoped"].post(
        "/api/v1/preview", {"cluster": "alpha", "namespace": OTHER, "yaml": no_ns}, format="json"
    )
    assert (
        other_request.status_code == 403 and "team-b is outside your scope" in other_request.json()["error"]["message"]
    )


# -- the preview page -------------------------------------------------------------------------------

PAGE = reverse("claims:preview")
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')
_TEXTAREA = re.compile(r"(<textarea[^>]*>).*?(</textarea>)", re.S)


@pytest.fixture
def pages(users):
    from django.test import Client

    out = {}
    for who, user in users.items():
        c = Client()
        c.force_login(user)
        out[who] = c
    return out


def page_request(client, form, namespace, exists):
    name, fields = target(form, namespace, exists)
    if form == "claim":  # the pending-claim link: a GET
        return name, client.get(PAGE, {"cluster": "alpha", "claim": f"{namespace}/{name}"})
    return name, client.post(PAGE + "?cluster=alpha", {**fields, "headroom": "1"})


def page_text(response, ref):
    """The page as the user sees it, without what they typed (the YAML box, the claim they asked for)
    and the per-response CSRF token."""
    page = _TEXTAREA.sub(r"\1\2", _CSRF.sub("", response.content.decode()))
    # The language switch sends the user back to the URL they asked for, which names the claim too.
    return page.replace(quote(ref, safe=""), "REF").replace(ref, "REF")


@pytest.mark.parametrize("who", USERS)
def test_preview_page_matrix(alpha, pages, who):
    for form, namespace in ((f, ns) for f in FORMS for ns in (OWN, OTHER)):
        answers = {exists: page_request(pages[who], form, namespace, exists) for exists in (True, False)}
        (name, found), (_, missing) = answers[True], answers[False]
        if who == "viewer":
            # A viewer's link shows the page that explains the operator role; a POST is refused.
            assert found.status_code == missing.status_code == (200 if form == "claim" else 403)
            assert "report" not in (found.context or {}) and "report" not in (missing.context or {})
            continue
        if who == "scoped" and namespace == OTHER:
            assert found.status_code == missing.status_code == 403
            assert found.context["error"] == missing.context["error"] == f"namespace {namespace} is outside your scope"
            assert "report" not in found.context and "report" not in missing.context
            assert page_text(found, f"{namespace}/{name}") == page_text(
                missing, f"{namespace}/{MISSING}"
            )  # nothing tells them apart
            assert f"{namespace}/{name}" not in found.content.decode() and "node-b" not in found.content.decode()
            continue
        assert found.status_code == 200 and found.context.get("report") is not None, found.context.get("error")
        assert missing.status_code == 200 and MISSING in missing.context["error"]


def test_preview_page_refuses_bound_claims_of_other_namespaces(alpha, pages):
    """The page's old check read summary.claims, which omits already-allocated claims: a pod naming
    team-b/stuck was previewed and showed node-b."""
    _, fields = target("pod-allocated-claim", OTHER, True)
    refused = pages["scoped"].post(PAGE + "?cluster=alpha", fields)
    assert refused.status_code == 403 and "node-b" not in refused.content.decode()
    shown = pages["admin"].post(PAGE + "?cluster=alpha", fields)
    assert shown.status_code == 200 and [n["node"] for n in shown.context["fits"].rows] == ["node-b"]


def test_holders_of_other_namespaces_are_hidden_everywhere_in_the_answer(alpha, api):
    """node-b's A100 gpu-0 is held by team-b/stuck: the scoped operator's reasons, most common reason
    and examples do not name it; the admin's do."""
    text = (
        PLAIN.replace(
            "exactly: {deviceClassName: gpu.nvidia.com}", "exactly: {deviceClassName: gpu.nvidia.com, count: 2}"
        )
        % OWN
    )
    body = {"cluster": "alpha", "namespace": OWN, "yaml": text}
    full = json.dumps(api["admin"].post("/api/v1/preview", body, format="json").json())
    scoped = json.dumps(api["scoped"].post("/api/v1/preview", body, format="json").json())
    assert "team-b/stuck" in full
    assert "team-b/" not in scoped and "a claim in another namespace" in scoped


def test_redaction_of_engine_answers():
    visible = {OWN}
    answer = {
        "summary": {
            "mostCommonReason": {"example": "7 are already allocated to other claims (e.g. team-b/x y)"},
            "problems": [
                "ResourceClaim team-b/broken: bad allocation: no such pool",
                "ResourceClaim team-a/mine: bad allocation: z",
                "ResourceSlice s1: bad",
            ],
        },
        "nodes": [{"reason": "1 is already allocated to other claims (e.g. team-a/mine), 0 free"}],
    }
    redact_result(answer, visible)
    assert answer["summary"]["mostCommonReason"]["example"].endswith("(e.g. a claim in another namespace)")
    assert answer["summary"]["problems"] == [
        "ResourceClaim in another namespace: could not be used (details hidden)",
        "ResourceClaim team-a/mine: bad allocation: z",
        "ResourceSlice s1: bad",
    ]
    assert "(e.g. team-a/mine)" in answer["nodes"][0]["reason"]
    with pytest.raises(OutOfScope, match="namespace team-b is outside your scope"):
        check_documents(
            [
                {"kind": "Pod", "metadata": {"namespace": OWN}},
                {"kind": "ResourceClaim", "metadata": {"namespace": OTHER}},
            ],
            OWN,
            visible,
        )
    check_documents(
        [{"kind": "ResourceClaim", "metadata": [1]}], OWN, visible
    )  # a malformed object is the engine's to report


# -- findings ---------------------------------------------------------------------------------------


@pytest.fixture
def findings(db, settings):
    """A detector run over a small cluster: team-a/dup and team-b/dup-b hold the same device (a double
    allocation: each finding names the other claim), and team-a/wants is unallocatable because team-b/hog
    holds node-2's only device (its explanation names the holder)."""
    from mirror.models import Cluster

    settings.GPUDASH_STUCK = {"PENDING_GRACE": 0}
    cluster = Cluster.objects.create(name="scope")
    apply(
        cluster,
        "DeviceClass",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
        },
    )
    for node, devices in (("node-1", ["gpu-0"]), ("node-2", ["gpu-0"])):
        apply(cluster, "Node", node_raw(node))
        apply(cluster, "ResourceSlice", slice_raw(node, devices))
    apply(cluster, "ResourceClaim", claim_raw("dup", OWN, devices=["gpu-0"], node="node-1"))
    apply(cluster, "ResourceClaim", claim_raw("dup-b", OTHER, devices=["gpu-0"], node="node-1"))
    apply(cluster, "ResourceClaim", claim_raw("hog", OTHER, devices=["gpu-0"], node="node-2"))
    apply(cluster, "ResourceClaim", claim_raw("wants", OWN))
    apply(cluster, "Pod", pod_raw("waiter", OWN, claim="wants", phase="Pending", node=""))
    stuck.detect(cluster)
    return cluster


def _own_findings(cluster):
    double = Finding.objects.get(cluster=cluster, rule=stuck.DOUBLE_ALLOCATION, namespace=OWN)
    unallocatable = Finding.objects.get(cluster=cluster, rule=stuck.UNALLOCATABLE, namespace=OWN)
    return double, unallocatable


def test_detector_evidence_names_other_namespaces_in_the_database(findings):
    """The premise: the stored rows name team-b's claims (an admin needs them)."""
    double, unallocatable = _own_findings(findings)
    assert "team-b/dup-b" in double.summary and "team-b/dup-b" in double.evidence["claims"]
    assert "team-b/hog" in json.dumps(unallocatable.evidence["explanation"])


@pytest.mark.parametrize("who", USERS)
def test_findings_api_matrix(findings, api, who):
    client = api[who]
    double, unallocatable = _own_findings(findings)
    other = Finding.objects.get(cluster=findings, rule=stuck.DOUBLE_ALLOCATION, namespace=OTHER)
    listed = client.get("/api/v1/findings", {"cluster": "scope"}).json()["results"]
    assert {f["namespace"] for f in listed} == ({OWN} if who != "admin" else {OWN, OTHER})
    own_text = (
        json.dumps([f for f in listed if f["namespace"] == OWN])
        + json.dumps(client.get(f"/api/v1/findings/{double.id}").json())
        + json.dumps(client.get(f"/api/v1/findings/{unallocatable.id}").json())
    )
    if who == "admin":
        assert "team-b/dup-b" in own_text and "team-b/hog" in own_text
    else:
        assert "team-b/" not in own_text and "a claim in another namespace" in own_text
        shown = client.get(f"/api/v1/findings/{double.id}").json()
        assert shown["evidence"]["claims"] == ["team-a/dup", "a claim in another namespace"]
        assert shown["summary"].startswith(
            "Device gpu.example.com/node-1/gpu-0 is allocated to 2 claims (team-a/dup, a claim in another namespace)"
        )
    # Other namespace x existing / missing: one 404 for both, whatever exists.
    found, missing = client.get(f"/api/v1/findings/{other.id}"), client.get("/api/v1/findings/999999")
    if who == "admin":
        assert found.status_code == 200 and missing.status_code == 404
    else:
        assert found.status_code == missing.status_code == 404 and found.json() == missing.json()
        for namespace in (
            OTHER,
            "no-such-namespace",
        ):  # filtering by a namespace outside the scope: nothing, either way
            assert client.get("/api/v1/findings", {"namespace": namespace}).json()["results"] == []


@pytest.mark.parametrize("who", USERS)
def test_findings_pages_matrix(findings, pages, who):
    client = pages[who]
    stuck_page = client.get(reverse("ops:stuck"), {"cluster": "scope"}).content.decode()
    detail = client.get(reverse("claims:claim-detail", args=["scope", OWN, "dup"])).content.decode()
    if who == "admin":
        assert "team-b/dup-b" in stuck_page and "team-b/dup-b" in detail
    else:
        assert (
            "team-b/" not in stuck_page and "dup-b" not in stuck_page and "a claim in another namespace" in stuck_page
        )
        assert "dup-b" not in detail and "a claim in another namespace" in detail
    # Another namespace's claim page: the same 404 for an existing and a missing claim.
    found = client.get(reverse("claims:claim-detail", args=["scope", OTHER, "dup-b"]))
    missing = client.get(reverse("claims:claim-detail", args=["scope", OTHER, MISSING]))
    assert (found.status_code, missing.status_code) == ((200, 404) if who == "admin" else (404, 404))
    filtered = client.get(reverse("ops:stuck"), {"cluster": "scope", "namespace": OTHER}).content.decode()
    assert ("dup-b" in filtered) == (who == "admin")


def test_release_dry_run_page_shows_the_scoped_summary(findings, pages):
    double, _ = _own_findings(findings)
    page = (
        pages["scoped"]
        .post(reverse("ops:stuck-release"), {"ids": [str(double.id)], "step": "dry-run"})
        .content.decode()
    )
    assert "a claim in another namespace" in page and "dup-b" not in page
    assert double.__class__.objects.get(pk=double.pk).summary == double.summary  # the stored row keeps the names


def test_older_summaries_are_scrubbed_by_name():
    summary, evidence = scoped_summary_and_evidence(
        "some_rule",
        "held with team-b/long-name and team-b/long",
        {"claims": ["team-b/long", "team-b/long-name"]},
        {OWN},
    )
    assert summary == "held with a claim in another namespace and a claim in another namespace"
    assert evidence["claims"] == ["a claim in another namespace"] * 2


def test_claim_list_subscribes_only_to_visible_namespaces(alpha, pages):
    """The socket refuses another namespace's subscription, so the list filtered by one does not ask."""

    def live_scope(who, namespace):
        body = pages[who].get(reverse("claims:claim-list"), {"namespace": namespace}).content.decode()
        return json.loads(html.unescape(re.search(r"data-live-scope='([^']*)'", body).group(1)))

    assert live_scope("scoped", OWN)["namespace"] == OWN
    assert "namespace" not in live_scope("scoped", OTHER)
    assert live_scope("admin", OTHER)["namespace"] == OTHER


_NS = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
_NAME = st.text(st.characters(blacklist_characters=")", blacklist_categories=("Cs",)), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_NS, _NAME), min_size=1, max_size=4), st.sets(_NS, max_size=3))
def test_no_example_holder_of_another_namespace_survives_redaction(holders, visible):
    """Whatever the names (mirrored names are not always valid), a hidden namespace's holder is gone and
    a visible one's is kept; nested anywhere in the answer."""
    reasons = [
        f"request `gpu`: 1 is already allocated to other claims (e.g. {ns}/{name}), 0 free < count 1"
        for ns, name in holders
    ]
    answer = redact_result(
        {"nodes": [{"reason": r} for r in reasons], "summary": {"reasons": [{"example": r} for r in reasons]}}, visible
    )
    for (ns, name), node, summary in zip(holders, answer["nodes"], answer["summary"]["reasons"]):
        for text in (node["reason"], summary["example"]):
            if ns in visible:
                assert f"(e.g. {ns}/{name})" in text
            else:
                assert text.endswith("(e.g. a claim in another namespace), 0 free < count 1") and f"{ns}/" not in text
