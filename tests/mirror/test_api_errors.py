"""REST API conventions: one error shape, 400 naming the parameter, 401 vs 403, 404, 405, roles, tokens, preview."""

import io

import pytest
from django.core.management import CommandError, call_command

from tests.api_fixtures import anonymous, client_for, fleet, make_user, norole, operator, viewer  # noqa: F401
from tests.conftest import runs_previews

pytestmark = pytest.mark.django_db


def error(response, status):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


@pytest.mark.parametrize(
    "query, field, words",
    [
        ("attribute=productName", "attribute", "NAME:VALUE"),
        ("attribute=bad name!:x", "attribute", "not an attribute name"),
        ("attribute=colour:red", "attribute", "No device publishes an attribute named 'colour'"),
        ("capacity=memory>>40Gi", "capacity", "NAME OP QUANTITY"),
        ("capacity=memory~40Gi", "capacity", "NAME OP QUANTITY"),
        ("capacity=memory>=40GB", "capacity", "not a Kubernetes quantity"),
        ("capacity=memory>=", "capacity", "NAME OP QUANTITY"),
        ("capacity=memory>==1", "capacity", "NAME OP QUANTITY"),
        ("capacity=memory>=4 0Gi", "capacity", "not a Kubernetes quantity"),
        ("capacity=memory>=1e99999", "capacity", "not a Kubernetes quantity"),
        ("capacity=flux>=1", "capacity", "No device publishes a capacity named 'flux'"),
        ("state=busy", "state", "busy"),
        ("cluster=nowhere", "cluster", "valid choice"),
        ("ordering=colour", "ordering", "colour"),
        ("stat=free", "stat", "Unknown parameter 'stat'"),
        ("tainted=maybe", "tainted", "true or false"),
        ("raw=perhaps", "raw", "Must be one of"),
        ("page_size=0", "page_size", "whole number"),
        ("page_size=abc", "page_size", "whole number"),
        ("node=a%00b", "node", "NUL"),
    ],
)
def test_bad_device_filters_are_400_naming_the_parameter(fleet, viewer, query, field, words):
    err = error(viewer.get(f"/api/v1/devices/?{query}"), 400)
    assert err["field"] == field
    assert words in err["message"]


def test_bad_claim_filters(fleet, viewer):
    assert error(viewer.get("/api/v1/claims/?state=lost"), 400)["field"] == "state"
    assert error(viewer.get("/api/v1/pods/?phase=Sleeping"), 400)["field"] == "phase"
    assert error(viewer.get("/api/v1/audit/?since=yesterday"), 400)["field"] == "since"
    assert error(viewer.get("/api/v1/aggregates/allocation?cluster=nowhere"), 400)["field"] == "cluster"
    assert error(viewer.get("/api/v1/aggregates/allocation?colour=red"), 400)["field"] == "colour"


def test_page_past_the_end_is_404(fleet, viewer):
    assert error(viewer.get("/api/v1/devices/?page=99"), 404)["code"] == "not_found"


def test_unknown_objects_and_paths_are_404(fleet, viewer):
    assert error(viewer.get("/api/v1/devices/987654/"), 404)["code"] == "not_found"
    assert error(viewer.get("/api/v1/claims/987654/"), 404)["code"] == "not_found"
    assert error(viewer.get("/api/v1/no-such-thing/"), 404)["code"] == "not_found"


def test_writes_to_read_only_endpoints_are_405(fleet, viewer, operator):
    assert error(viewer.post("/api/v1/devices/", {}), 405)["code"] == "method_not_allowed"
    assert error(operator.get("/api/v1/preview"), 405)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "url", ["/api/v1/devices/", "/api/v1/claims/", "/api/v1/aggregates/devices", "/api/v1/clusters/"]
)
def test_anonymous_is_401_and_user_without_role_is_403(fleet, anonymous, norole, url):
    err = error(anonymous.get(url), 401)
    assert err["code"] == "not_authenticated"
    assert anonymous.get(url).headers["WWW-Authenticate"] == "Token"
    assert error(norole.get(url), 403)["code"] == "permission_denied"


def test_bad_token_is_401(fleet):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert error(client.get("/api/v1/devices/"), 401)["code"] == "authentication_failed"


def test_session_auth_works_for_the_browser(fleet, client):
    make_user("bea", "viewer")
    assert client.login(username="bea", password="pw-bea")
    assert client.get("/api/v1/devices/").status_code == 200


def test_viewer_cannot_preview(fleet, viewer, anonymous):
    body = {"cluster": "alpha", "namespace": "team-a", "claim": "pending"}
    assert error(viewer.post("/api/v1/preview", body, format="json"), 403)["code"] == "permission_denied"
    assert error(anonymous.post("/api/v1/preview", body, format="json"), 401)["code"] == "not_authenticated"


