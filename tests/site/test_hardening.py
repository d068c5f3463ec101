"""Bad input never answers 500 and never stalls the server (issue 10): each input that once crashed the
preview answers the API's JSON error naming what and where, on the real server (`manage.py serve`),
while /healthz keeps answering; the preview page shows the same message; other bodies (deep JSON,
lone surrogates, dry_run strings) are 400s; detail pages check login before they look anything up."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape
from rest_framework.authtoken.models import Token

from mirror import roles
from tests.api_fixtures import client_for, load_fleet, make_user
from tests.conftest import runs_previews
from tests.serve_fixtures import serve, while_in_flight  # noqa: F401

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com%s}
%s"""
POD = "kind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: %s\n"
HUNDRED = ",".join(["1"] * 100)

# (YAML, words the error must contain). Each crashed the engine with a 500 before.
BAD_YAML = {
    "lone surrogate in kind": ('kind: "\\ud83d"\n', "kind: contains a lone surrogate \\ud83d"),
    "lone surrogate in a name": (
        CLAIM.replace("name: x,", 'name: "a\\ud83d",') % ("", ""),
        "metadata.name: contains a lone surrogate",
    ),
    "lone surrogate in CEL": (
        CLAIM % (", selectors: [{cel: {expression: \"device.driver == '\\ud83d'\"}}]", ""),
        "selectors[0].cel.expression: contains a lone surrogate",
    ),
    "5000 open brackets": ("[" * 5000, "nested too deeply"),
    "metadata is a list": (
        "kind: ResourceClaim\nmetadata: [1]\nspec: {}\n",
        "document 1 (ResourceClaim): metadata: must be an object, not a list [1]",
    ),
    "kind is a list": ("kind: [1]\n", "document 1: kind: must be a string"),
    "pod spec is a string": (POD % "hello", "document 1 (Pod p): spec: must be an object, not a string 'hello'"),
    "resourceClaims entry is a number": (
        POD % "{resourceClaims: [5]}",
        "spec.resourceClaims[0]: must be an object, not an integer 5",
    ),
    "container is a string": (POD % "{containers: [abc]}", "spec.containers[0]: must be an object, not a string 'abc'"),
    "container limits is a list": (
        POD % "{containers: [{name: c, resources: {limits: [1]}}]}",
        "spec.containers[0].resources.limits: must be an object",
    ),
    "selectors is a number": (
        CLAIM % (", selectors: 5", ""),
        "document 1 (ResourceClaim x): spec.devices.requests[0].exactly.selectors: must be a list, not an integer 5",
    ),
    "constraint is a number": (
        CLAIM % ("", "    constraints: [{matchAttribute: x}, 7]\n"),
        "spec.devices.constraints[1]: must be an object, not an integer 7",
    ),
    "requests is a number": (
        "kind: ResourceClaim\nmetadata: {name: x}\nspec: {devices: {requests: 5}}\n",
        "spec.devices.requests: must be a list",
    ),
    "firstAvailable entry is a number": (
        "kind: ResourceClaim\nmetadata: {name: x}\nspec: {devices: {requests: [{name: g, firstAvailable: [3]}]}}\n",
        "requests[0].firstAvailable[0]: must be an object",
    ),
    "count is true": (CLAIM % (", count: true", ""), "exactly.count: must be an integer, not true or false True"),
    "capacity requests is a list": (
        CLAIM % (", capacity: {requests: [1]}", ""),
        "exactly.capacity.requests: must be an object",
    ),
    "template spec is a list": (
        "kind: ResourceClaimTemplate\nmetadata: {name: t}\nspec: {spec: [1]}\n",
        "document 1 (ResourceClaimTemplate t): spec.spec: must be an object",
    ),
    "List items hold a string": ("kind: List\nitems: [hello]\n", "object 1 has no `kind`"),
}
NESTED_ALL = CLAIM % (f", selectors: [{{cel: {{expression: '[{HUNDRED}].all(x, [{HUNDRED}].all(y, y == 1))'}}}}]", "")


@pytest.fixture
def live(transactional_db):
    """The fleet, and an operator's token, in rows the server subprocess can read."""
    load_fleet()
    token = Token.objects.create(user=make_user("otto", roles.OPERATOR))
    return token.key


def preview(serve, token, yaml_text):  # noqa: F811
    body = {"cluster": "alpha", "namespace": "team-a", "yaml": yaml_text}
    return serve.request("POST", "/api/v1/preview", body, token=token)


