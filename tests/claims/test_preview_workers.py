"""Previews run in preview workers, never in the web process: a real `manage.py serve` with the
embedded default's local pool and with production's `preview` Celery queue (a real Celery worker).

A preview that cannot finish (a claim whose constraint sends the search through millions of picks)
holds its worker for as long as the test wants; meanwhile the web process must answer /healthz in
under 100 ms, refuse previews past its admission limits with 429 + Retry-After, free the worker of a
client that went away, and answer 503 when a worker is killed (`kill -9`), with the next preview served.
"""

import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest
from rest_framework.authtoken.models import Token

from mirror import roles
from mirror.models import Cluster
from mirror.sync.apply import apply_object
from tests.browser import wait_until
from tests.fleet_data import make_user, meta
from tests.serve_fixtures import ServeProcess, assert_healthz_fast

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.sqlite_default]

DRIVER = "driver-a.example.com"
CLASS = "endless.example.com"
# The search must pick 8 of 30 "left" devices, then one "right" device with the same `side`: there is
# none, so it walks all C(30, 8) = 5.8 million picks (tests/dra/test_allocator_deadlines.py). With no filter
# timeout and a 120 s deadline it holds a worker far longer than any test waits.
ENDLESS = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: endless, namespace: team-a}}
spec:
  devices:
    requests:
    - name: many
      exactly: {{deviceClassName: {CLASS}, count: 8, selectors: [{{cel: {{expression: 'device.attributes["{DRIVER}"].side == "left"'}}}}]}}
    - name: other
      exactly: {{deviceClassName: {CLASS}, selectors: [{{cel: {{expression: 'device.attributes["{DRIVER}"].side == "right"'}}}}]}}
    constraints: [{{matchAttribute: "{DRIVER}/side"}}]
"""
ONE = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: one, namespace: team-a}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: {CLASS}}}
"""


def device(name, side):
    return {"name": name, "attributes": {"side": {"string": side}}}


def load_endless_cluster():
    cluster = Cluster.objects.create(name="endless")
    apply_object(
        cluster,
        "DeviceClass",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": meta(CLASS),
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
    )
    for node, devices in (
        ("node-1", [device(f"a{i}", "left") for i in range(30)] + [device(f"b{i}", "right") for i in range(2)]),
        ("node-2", [device("d", "left")]),
    ):
        apply_object(
            cluster,
            "Node",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": meta(node, labels={"kubernetes.io/hostname": node}),
                "spec": {},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"},
                },
            },
        )
        apply_object(
            cluster,
            "ResourceSlice",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": meta(f"{node}-slice"),
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            },
        )
    return cluster


BACKENDS = ["local", "celery"]


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, django_db_setup, django_db_blocker, tmp_path_factory):
    """`manage.py serve` whose previews go to two preview workers (a local pool, or a Celery worker with
    concurrency 2); at most one preview per user and two in all (no queue)."""
    if request.param == "celery" and not os.environ.get("REDIS_URL"):
        pytest.skip("the Celery backend needs REDIS_URL")
    env = {
        "GPUDASH_PREVIEW_BACKEND": request.param,
        "GPUDASH_PREVIEW_WORKERS": "2",
        "GPUDASH_PREVIEW_PER_USER": "1",
        "GPUDASH_PREVIEW_QUEUE": "0",
        "GPUDASH_PREVIEW_DEADLINE": "120",
        "GPUDASH_FILTER_TIMEOUT": "0",
    }
    with django_db_blocker.unblock():
        proc = ServeProcess(tmp_path_factory.mktemp(f"previews-{request.param}") / "serve.log", env=env).start()
    proc.backend = request.param
    yield proc
    proc.stop()


@pytest.fixture
def tokens(server):
    load_endless_cluster()
    users = {"ann": roles.OPERATOR, "bob": roles.OPERATOR, "cid": roles.OPERATOR, "root": roles.ADMIN}
    return {name: Token.objects.create(user=make_user(name, role)).key for name, role in users.items()}


