"""Inputs a probe once turned into 500s (issue 31) answer the documented error on the real server
(`manage.py serve`), while /healthz keeps answering within 100 ms: a `%` in a filter value, integers
too large for the database, bodies over the upload limit (413, also as a form), page sizes and search
text too long for the UI (a 400 page in the site's layout), and the /oidc/ routes with OIDC off (404).
On PostgreSQL and on the embedded SQLite default."""

import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from mirror import roles
from mirror.views import MAX_SEARCH_LENGTH
from tests.api_fixtures import load_fleet, make_user
from tests.serve_fixtures import ServeProcess, serve, while_in_flight  # noqa: F401

# django_db: the test database for the servers; the rows they read are committed once (fleet_rows), and
# the tests, which only send requests, run in a rolled-back transaction that holds nothing.
pytestmark = [pytest.mark.slow, pytest.mark.sqlite_default, pytest.mark.django_db]

HEALTHZ_WITHIN = 0.1  # seconds: the bound issue 31 sets for /healthz while any of these is processed (serve_fixtures.assert_healthz_fast)
BIGINT_PLUS_ONE = str(2**63)  # one past PostgreSQL's bigint and SQLite's INTEGER
PERCENT = [  # (path, parameter): a lone `%` once raised TypeError in django-filter's error translation
    ("/api/v1/devices/", "tainted"),
    ("/api/v1/devices/", "attribute"),
    ("/api/v1/devices/", "capacity"),
    ("/api/v1/nodes/", "ready"),
    ("/api/v1/nodes/", "unschedulable"),
    ("/api/v1/clusters/", "enabled"),
    ("/api/v1/aggregates/devices", "tainted"),
]
TOO_LARGE = [  # (path and query, the parameter the 400 names)
    (f"/api/v1/devices/?page={BIGINT_PLUS_ONE}", "page"),
    (f"/api/v1/claims/?page={BIGINT_PLUS_ONE}", "page"),
    (f"/api/v1/devices/?slice={BIGINT_PLUS_ONE}", "slice"),
    (f"/api/v1/nodes/?min_free_gpus={BIGINT_PLUS_ONE}", "min_free_gpus"),
    ("/api/v1/devices/?page_size=" + "9" * 110, "page_size"),
    ("/api/v1/claims/?page_size=" + "9" * 110, "page_size"),
    ("/api/v1/claims/?page_size=" + "9" * 5000, "page_size"),  # past CPython's 4,300-digit int() limit
    ("/api/v1/utilization?offset=" + BIGINT_PLUS_ONE, "offset"),
]
BODY_ENDPOINTS = ["/api/v1/preview", "/api/v1/findings/release", "/api/v1/claims/alpha/team-b/stuck/release"]


@pytest.fixture(scope="module")
def fleet_rows(django_db_setup, django_db_blocker):
    """The fleet, an operator's token and another operator's session, committed once for the module (the
    server subprocess reads them; the tests only send it requests, so no test changes them), and the
    tables emptied after the module as a transactional test's flush does."""
    with django_db_blocker.unblock():
        load_fleet()
        token = Token.objects.create(user=make_user("otto", roles.OPERATOR)).key
        client = Client()
        client.force_login(make_user("olivia", roles.OPERATOR))
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    yield {"token": token, "cookie": cookie}
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def token(fleet_rows):
    return fleet_rows["token"]


@pytest.fixture
def session_cookie(fleet_rows):
    return fleet_rows["cookie"]


def probed(serve, send):  # noqa: F811
    """send()'s answer, with /healthz probed under 100 ms until it came."""
    answer, polls = while_in_flight(serve, send, within=HEALTHZ_WITHIN)
    assert polls >= 1
    return answer


def json_error(answer, status):
    got, body, ctype = answer
    assert got == status, (got, body)
    assert ctype.startswith("application/json"), ctype
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


@pytest.mark.parametrize("path, param", PERCENT)
def test_a_percent_sign_in_a_filter_value_is_a_400_naming_it(serve, token, path, param):  # noqa: F811
    url = f"{path}?{param}=%25"
    err = json_error(probed(serve, lambda: serve.request("GET", url, token=token)), 400)
    assert err["field"] == param and "'%'" in err["message"], err


def test_an_attribute_value_of_thousands_of_digits_matches_as_text(serve, token):  # noqa: F811
    """Past int64 a number can only be a string attribute: no device has it (once int() raised: a 500)."""
    url = "/api/v1/devices/?attribute=index:" + "7" * 5000
    status, body, _ = probed(serve, lambda: serve.request("GET", url, token=token))
    assert status == 200 and body["count"] == 0 and body["results"] == [], (status, body)


@pytest.mark.parametrize("url, param", TOO_LARGE)
def test_integers_too_large_for_the_database_are_400s_naming_the_parameter(serve, token, url, param):  # noqa: F811
    err = json_error(probed(serve, lambda: serve.request("GET", url, token=token)), 400)
    assert err["field"] == param and err["code"] in ("invalid", "max_value"), err
    assert "whole number" in err["message"] or "less than or equal to" in err["message"], err
    assert len(err["message"]) < 200, err  # the number is not echoed back