def assert_json_error(status, body, expected_status=400):
    assert status == expected_status, (status, body)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


@pytest.mark.slow
def test_bad_preview_yaml_is_a_json_400_and_the_server_stays_responsive(serve, live):  # noqa: F811
    for name, (yaml_text, words) in BAD_YAML.items():
        (status, body, _), polls = while_in_flight(serve, lambda: preview(serve, live, yaml_text))
        err = assert_json_error(status, body)
        assert err["field"] == "yaml", (name, err)
        assert words in err["message"], (name, err["message"])
        assert polls >= 1


@pytest.mark.slow
def test_nested_comprehensions_kubernetes_accepts_are_judged_without_stalling(serve, live):  # noqa: F811
    """100 x 100 nested .all() is within Kubernetes' cost limit: every node gets an answer (a 200), or,
    where the CEL library cannot evaluate it, the JSON engine error (422); never a 500."""
    (status, body, ctype), _ = while_in_flight(serve, lambda: preview(serve, live, NESTED_ALL))
    assert ctype.startswith("application/json"), ctype
    if status == 200:
        assert {n["node"] for n in body["result"]["nodes"]} == {"node-a", "node-b"}
    else:
        assert assert_json_error(status, body, 422)["code"] == "engine_error"


@pytest.mark.slow
def test_bodies_the_json_parser_cannot_use_are_400s(serve, live):  # noqa: F811
    deep = b'{"cluster": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    (status, body, _), _ = while_in_flight(serve, lambda: serve.request("POST", "/api/v1/preview", deep, token=live))
    assert "nested too deeply" in assert_json_error(status, body)["message"]
    surrogate = b'{"cluster": "alpha", "namespace": "\\ud83d", "claim": "x"}'
    status, body, _ = serve.request("POST", "/api/v1/preview", surrogate, token=live)
    assert "namespace: contains a lone surrogate" in assert_json_error(status, body)["message"]
    status, body, _ = serve.request(
        "POST", "/api/v1/findings/release", b'{"ids": [1], "dry_run": "\\udfff"}', token=live
    )
    assert assert_json_error(status, body)["code"] == "parse_error"


@runs_previews
def test_the_preview_page_shows_the_same_error():
    """Every input above, in one test: each preview goes to a preview worker, which reads committed rows."""
    load_fleet()
    client = Client()
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    for name, (yaml_text, words) in BAD_YAML.items():
        response = client.post("/preview/?cluster=alpha", {"yaml": yaml_text, "namespace": "team-a"})
        assert response.status_code == 200, name
        page = response.content.decode()
        assert 'id="preview-error"' in page and escape(words) in page, name


# --- dry_run is a JSON boolean -----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["no", "off", "0", "false", 0, 1, None])
def test_dry_run_must_be_a_json_boolean(value):
    load_fleet()
    api = client_for(make_user("otto", roles.OPERATOR))
    for url, body in (
        ("/api/v1/claims/alpha/team-b/stuck/release", {"action": "deallocate"}),
        ("/api/v1/findings/release", {"ids": [1]}),
    ):
        response = api.post(url, {**body, "dry_run": value}, format="json")
        assert response.status_code == 400, (url, response.content)
        err = response.json()["error"]
        assert err["field"] == "dry_run" and ("JSON boolean" in err["message"] or value is None), err


