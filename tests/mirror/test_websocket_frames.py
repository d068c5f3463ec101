"""/ws/live/ on the real server (`manage.py serve`: uvicorn, gpudash.asgi, the Redis layer when
REDIS_URL is set), as a browser reaches it: the handshake's origin check (scheme, host and port of the
dashboard's own origin, or of CSRF_TRUSTED_ORIGINS), and an answer to every frame: bad JSON, wrong
types, out-of-range numbers, invalid unicode, names longer than Kubernetes allows and oversized
frames (an error frame, then close code 1009). Error frames never echo what was sent.
"""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from mirror import roles
from mirror.consumers import CLOSE_TOO_BIG, MAX_FRAME
from tests.fleet_data import make_user
from tests.serve_fixtures import serve  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cookie():
    """A viewer's session cookie, in rows the server subprocess can read."""
    client = Client()
    client.force_login(make_user("wsframes", roles.VIEWER, namespaces=["team-a"]))
    return f"sessionid={client.cookies['sessionid'].value}"


def open_socket(server, cookie, origin):
    headers = {"Cookie": cookie}
    if origin is not None:
        headers["Origin"] = origin
    return ws_connect(
        server.url.replace("http://", "ws://") + "/ws/live/", additional_headers=headers, open_timeout=10, max_size=None
    )


def handshake(server, cookie, origin):
    """The handshake's HTTP status: 101 accepted, 403 refused."""
    try:
        with open_socket(server, cookie, origin):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def test_only_the_dashboards_own_origin_may_connect(serve, cookie):  # noqa: F811
    port = serve.port
    assert handshake(serve, cookie, f"http://127.0.0.1:{port}") == 101
    refused = [
        "http://127.0.0.1:9999",  # another app on this host (the probe)
        "http://localhost:3000",  # the same (the probe)
        f"https://127.0.0.1:{port}",  # another scheme
        "http://127.0.0.1",  # port 80
        f"http://127.0.0.2:{port}",
        "http://evil.example",
        f"http://127.0.0.1:{port}.evil.example",
        "null",  # a sandboxed page or a file
        "http://127.0.0.1:99999",  # no port at all
        None,  # no Origin header
    ]
    assert {origin: handshake(serve, cookie, origin) for origin in refused} == dict.fromkeys(refused, 403)
    assert handshake(serve, "sessionid=forged", f"http://127.0.0.1:{port}") == 403  # the origin alone is not enough


def exchange(ws, frame):
    ws.send(frame)
    return json.loads(ws.recv(timeout=10))


BAD_FRAMES = {
    '{"subscribe":{"cluster":1e308}}': "cluster must be an id or null, not 1e+308",
    '{"subscribe":{"cluster":-1}}': "cluster must be an id or null, not -1",
    '{"subscribe":{"cluster":Infinity}}': "cluster must be an id or null, not inf",
    '{"subscribe":{"cluster":NaN}}': "cluster must be an id or null, not nan",
    '{"subscribe":{"cluster":true}}': "cluster must be an id or null, not True",
    '{"subscribe":{"cluster":18446744073709551616}}': "cluster must be an id or null, not 18446744073709551616",
    '{"subscribe":{"cluster":"99999999999999999999"}}': "cluster must be an id or null",
    '{"subscribe":{"cluster":1,"node":"\\ud800"}}': "node is not valid unicode (a lone surrogate)",
    '{"subscribe":{"cluster":1,"namespace":"team-\\udfff"}}': "namespace is not valid unicode (a lone surrogate)",
    '{"subscribe":{"cluster":1,"kind":["Pod\\ud83d"]}}': "kind is not valid unicode",
    '{"subscribe":{"cluster":1,"node":["a"]}}': "node must be a string, not ['a']",
    '{"subscribe":{"cluster":1,"namespace":{"a":1}}}': "namespace must be a string",
    '{"subscribe":{"cluster":1,"kind":5}}': "kind must be a list of at most 20 kind names",
    '{"subscribe":{"cluster":1,"kind":[""]}}': "kind must be a list",
    '{"subscribe":{"cluster":1,"node":"'
    + "n" * 254
    + '"}}': "node is 254 characters long; Kubernetes allows at most 253",
    '{"subscribe":{"cluster":1,"namespace":"'
    + "s" * 64
    + '"}}': "namespace is 64 characters long; Kubernetes allows at most 63",
    '{"subscribe":[]}': "subscribe must be an object",
    '{"subscribe":{"cluster":' + "9" * 5000 + "}}": "not JSON",  # more digits than Python converts
    "[1, 2": "not JSON",
    '"x"': 'expected {"subscribe": {...}}',
}


