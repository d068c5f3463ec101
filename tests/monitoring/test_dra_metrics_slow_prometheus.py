"""A Prometheus that answers slowly, or never, does not stall the dashboard (issue 35 on issue 31's
bound): on the real server (`manage.py serve`), while the DRA control-plane metrics page and its API
wait on such a Prometheus, /healthz keeps answering within 100 ms and other pages and the API answer.
The page itself answers at once with the figures it has ("waiting" for the others), its fragment
brings the rest as they finish, and figures whose queries got no answer within the deadline say
"timed out", never zero. On PostgreSQL and on the embedded SQLite default."""

import http.server
import re
import socket
import threading
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from mirror import roles
from mirror.models import Cluster
from mirror.views import SESSION_CLUSTER
from monitoring import drametrics
from monitoring.models import PrometheusSource
from tests.api_fixtures import make_user
from tests.serve_fixtures import ServeProcess, healthz_while, while_in_flight

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_default, pytest.mark.django_db]

HEALTHZ_WITHIN = 0.1  # issue 31's bound (serve_fixtures.assert_healthz_fast)
SLOW_SECONDS = 2.0  # how long the slow Prometheus takes per query
DEADLINE = 4  # the server's DRA_DEADLINE_SECONDS: the blackhole's figures time out by then


class SlowPrometheus(http.server.ThreadingHTTPServer):
    """Answers every instant query with an empty vector after SLOW_SECONDS."""

    daemon_threads = True

    def __init__(self, delay=SLOW_SECONDS):
        super().__init__(("127.0.0.1", 0), SlowHandler)
        self.queries = 0
        self.delay = delay

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class SlowHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.queries += 1
        time.sleep(self.server.delay)
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def prometheus():
    """(slow Prometheus, blackhole URL): the blackhole accepts connections (the kernel's backlog) and
    never answers."""
    slow = SlowPrometheus()
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(128)
    yield slow, f"http://127.0.0.1:{hole.getsockname()[1]}"
    slow.shutdown()
    slow.server_close()
    hole.close()


@pytest.fixture(scope="module")
def server(prometheus, django_db_setup, django_db_blocker, tmp_path_factory):
    """The server, with clusters "slow" and "hole" on those Prometheus, a viewer's session and token,
    committed for the module (the server reads them) and flushed after it."""
    slow, hole = prometheus
    with django_db_blocker.unblock():
        PrometheusSource.objects.create(cluster=Cluster.objects.create(name="slow"), url=slow.url)
        PrometheusSource.objects.create(cluster=Cluster.objects.create(name="hole"), url=hole)
        user = make_user("vera", roles.VIEWER)
        token = Token.objects.create(user=user).key
        cookies = {}
        # A session per cluster, the cluster already chosen in it: a request with ?cluster= writes the
        # session, and on SQLite that write waits on this test's open transaction.
        for name in ("slow", "hole"):
            client = Client()
            client.force_login(user)
            session = client.session
            session[SESSION_CLUSTER] = name
            session.save()
            cookies[name] = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}
        env = {"GPUDASH_DRA_DEADLINE": str(DEADLINE), "GPUDASH_PROMETHEUS_TIMEOUT": "3"}
        serve = ServeProcess(tmp_path_factory.mktemp("serve") / "serve.log", env=env).start()
    yield serve, token, cookies
    serve.stop()
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


def figure_statuses(html):
    return dict(re.findall(r'data-figure="([a-z_]+)" data-status="([a-z_]+)"', html))


def pending(html):
    return int(re.search(r'data-dra-figures data-done="\d+" data-pending="(\d+)"', html).group(1))