def call(server, method, path, token, body=None, timeout=60):
    """(status, headers, parsed JSON) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(
            method, path, body=data, headers={"Authorization": f"Token {token}", "Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, dict(resp.getheaders()), json.loads(raw) if raw else None
    finally:
        conn.close()


def preview_body(yaml_text):
    return {"cluster": "endless", "namespace": "team-a", "yaml": yaml_text, "nodeFilters": False}


def preview(server, token, yaml_text, timeout=60):
    return call(server, "POST", "/api/v1/preview", token, preview_body(yaml_text), timeout=timeout)


def open_preview(server, token, yaml_text):
    """Send a preview and leave it running: the socket, to read the answer from or to close (the client
    goes away)."""
    data = json.dumps(preview_body(yaml_text)).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        b"POST /api/v1/preview HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Authorization: Token {token}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def read_answer(sock, timeout):
    sock.settimeout(timeout)
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    body = resp.read()
    sock.close()
    return resp.status, json.loads(body)


def running_jobs(server, admin):
    """[(worker pid, host or None)] of the previews the workers run now (GET /api/v1/preview/workers)."""
    status, _, body = call(server, "GET", "/api/v1/preview/workers", admin)
    assert status == 200, body
    assert body["backend"] == server.backend
    if server.backend == "local":
        return [(w["pid"], None) for w in body["workers"] if w["job"] and w["alive"]]
    return [(int(r["worker"].rsplit(":", 1)[1]), r["worker"].rsplit(":", 1)[0]) for r in body["running"]]


def healthz_seconds(server, probes=10):
    """How long each of `probes` /healthz answers took, each checked to be 200."""
    seconds = []
    for _ in range(probes):
        started = time.perf_counter()
        status, _, body = call(server, "GET", "/healthz", "", timeout=5)
        seconds.append(time.perf_counter() - started)
        assert status == 200 and body == {"status": "ok"}
        time.sleep(0.05)
    return seconds


def test_a_preview_is_answered_by_a_worker_as_the_engine_answers_it(server, tokens):
    from claims.preview import run_preview

    status, headers, body = preview(server, tokens["ann"], ONE)
    assert status == 200, body
    # How long the trip through the workers took beside the worker's own run, in ms (Server-Timing).
    timing = dict(part.split(";dur=") for part in headers["Server-Timing"].split(", "))
    assert {"queue", "run", "wait"} <= set(timing) and all(float(v) >= 0 for v in timing.values())
    here = run_preview(Cluster.objects.get(name="endless"), yaml_text=ONE, namespace="team-a", node_filters=False)
    assert [(n["node"], n["fits"], n["reason"]) for n in body["result"]["nodes"]] == [
        (n["node"], n["fits"], n["reason"]) for n in here["nodes"]
    ]
    assert body["result"]["summary"]["fits"] == 2
    # Workers report themselves; none runs a job once the answer is in.
    status, _, workers = call(server, "GET", "/api/v1/preview/workers", tokens["root"])
    assert (
        status == 200
        and workers["backend"] == server.backend
        and workers["limits"] == {"WORKERS": 2, "PER_USER": 1, "QUEUE": 0}
    )
    assert running_jobs(server, tokens["root"]) == []
    # The status is for admins only.
    assert call(server, "GET", "/api/v1/preview/workers", tokens["ann"])[0] == 403


def test_admission_limits_cancellation_and_a_responsive_web_process(server, tokens):
    ann = open_preview(server, tokens["ann"], ENDLESS)
    wait_until(lambda: len(running_jobs(server, tokens["root"])) == 1, 30, "ann's preview to start")
    # One per user: ann's second preview is refused at once, and says why and when to ask again.
    status, headers, body = preview(server, tokens["ann"], ONE, timeout=10)
    assert status == 429, body
    assert body["error"]["code"] == "previews_busy" and "per user" in body["error"]["message"]
    assert int(headers["Retry-After"]) >= 1
    bob = open_preview(server, tokens["bob"], ENDLESS)
    wait_until(lambda: len(running_jobs(server, tokens["root"])) == 2, 30, "bob's preview to start")
    # Two in all: a third user is refused too, for the global limit.
    status, headers, body = preview(server, tokens["cid"], ONE, timeout=10)
    assert status == 429 and body["error"]["code"] == "previews_busy" and "busy" in body["error"]["message"], body
    assert int(headers["Retry-After"]) >= 1
    # Both workers are busy with searches that would take minutes; the web process does not notice.
    assert_healthz_fast(healthz_seconds(server))
    # The clients go away: their jobs are cancelled and the workers freed long before the 120 s deadline.
    ann.close()
    bob.close()
    wait_until(lambda: running_jobs(server, tokens["root"]) == [], 20, "the cancelled previews to free their workers")
    status, _, body = preview(server, tokens["cid"], ONE, timeout=30)
    assert status == 200 and body["result"]["summary"]["fits"] == 2, body


def test_a_worker_killed_mid_preview_is_a_503_and_the_next_preview_is_served(server, tokens):
    sock = open_preview(server, tokens["ann"], ENDLESS)
    wait_until(lambda: len(running_jobs(server, tokens["root"])) == 1, 30, "the preview to start")
    [(pid, host)] = running_jobs(server, tokens["root"])
    assert host in (None, socket.gethostname())
    os.kill(pid, signal.SIGKILL)
    status, body = read_answer(sock, timeout=30)
    assert status == 503, body
    assert body["error"]["code"] == "preview_worker_lost" and "ask again" in body["error"]["message"]
    status, _, body = preview(server, tokens["bob"], ONE, timeout=60)
    assert status == 200 and body["result"]["summary"]["fits"] == 2, body
    if server.backend == "local":  # the pool replaced the dead worker: two live workers again
        status, _, workers = call(server, "GET", "/api/v1/preview/workers", tokens["root"])
        assert [w["alive"] for w in workers["workers"]] == [True, True] and pid not in [
            w["pid"] for w in workers["workers"]
        ]


def test_the_preview_page_answers_429_past_the_limit(server, tokens):
    """The page shows the refusal as the API does (status and Retry-After), inside the page."""
    from urllib.parse import urlencode

    from django.contrib.auth.models import User
    from django.test import Client

    browser = Client()
    browser.force_login(User.objects.get(username="ann"))  # a session row the server reads
    csrf = "k" * 32
    sock = open_preview(server, tokens["ann"], ENDLESS)
    try:
        wait_until(lambda: len(running_jobs(server, tokens["root"])) == 1, 30, "the preview to start")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        form = urlencode({"yaml": ONE, "namespace": "team-a", "csrfmiddlewaretoken": csrf, "skip_node_filters": "1"})
        conn.request(
            "POST",
            "/preview/?cluster=endless",
            body=form,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"csrftoken={csrf}; sessionid={browser.cookies['sessionid'].value}",
            },
        )
        resp = conn.getresponse()
        page = resp.read().decode()
        assert resp.status == 429, page[:2000]
        assert int(resp.headers["Retry-After"]) >= 1
        assert "per user" in page and "<nav" in page
    finally:
        sock.close()
    wait_until(lambda: running_jobs(server, tokens["root"]) == [], 20, "the cancelled preview to free its worker")


def test_healthz_stays_fast_while_a_heavy_preview_runs(server, tokens):
    """The kind of input that used to stall the server: the web process only waits for the worker."""
    outcome = {}

    def give_up_after_5s():
        try:
            outcome["answer"] = preview(server, tokens["ann"], ENDLESS, timeout=5)
        except TimeoutError:
            outcome["timed_out"] = True

    thread = threading.Thread(target=give_up_after_5s)
    thread.start()
    wait_until(lambda: len(running_jobs(server, tokens["root"])) == 1, 30, "the preview to start")
    assert_healthz_fast(healthz_seconds(server, probes=20))
    thread.join()
    assert outcome == {"timed_out": True}
    # The client gave up after 5 s (a timeout): the server sees it leave and frees the worker.
    wait_until(lambda: running_jobs(server, tokens["root"]) == [], 20, "the abandoned preview to free its worker")


@pytest.mark.parametrize(
    "answer, error, words",
    [
        (
            {"error": "out_of_scope", "message": "x", "namespace": "team-b"},
            "OutOfScope",
            "namespace team-b is outside your scope",
        ),
        (
            {"error": "inventory_building", "message": "still being built", "retry_after": 7},
            "InventoryNotReady",
            "still being built",
        ),
        ({"error": "engine", "message": "the engine failed"}, "EngineFailure", "the engine failed"),
        ({"error": "invalid", "message": "YAML: malformed"}, "PreviewError", "YAML: malformed"),
    ],
)
def test_a_workers_error_is_raised_here_as_run_preview_raises_it(answer, error, words):
    """Errors cross as codes and become the same exceptions (and HTTP answers) as an in-process run."""
    from claims import preview
    from claims.preview_service.jobs import answer_or_raise, decode_answer, encode_answer, is_result

    data = encode_answer(answer)
    assert not is_result(data)
    with pytest.raises((preview.PreviewError, preview.OutOfScope)) as caught:
        answer_or_raise(decode_answer(data))
    assert type(caught.value).__name__ == error and words in str(caught.value)
    if error == "InventoryNotReady":
        assert caught.value.retry_after == 7
    assert is_result(encode_answer({"result": {"nodes": []}}))