def test_scoped_operator_cannot_preview_in_other_namespaces(fleet):
    client = client_for(make_user("olga", "operator", namespaces=["team-a"]))
    err = error(
        client.post("/api/v1/preview", {"cluster": "alpha", "namespace": "team-b", "claim": "stuck"}, format="json"),
        403,
    )
    assert "team-b" in err["message"]


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"cluster": "nowhere", "claim": "x"}, "cluster", "nowhere"),
        ({"cluster": "alpha", "namespace": "team-a"}, "yaml", "yaml"),
        (
            {"cluster": "alpha", "namespace": "team-a", "claim": "x", "yaml": "a: b"},
            "yaml",
            "exactly one of `yaml` or `claim`",
        ),
        ({"cluster": "alpha", "namespace": "team-a", "claim": "no-such-claim"}, "claim", "no-such-claim"),
        ({"cluster": "alpha", "namespace": "team-a", "yaml": "kind: [unclosed"}, "yaml", "malformed YAML at line"),
        ({"cluster": "alpha", "namespace": "team-a", "yaml": "- a\n- list\n"}, "yaml", "document 1 is a list"),
        (
            {"cluster": "alpha", "namespace": "team-a", "yaml": "kind: Pod\nmetadata: {name: p}\nspec: {}\n"},
            "yaml",
            "nothing to place",
        ),
        ({"cluster": "alpha", "namespace": "team-a", "claim": "train"}, "claim", "already allocated"),
    ],
)
@runs_previews
def test_preview_bad_input_is_400(fleet, operator, body, field, words):
    err = error(operator.post("/api/v1/preview", body, format="json"), 400)
    assert err["field"] == field, err
    assert words in err["message"], err


def placements(result):
    return {n["node"]: [r["device"] for r in n["results"]] for n in result["nodes"] if n["fits"]}


@runs_previews
def test_preview_of_a_pending_claim(fleet, operator):
    r = operator.post("/api/v1/preview", {"cluster": "alpha", "namespace": "team-a", "claim": "pending"}, format="json")
    assert r.status_code == 200, r.content
    result = r.json()["result"]
    assert result["summary"]["cluster"] == "alpha" and result["summary"]["claims"] == ["team-a/pending"]
    # node-a: gpu-0 is train's; gpu-1 is only watched with admin access, which blocks nobody.
    # node-b: gpu-0 is held by the claim stuck deleting. Beta's node is another cluster.
    assert placements(result) == {"node-a": ["gpu-1"], "node-b": ["gpu-1"]}


PROBE_YAML = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: probe, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 2}
"""


@runs_previews
def test_preview_of_yaml(fleet, operator):
    r = operator.post("/api/v1/preview", {"cluster": "alpha", "namespace": "team-a", "yaml": PROBE_YAML}, format="json")
    assert r.status_code == 200, r.content
    result = r.json()["result"]
    assert result["summary"]["cluster"] == "alpha" and result["summary"]["fits"] == 1
    assert placements(result) == {"node-a": ["gpu-1", "gpu-2"]}
    node_b = next(n for n in result["nodes"] if n["node"] == "node-b")
    assert "1 is already allocated to other claims (e.g. team-b/stuck), 1 free < count 2" in node_b["reason"]


@pytest.mark.parametrize(
    "old, new, words",
    [
        (
            "count: 2}",
            "count: 2, selectors: [{cel: {expression: 'device.driver =='}}]}",
            "CEL compile error at line 1, column 17",
        ),
        (
            "count: 2}",
            "count: 2, selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].nope == 1'}}]}",
            "CEL runtime error: no such key: nope",
        ),
        ("gpu.nvidia.com,", "nope.example.com,", "no DeviceClass of that name"),
        ("count: 2", "count: 10000", "10000 exceeds the claim limit of 32"),
    ],
)
@runs_previews
def test_preview_of_a_claim_the_engine_cannot_place_names_the_problem_on_every_node(fleet, operator, old, new, words):
    """Like the scheduler, the engine judges a bad selector or class per node; every node says what is wrong."""
    r = operator.post(
        "/api/v1/preview",
        {"cluster": "alpha", "namespace": "team-a", "yaml": PROBE_YAML.replace(old, new)},
        format="json",
    )
    assert r.status_code == 200, r.content
    result = r.json()["result"]
    assert result["summary"]["fits"] == 0 and result["summary"]["errors"] == len(result["nodes"]) == 2
    assert all(words in n["error"] and "team-a/probe" in n["error"] for n in result["nodes"]), result["nodes"]
    assert words in result["summary"]["mostCommonReason"]["example"]


def test_preview_malformed_json_body_is_400(fleet, operator):
    r = operator.post("/api/v1/preview", data="{not json", content_type="application/json")
    assert error(r, 400)["code"] == "parse_error"


def test_create_token_command(db):
    user = make_user("tess", "viewer")
    out = io.StringIO()
    call_command("create_token", "tess", stdout=out)
    key = out.getvalue().strip()
    again = io.StringIO()
    call_command("create_token", "tess", stdout=again)
    assert again.getvalue().strip() == key  # idempotent
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/devices/").status_code == 200
    fresh = io.StringIO()
    call_command("create_token", "tess", "--reset", stdout=fresh)
    assert fresh.getvalue().strip() != key
    assert client.get("/api/v1/devices/").status_code == 401
    assert user.auth_token.key == fresh.getvalue().strip()
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_token", "ghost")


NEEDS_EIGHT = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: eight, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 2}
      selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')"}}]
"""


@runs_previews
def test_reasons_hide_claims_of_namespaces_the_operator_cannot_see(fleet, operator):
    """node-b's A100 gpu-0 is held by team-b/stuck: an admin sees the name, a team-a operator does not."""
    body = {"cluster": "alpha", "namespace": "team-a", "yaml": NEEDS_EIGHT}
    full = operator.post("/api/v1/preview", body, format="json").json()["result"]
    reason_b = next(n["reason"] for n in full["nodes"] if n["node"] == "node-b")
    assert "team-b/stuck" in reason_b

    scoped = client_for(make_user("olga2", "operator", namespaces=["team-a"]))
    result = scoped.post("/api/v1/preview", body, format="json").json()["result"]
    reason_b = next(n["reason"] for n in result["nodes"] if n["node"] == "node-b")
    assert "team-b" not in reason_b and "a claim in another namespace" in reason_b
