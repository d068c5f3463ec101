"""Bad input and bad connections get a clear answer and lose nothing: a cluster whose API server is down
or whose connection settings are garbage still gets every page and endpoint (with its connection status,
never a 500); strangers are sent to the login page, refused by the API (401/403) and by the websocket."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from mirror import roles
from mirror.models import SyncState
from tests.ui_fixtures import load_fleet, make_user

PAGES = [
    "/",
    "/fleet/map/",
    "/nodes/",
    "/nodes/alpha/node-a/",
    "/devices/",
    "/devices/alpha/gpu.nvidia.com/node-a/gpu-0/",
    "/classes/",
    "/pools/",
    "/claims/",
    "/claims/alpha/team-a/train-1/",
    "/claims/alpha/team-a/pending-claim/",
    "/pods/",
    "/preview/",
    "/stuck/",
    "/pending/",
    "/pending/alpha/team-a/waiting-pod/",
    "/readiness/",
]
LIVE_ENDPOINTS = ["/api/v1/clusters/alpha/readiness", "/api/v1/pods/alpha/team-a/waiting-pod/pending"]
DEAD_SERVER = """apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: x, user: u}}]
current-context: x
"""
KUBECONFIGS = {
    "api server down": DEAD_SERVER,
    "not YAML": "::: not yaml {{{\n\x00\x01",
    "YAML but not a kubeconfig": "current-context: x\ncontexts: [{name: x, context: 7}]\n",
    "file missing": None,
}


@pytest.fixture
def broken_alpha(request, tmp_path, transactional_db, in_process_previews):
    """The fleet in committed rows (the Pending checklist's preview runs in a preview worker)."""
    cluster = load_fleet()
    path = tmp_path / "kubeconfig"
    if KUBECONFIGS[request.param] is not None:
        path.write_text(KUBECONFIGS[request.param])
    cluster.kubeconfig = str(path)
    cluster.save()
    SyncState.objects.filter(cluster=cluster).update(status=SyncState.Status.ERROR, last_error="connection refused")
    return cluster


def operator_client():
    client = Client(raise_request_exception=False)
    client.force_login(make_user("olivia", role=roles.OPERATOR))
    return client


@pytest.mark.parametrize("broken_alpha", list(KUBECONFIGS), indirect=True)
def test_pages_of_an_unreachable_cluster_show_its_status(broken_alpha):
    client = operator_client()
    for url in PAGES:
        response = client.get(url, {"cluster": "alpha"})
        assert response.status_code == 200, (url, response.status_code)
        assert "conn-disconnected" in response.content.decode(), url
    # The live parts say they fell back or could not connect, and name the cluster.
    pending = client.get("/pending/alpha/team-a/waiting-pod/").content.decode()
    assert "mirror" in pending and "waiting-pod" in pending
    readiness = client.get("/readiness/", {"cluster": "alpha"}).content.decode()
    assert 'id="overall"' in readiness


@pytest.mark.parametrize("broken_alpha", list(KUBECONFIGS), indirect=True)
def test_live_endpoints_of_an_unreachable_cluster_answer_from_the_mirror(broken_alpha):
    client = operator_client()
    readiness = client.get(LIVE_ENDPOINTS[0])
    assert readiness.status_code == 200, readiness.content[:500]
    assert readiness.json()["live"] is False
    versions = next(c for c in readiness.json()["checks"] if c["id"] == "versions")
    assert versions["status"] == "fail"
    pending = client.get(LIVE_ENDPOINTS[1])
    assert pending.status_code == 200, pending.content[:500]
    assert pending.json()["source"] == "mirror"


def test_a_release_on_a_cluster_with_garbage_settings_sends_nothing_and_says_why(tmp_path, db):
    from claims.release.actions import release
    from claims.release.audit import ERROR

    cluster = load_fleet()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIGS["not YAML"])
    cluster.kubeconfig = str(path)
    cluster.save()
    operator = make_user("olivia", role=roles.OPERATOR)
    outcome = release(operator, cluster, "team-b", "stuck-claim", "finish_deletion", dry_run=False)
    assert outcome.outcome == ERROR and "nothing sent" in outcome.reason
    assert "cannot load connection settings" in outcome.reason


# --- strangers -------------------------------------------------------------------------------------

OPS_PAGES = [
    ("ops:stuck", ()),
    ("ops:pending", ()),
    ("ops:readiness", ()),
    ("ops:pending-pod", ("alpha", "team-a", "waiting-pod")),
]


@pytest.mark.django_db
@pytest.mark.parametrize("name, args", OPS_PAGES)
def test_operations_pages_need_login_and_a_role(client, name, args):
    load_fleet()
    url = reverse(name, args=args)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(make_user("nobody", role=None))
    assert client.get(url).status_code == 403


@pytest.mark.django_db
def test_release_form_refuses_strangers(client):
    load_fleet()
    response = client.post(reverse("ops:stuck-release"), {"ids": ["1"], "step": "release"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(make_user("nobody", role=None))
    assert client.post(reverse("ops:stuck-release"), {"ids": ["1"], "step": "release"}).status_code == 403


def _websocket(headers):
    """Connect to /ws/live/ through the whole ASGI application (origin check, session auth, routing)."""
    from gpudash.asgi import application

    async def attempt():
        comm = WebsocketCommunicator(application, "/ws/live/", headers=headers)
        connected, _ = await comm.connect()
        await comm.disconnect()
        return connected

    return async_to_sync(attempt)()


@pytest.mark.django_db(transaction=True)
def test_websocket_needs_a_session_from_an_allowed_origin(client, settings):
    settings.ALLOWED_HOSTS = ["testserver"]
    origin = (b"host", b"testserver"), (b"origin", b"http://testserver")  # the page's own origin
    assert _websocket([*origin]) is False  # no session cookie: refused
    client.force_login(make_user("alice"))
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    assert _websocket([*origin, cookie]) is True
    assert _websocket([origin[0], (b"origin", b"http://evil.example"), cookie]) is False  # another site's page
    assert _websocket([origin[0], (b"origin", b"http://testserver:3000"), cookie]) is False  # another app on the host
    client.force_login(make_user("nobody", role=None))
    assert _websocket([*origin, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]) is False