def test_every_frame_is_answered_and_the_socket_stays_open(serve, cookie):  # noqa: F811
    with open_socket(serve, cookie, f"http://127.0.0.1:{serve.port}") as ws:
        for frame, words in BAD_FRAMES.items():
            answer = exchange(ws, frame)
            assert answer["type"] == "error" and words in answer["error"], (frame[:80], answer)
            assert len(answer["error"]) < 200, answer  # nothing echoed whole
        ws.send(b"\x00\x01")
        assert "binary frame" in json.loads(ws.recv(timeout=10))["error"]
        # After all that, still open and working, and the largest names Kubernetes allows are taken.
        node = "n" * 253
        answer = exchange(ws, json.dumps({"subscribe": {"cluster": "7", "node": node}}))
        assert answer["type"] == "subscribed" and answer["scope"]["cluster"] == 7 and answer["scope"]["node"] == node


@pytest.mark.parametrize("size", [MAX_FRAME + 1, 15_000_000])
def test_an_oversized_frame_gets_an_error_then_close_1009(serve, cookie, size):  # noqa: F811
    frame = '{"subscribe":{"cluster":1,"node":"' + "x" * size + '"}}'
    with open_socket(serve, cookie, f"http://127.0.0.1:{serve.port}") as ws:
        ws.send(frame)
        raw = ws.recv(timeout=30)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    answer = json.loads(raw)
    assert (
        answer["type"] == "error"
        and f"frame of {len(frame):,} characters is over the limit of {MAX_FRAME:,}" in answer["error"]
    )
    assert len(raw) < 200 and "xxxxxxxxxx" not in raw
    assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_TOO_BIG


def _handshake_in_process(headers):
    """Accepted or not, through the whole ASGI application (origin check, session, routing)."""
    from gpudash.asgi import application

    async def attempt():
        comm = WebsocketCommunicator(application, "/ws/live/", headers=headers)
        connected, _ = await comm.connect()
        await comm.disconnect()
        return connected

    return async_to_sync(attempt)()


def test_trusted_origins_and_the_host_the_proxy_gives(settings):
    settings.ALLOWED_HOSTS = ["gpudash.example.com", "127.0.0.1"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://gpudash.example.com", "https://*.corp.example"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client()
    client.force_login(make_user("wstrust", roles.VIEWER))
    session = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    def accepted(origin, host=b"127.0.0.1:8000", proto=None):
        headers = [session, (b"host", host), (b"origin", origin.encode())]
        if proto:
            headers.append((b"x-forwarded-proto", proto))
        return _handshake_in_process(headers)

    assert accepted("https://gpudash.example.com")  # configured, whatever Host the proxy passes on
    assert accepted("https://dash.corp.example") and accepted("https://corp.example")
    assert not accepted("http://gpudash.example.com")  # scheme
    assert not accepted("https://gpudash.example.com:8443")  # port
    assert not accepted("https://evilcorp.example")
    # The dashboard's own origin: behind TLS, from the proxy's header; a Host outside ALLOWED_HOSTS is none.
    assert accepted("https://gpudash.example.com", host=b"gpudash.example.com", proto=b"https")
    assert accepted("http://127.0.0.1:8000") and not accepted("https://127.0.0.1:8000")
    assert accepted("https://127.0.0.1:8000", proto=b"https") and not accepted("http://127.0.0.1:8000", proto=b"https")
    assert not accepted("http://attacker.example", host=b"attacker.example")