@pytest.mark.parametrize("cluster", ["slow", "hole"])
def test_page_answers_at_once_and_other_requests_are_not_held(server, cluster):
    serve, token, cookies = server
    cookie = cookies[cluster]

    def page():
        return serve.request("GET", "/dra-metrics/?window=15m", headers=cookie, text=True)

    (status, html, _), polls = while_in_flight(serve, page, within=HEALTHZ_WITHIN)
    assert status == 200 and polls >= 1, html[:2000]
    # The first paint does not wait for the ~30 queries: each figure waits in the page.
    assert pending(html) == len(drametrics.FIGURES)
    assert set(figure_statuses(html)) == set(drametrics.BY_KEY) and "data-pending" in html

    # While the figures are being asked for, the fragment (which waits for more figures) is in flight,
    # /healthz holds its bound, and other pages and the API answer.
    def rest():
        seen, fragments = 0, 0
        while True:
            status, part, _ = serve.request(
                "GET",
                f"/dra-metrics/?window=15m&fragment=figures&seen={seen}",
                headers=cookie,
                text=True,
            )
            assert status == 200
            fragments += 1
            if pending(part) == 0:
                return part, fragments
            seen = len(drametrics.FIGURES) - pending(part)

    def others():
        answers = [
            serve.request("GET", "/api/v1/clusters/", token=token)[0],
            serve.request("GET", "/", headers=cookie, text=True)[0],
            serve.request("GET", "/dra-metrics/?window=1h", headers=cookies["slow"], text=True)[0],
        ]
        return answers

    result = {}
    fetcher = threading.Thread(target=lambda: result.update(done=rest()))
    fetcher.start()
    answers, probes = healthz_while(serve, others)
    assert answers == [200, 200, 200]
    assert probes and all(status == 200 for status, _ in probes)
    fetcher.join(60)
    part, fragments = result["done"]
    assert fragments >= 1
    statuses = figure_statuses(part)
    if cluster == "hole":
        # Nothing answered: every figure says it timed out, no cell shows a value (let alone a 0).
        assert set(statuses.values()) == {drametrics.TIMED_OUT}, statuses
        assert part.count("data-timed-out") == len(drametrics.FIGURES) and "<td class" not in part
    else:
        # Slow, but each query answers within the timeout: the figures that came say what came
        # (an empty vector: not scraped); those the deadline cut say "timed out".
        assert set(statuses.values()) <= {drametrics.ABSENT, drametrics.TIMED_OUT}, statuses
        assert drametrics.ABSENT in statuses.values()


def test_api_is_bounded_by_the_deadline_and_reuses_the_page_evaluation(server, prometheus):
    serve, token, _ = server
    slow, _ = prometheus

    def api():
        return serve.request("GET", "/api/v1/dra-metrics?cluster=hole", token=token)

    (status, body, _), polls = while_in_flight(serve, api, within=HEALTHZ_WITHIN)
    assert status == 200 and polls >= 1
    figures = body["clusters"][0]["figures"]
    assert {f["status"] for f in figures} == {"timed_out"}
    assert all(f["timed_out"] and f["rows"] == [] for f in figures)

    # A second read within DRA_CACHE_SECONDS sends no query again.
    status, _, _ = serve.request("GET", "/api/v1/dra-metrics?cluster=slow", token=token)
    sent = slow.queries
    status, again, _ = serve.request("GET", "/api/v1/dra-metrics?cluster=slow", token=token)
    assert status == 200 and slow.queries == sent
    assert {f["key"] for f in again["clusters"][0]["figures"]} == set(drametrics.BY_KEY)


def test_a_silent_prometheus_holds_only_its_own_query_threads(prometheus, settings):
    """Query threads are per Prometheus: while a cluster's silent Prometheus holds its threads until
    the deadline, another cluster's figures are asked for and answered (with one shared pool, they
    would queue behind the silent queries until the deadline ended those)."""
    _slow, hole = prometheus
    answering = SlowPrometheus(delay=0)
    threading.Thread(target=answering.serve_forever, daemon=True).start()
    settings.GPUDASH_MONITORING = {"DRA_DEADLINE_SECONDS": 5, "QUERY_TIMEOUT_SECONDS": 5}
    try:
        silent = PrometheusSource.objects.create(cluster=Cluster.objects.create(name="silent"), url=hole)
        live = PrometheusSource.objects.create(cluster=Cluster.objects.create(name="live"), url=answering.url)
        held = drametrics.Evaluation(silent)  # every thread of the silent Prometheus waits on it
        results = drametrics.evaluate(live)
        assert not held.complete, "the live cluster's figures waited for the silent one's deadline"
        assert answering.queries == sum(1 + len(r.queries) for r in results)
        assert {r.status for r in results} == {drametrics.ABSENT}  # empty answers: no series, not zero
        assert held.wait(10) and {r.status for r in held.results} == {drametrics.TIMED_OUT}
    finally:
        answering.shutdown()
        answering.server_close()