# --- permission before state ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_viewer_releasing_a_cleared_finding_is_refused_for_permission_first():
    from claims.models import AuditEntry, Finding

    load_fleet()
    cleared = Finding.objects.get(rule="old")
    viewer = client_for(make_user("vera", roles.VIEWER))
    response = viewer.post(f"/api/v1/findings/{cleared.id}/release", {"dry_run": True}, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "permission_denied"
    assert "cleared" not in response.json()["error"]["message"]
    assert AuditEntry.objects.filter(username="vera", outcome="refused").exists()  # still audited
    operator = client_for(make_user("otto", roles.OPERATOR))
    assert operator.post(f"/api/v1/findings/{cleared.id}/release", {"dry_run": True}, format="json").status_code == 409


# --- detail pages: login before lookup -----------------------------------------------------------------

DETAIL_PAGES = {
    "claim": ("/claims/alpha/team-a/train/", "/claims/alpha/team-a/no-such-claim/"),
    "node": ("/nodes/alpha/node-a/", "/nodes/alpha/no-such-node/"),
    "device": ("/devices/alpha/gpu.nvidia.com/node-a/gpu-0/", "/devices/alpha/gpu.nvidia.com/node-a/gpu-99/"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("kind", list(DETAIL_PAGES))
def test_strangers_get_the_same_redirect_for_existing_and_missing_objects(kind):
    load_fleet()
    existing, missing = DETAIL_PAGES[kind]
    anonymous = Client()
    answers = [anonymous.get(url) for url in (existing, missing)]
    assert [r.status_code for r in answers] == [302, 302]
    assert all(r["Location"].startswith("/accounts/login/") for r in answers)
    nobody = Client()
    nobody.force_login(make_user("nobody"))
    assert [nobody.get(url).status_code for url in (existing, missing)] == [403, 403]
    viewer = Client()
    viewer.force_login(make_user("vera", roles.VIEWER))
    assert [viewer.get(url).status_code for url in (existing, missing)] == [200, 404]


@pytest.mark.django_db
def test_a_scoped_viewer_gets_404_for_claims_of_other_namespaces_existing_or_not():
    load_fleet()
    scoped = Client()
    scoped.force_login(make_user("sam", roles.VIEWER, namespaces=["team-a"]))
    assert scoped.get("/claims/alpha/team-a/train/").status_code == 200
    assert [scoped.get(url).status_code for url in ("/claims/alpha/team-b/stuck/", "/claims/alpha/team-b/nope/")] == [
        404,
        404,
    ]


# --- odd names in the mirror ---------------------------------------------------------------------------


@runs_previews  # the Pending page's checklist asks a preview worker
def test_a_mirrored_name_with_a_slash_keeps_every_page_working():
    """Kubernetes refuses such names, but a mirror must not 500 for everyone when one slips through."""
    import re

    from mirror.sync.apply import apply_object
    from tests.api_fixtures import claim, pod

    alpha, _ = load_fleet()
    apply_object(alpha, "ResourceClaim", claim("slash/claim", "team-a"))
    apply_object(alpha, "Pod", pod("slash/pod", "team-a", "slash/claim", phase="Pending"))
    client = Client()
    client.force_login(make_user("ada", roles.ADMIN))
    for url in ("/claims/", "/pods/", "/pending/", "/preview/?cluster=alpha", "/stuck/", "/"):
        assert client.get(url).status_code == 200, url
    listing = client.get("/claims/?q=slash").content.decode()
    link = re.search(r'href="(/claims/alpha/team-a/[^"]*slash[^"]*)"', listing).group(1)
    detail = client.get(link)
    assert detail.status_code == 200 and "slash/claim" in detail.content.decode()
    assert client.get("/pending/alpha/team-a/slash/pod/").status_code == 200
    api = client_for(User.objects.get(username="ada"))
    assert api.get("/api/v1/pods/alpha/team-a/slash/pod/pending").status_code == 200


# --- TLS settings from the environment -----------------------------------------------------------------

TLS_PROBE = """
import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
django.setup()
from django.test import Client
plain = Client().get("/accounts/login/")
proxied = Client().get("/accounts/login/", headers={"X-Forwarded-Proto": "https"})
probe = Client().get("/healthz")
print(plain.status_code, plain.get("Location"), proxied.status_code, proxied.get("Strict-Transport-Security"),
      proxied.cookies["csrftoken"]["secure"], probe.status_code, sep="|")
"""


def test_running_behind_a_tls_proxy_is_configured_from_the_environment(tmp_path):
    import os
    import subprocess
    import sys

    from tests.browser import ROOT

    env = {
        **os.environ,
        "SECURE_SSL_REDIRECT": "1",
        "SESSION_COOKIE_SECURE": "1",
        "CSRF_COOKIE_SECURE": "true",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
        "GPUDASH_DATA_DIR": str(tmp_path),
        "ALLOWED_HOSTS": "testserver",
    }
    env.pop("DATABASE_URL", None)  # nothing here touches the database; keep the probe off the test one
    out = subprocess.run(
        [sys.executable, "-c", TLS_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    plain, location, proxied, hsts, secure_cookie, probe = out.stdout.strip().split("|")
    assert (plain, location) == ("301", "https://testserver/accounts/login/")
    assert proxied == "200" and hsts == "max-age=31536000; includeSubDomains" and secure_cookie == "True"
    assert probe != "301"  # the kubelet's plain-HTTP probe is not redirected