def test_a_page_past_the_end_stays_a_404_and_the_last_page_number_still_answers(serve, token):  # noqa: F811
    """The bound is the database's: the largest page it can take is a 404 (past the end), not a 400."""
    for path in ("/api/v1/devices/", "/api/v1/claims/"):
        last = (2**63 - 1) // 1000 + 1
        err = json_error(serve.request("GET", f"{path}?page_size=1000&page={last}", token=token), 404)
        assert err["code"] == "not_found", err
        err = json_error(serve.request("GET", f"{path}?page_size=1000&page={last + 1}", token=token), 400)
        assert err["field"] == "page" and str(last) in err["message"], err


@pytest.mark.parametrize("path", BODY_ENDPOINTS)
def test_json_bodies_over_the_upload_limit_are_413s(serve, token, path):  # noqa: F811
    body = b'{"ids": [1], "yaml": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    err = json_error(probed(serve, lambda: serve.request("POST", path, body, token=token)), 413)
    assert err["code"] == "too_large" and "2.5 MB" in err["message"], err


@pytest.mark.parametrize("path", BODY_ENDPOINTS)
def test_a_ten_megabyte_form_body_is_the_json_413(serve, token, path):  # noqa: F811
    body = b"yaml=" + b"x" * 10_000_000
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    err = json_error(probed(serve, lambda: serve.request("POST", path, body, token=token, headers=headers)), 413)
    assert err["code"] == "too_large", err


def ui_page(serve, cookie, path, query):  # noqa: F811
    url = f"{path}?{urllib.parse.urlencode(query)}"
    return probed(serve, lambda: serve.request("GET", url, headers={"Cookie": cookie}, text=True))


def assert_layout_400(answer, words):
    status, page, ctype = answer
    assert status == 400 and ctype.startswith("text/html"), (status, ctype, page[:300])
    assert 'class="topbar"' in page and 'id="mainnav"' in page, page[:500]  # the site's layout, navigation included
    assert 'id="bad-request"' in page and words in page, page[-2000:]


@pytest.mark.parametrize("path", ["/devices/", "/claims/", "/nodes/", "/fleet/map/"])
def test_ui_per_page_out_of_range_is_a_400_page_in_the_layout(serve, session_cookie, path):  # noqa: F811
    answer = ui_page(serve, session_cookie, path, {"per_page": "9" * 5000})
    assert_layout_400(answer, "from 1 to 1000")


@pytest.mark.parametrize("path", ["/claims/", "/pods/", "/devices/", "/nodes/", "/fleet/map/", "/search/"])
def test_ui_search_text_over_the_limit_is_a_400_page_in_the_layout(serve, session_cookie, path):  # noqa: F811
    answer = ui_page(serve, session_cookie, path, {"q": "a" * 60000})
    assert_layout_400(answer, f"at most {MAX_SEARCH_LENGTH:,} characters")
    # At the limit the page answers, and the search box says the limit to the browser too.
    status, page, _ = ui_page(serve, session_cookie, path, {"q": "a" * MAX_SEARCH_LENGTH})
    assert status == 200 and f'maxlength="{MAX_SEARCH_LENGTH}"' in page


def test_oidc_routes_are_not_served_with_oidc_off(serve, token):  # noqa: F811
    assert settings.GPUDASH_OIDC is False  # the server inherits this environment: no OIDC_RP_CLIENT_ID
    for path in ("/oidc/authenticate/", "/oidc/callback/?code=x&state=y", "/oidc/logout/"):
        status, _, _ = probed(serve, lambda: serve.request("GET", path, text=True))
        assert status == 404, path


# Its own server writes a session, which a rolled-back test transaction would keep waiting for the
# embedded SQLite's write lock: committed rows, so flushed after it. Last in the file: the flush also
# empties fleet_rows.
@pytest.mark.django_db(transaction=True)
def test_oidc_routes_are_served_with_oidc_on(tmp_path):
    """The other side: configured, /oidc/authenticate/ sends the browser to the provider (which need
    not be running for that)."""
    idp = "https://idp.example"
    env = {
        "OIDC_RP_CLIENT_ID": "gpudash",
        "OIDC_OP_ISSUER": idp,
        "OIDC_OP_AUTHORIZATION_ENDPOINT": idp + "/authorize",
        "OIDC_OP_TOKEN_ENDPOINT": idp + "/token",
        "OIDC_OP_USER_ENDPOINT": idp + "/me",
        "OIDC_OP_JWKS_ENDPOINT": idp + "/jwks",
    }
    server = ServeProcess(tmp_path / "serve-oidc.log", env=env).start()
    try:
        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as answer:
            opener.open(server.url + "/oidc/authenticate/", timeout=60)
        assert answer.value.code == 302 and answer.value.headers["Location"].startswith(idp + "/authorize?"), (
            answer.value.headers
        )
    finally:
        server.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
