"""OIDC sign-in against a real OpenID provider (the certified `oidc-provider` npm package, run by the test
on 127.0.0.1 from tests/oidc_provider/server.mjs), driven in real Chromium against daphne configured the
way an operator would, from the environment (password sign-in off, OIDC_GROUP_MAP, impersonation on):
groups become a role and a namespace scope at every sign-in, an unknown group gets nothing, sign-out
ends the session, a tampered state or nonce is refused, a password POST is refused, and a release
runs against the built-in API server as the person who signed in. Tokens never reach the browser,
the pages, the session store or the logs."""

import json
import os
import re
import secrets
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session

from accounts.discovery import discover
from accounts.models import SignInIdentity
from mirror import roles
from mirror.models import Cluster
from tests.browser import BROWSER_MARKS, ROOT, AsgiServer, chromium, free_port, stop_process, wait_until
from tests.ops_fixtures import claim_raw, new_uid
from tests.ops_live import seed

NODE = shutil.which("node")
pytestmark = [
    *BROWSER_MARKS,
    pytest.mark.skipif(
        not NODE or not (ROOT / "node_modules" / "oidc-provider").is_dir(),
        reason="needs node and the npm test tools (`npm ci`; make test runs it)",
    ),
]

CLIENT_ID = "gpudash-test"
CLIENT_SECRET = "client-secret-" + secrets.token_hex(12)
GROUP_MAP = "gpu-team-a=operator:team-a,team-a-dev; gpu-viewers=viewer; gpu-admins=admin"
USERS = {
    "alice": {"password": "alice-pw-1", "groups": ["gpu-team-a", "book-club"]},
    "bob": {"password": "bob-pw-1", "groups": ["marketing"]},  # no group the map knows
    "erin": {"password": "erin-pw-1", "groups": ["gpu-viewers"]},
}


class Site:
    """The provider and the dashboard, and what the tests need to look at afterwards."""

    def __init__(self, tmp):
        self.users_file = tmp / "users.json"
        self.tokens_file = tmp / "tokens.jsonl"
        self.idp_log = tmp / "idp.log"
        self.set_users(USERS)
        self.idp_url = f"http://127.0.0.1:{free_port()}"
        self.app = None
        self.idp = None

    def set_users(self, users):
        self.users_file.write_text(json.dumps(users))

    def tokens(self):
        """Every token value the provider handed out (access and ID tokens)."""
        if not self.tokens_file.exists():
            return []
        lines = [json.loads(line) for line in self.tokens_file.read_text().splitlines() if line.strip()]
        return [t[k] for t in lines for k in ("access_token", "id_token", "refresh_token") if t.get(k)]


@pytest.fixture(scope="module")
def site(django_db_setup, tmp_path_factory, artifacts_dir):
    site = Site(tmp_path_factory.mktemp("oidc"))
    app_port = free_port()
    app_url = f"http://127.0.0.1:{app_port}"
    env = {
        **os.environ,
        "PORT": site.idp_url.rsplit(":", 1)[1],
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "REDIRECT_URI": app_url + "/oidc/callback/",
        "USERS_FILE": str(site.users_file),
        "TOKENS_FILE": str(site.tokens_file),
    }
    with open(site.idp_log, "wb") as log:
        site.idp = subprocess.Popen(
            [NODE, str(ROOT / "tests" / "oidc_provider" / "server.mjs")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def answers():
            assert site.idp.poll() is None, site.idp_log.read_text()
            try:
                urllib.request.urlopen(site.idp_url + "/.well-known/openid-configuration", timeout=2)
                return True
            except OSError:
                return False

        wait_until(answers, 30, "the OpenID provider")
        app = AsgiServer(app_port, artifacts_dir / "daphne-oidc.log")
        app.log_path.write_bytes(b"")
        app.env.update(
            {
                **discover(site.idp_url),  # the provider's endpoints, as manage.py oidc_discover prints them
                "OIDC_RP_CLIENT_ID": CLIENT_ID,
                "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
                "OIDC_PROVIDER_NAME": "Test IdP",
                "OIDC_GROUP_MAP": GROUP_MAP,
                "GPUDASH_PASSWORD_LOGIN": "off",
                "LOG_LEVEL": "DEBUG",
            }
        )
        app.start()
        site.app = app
        yield site
    finally:
        if site.app:
            site.app.stop()
        stop_process(site.idp)


@pytest.fixture(scope="module")
def browser(site):
    with chromium() as browser:  # one Chromium for the module; every sign-in gets its own context
        yield browser


def new_page(browser):
    page = browser.new_context().new_page()
    page.set_default_timeout(60000)  # a loaded CI machine; nothing here is timed
    return page


def sso_sign_in(page, site, username=None):
    """Click the single sign-on button; at the provider, sign in as `username` (None: its session is still on)."""
    base = site.app.url
    page.goto(base + "/accounts/login/")
    page.click("#sso")
    if username:
        page.wait_for_selector("#idp-username")
        page.fill("#idp-username", username)
        page.fill("#idp-password", USERS[username]["password"])
        page.click("#idp-submit")
    page.wait_for_url(base + "/")


def signed_in_user(page, site):
    """The username the dashboard's session cookie belongs to (None = not signed in)."""
    cookie = next((c for c in page.context.cookies(site.app.url) if c["name"] == "sessionid"), None)
    if cookie is None:
        return None
    session = Session.objects.filter(session_key=cookie["value"]).first()
    uid = session.get_decoded().get("_auth_user_id") if session else None
    return User.objects.get(pk=uid).username if uid else None


def watch(page, seen_urls, html):
    page.on("request", lambda request: seen_urls.append(request.url))

    def keep():
        html.append(page.content())

    return keep


def assert_no_tokens(site, seen_urls, html):
    tokens = site.tokens()
    assert tokens, "the provider handed out no token: the sign-ins did not happen"
    log = site.app.log_path.read_text(errors="replace")
    sessions = [json.dumps(s.get_decoded()) for s in Session.objects.all()]
    rows = [
        json.dumps([i.issuer, i.subject, i.groups, i.sources, i.kube_username, i.kube_groups])
        for i in SignInIdentity.objects.all()
    ]
    for secret in [*tokens, CLIENT_SECRET]:
        where = [
            name
            for name, texts in (
                ("daphne log", [log]),
                ("browser URLs", seen_urls),
                ("pages", html),
                ("sessions", sessions),
                ("identities", rows),
            )
            if any(secret in t for t in texts)
        ]
        assert where == [], f"a token or the client secret shows up in: {', '.join(where)}"
    assert "oidc" in log.lower()  # the log did capture the sign-ins (at DEBUG)


def test_sign_in_maps_groups_then_sign_out_and_removed_groups(site, browser, tmp_path):
    from devcluster.server import DevCluster

    cluster_api = DevCluster()
    cluster_api.start()
    try:
        cluster_api.subjects.set_group_rules(
            "oidc:gpu-team-a",
            [
                {
                    "verbs": ["patch"],
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims/status"],
                    "namespaces": ["team-a"],
                }
            ],
        )
        seed(cluster_api.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("gone", new_uid())]))
        Cluster.objects.create(
            name="dev", kubeconfig=str(cluster_api.write_kubeconfig(tmp_path / "kubeconfig")), context="devcluster"
        )
        seen_urls, html = [], []
        page = new_page(browser)
        keep = watch(page, seen_urls, html)
        sso_sign_in(page, site, "alice")
        keep()
        assert signed_in_user(page, site) == "alice"
        alice = User.objects.get(username="alice")
        assert roles.role_of(alice) == roles.OPERATOR and roles.visible_namespaces(alice) == {"team-a", "team-a-dev"}
        assert not alice.has_usable_password() and not alice.is_staff

        page.goto(site.app.url + "/accounts/profile/")
        keep()
        assert page.inner_text("#profile-role") == "operator"
        assert page.inner_text("#profile-scope") == "Namespaces: team-a, team-a-dev"
        sources = page.inner_text("#profile-sources")
        assert "role operator\tidentity-provider group gpu-team-a" in sources
        assert "namespace team-a-dev\tidentity-provider group gpu-team-a" in sources and "book-club" not in sources
        assert "oidc:alice" in page.inner_text("#profile-kube")

        # A release as alice: the cluster sees her (the mapped group only), not the dashboard.
        csrf = next(c["value"] for c in page.context.cookies(site.app.url) if c["name"] == "csrftoken")
        answer = page.request.post(
            site.app.url + "/api/v1/claims/dev/team-a/c1/release",
            headers={"X-CSRFToken": csrf},
            data={"action": "remove_reservations", "dry_run": False},
        )
        assert answer.status == 200, answer.text()
        assert answer.json()["result"]["identity"]["user"] == "oidc:alice"
        assert [s[2:] for s in cluster_api.subjects.seen if s[0] == "PATCH"] == [("oidc:alice", ["oidc:gpu-team-a"])]

        # Sign out ends the session: the cookie's session is gone and the dashboard asks to sign in again.
        old_session = next(c["value"] for c in page.context.cookies(site.app.url) if c["name"] == "sessionid")
        page.click("#logout")
        page.wait_for_url(re.compile(r".*/accounts/login/.*"))
        assert not Session.objects.filter(session_key=old_session).exists()
        page.goto(site.app.url + "/claims/")
        assert "/accounts/login/" in page.url and signed_in_user(page, site) is None

        # The IdP takes gpu-team-a away: the next sign-in (the provider's session is still on) removes the rights.
        site.set_users({**USERS, "alice": {**USERS["alice"], "groups": ["book-club"]}})
        sso_sign_in(page, site)
        keep()
        alice.refresh_from_db()
        assert signed_in_user(page, site) == "alice" and roles.role_of(alice) is None
        assert page.goto(site.app.url + "/claims/").status == 403
        page.goto(site.app.url + "/accounts/profile/")
        keep()
        assert page.inner_text("#profile-role") == "none" and "No access" in page.inner_text("#profile-scope")
        assert SignInIdentity.objects.get(user=alice).kube_groups == []
        assert_no_tokens(site, seen_urls, html)
    finally:
        cluster_api.stop()
        site.set_users(USERS)


def test_unknown_group_gets_no_access_and_viewer_group_reads(site, browser):
    page = new_page(browser)
    sso_sign_in(page, site, "bob")
    assert signed_in_user(page, site) == "bob"
    bob = User.objects.get(username="bob")
    assert roles.role_of(bob) is None
    assert page.goto(site.app.url + "/").status == 403
    assert page.request.get(site.app.url + "/api/v1/claims/").status == 403
    page.goto(site.app.url + "/accounts/profile/")
    assert "No access" in page.inner_text("#profile-scope")

    page = new_page(browser)
    sso_sign_in(page, site, "erin")
    erin = User.objects.get(username="erin")
    assert roles.role_of(erin) == roles.VIEWER and roles.visible_namespaces(erin) is None
    assert page.goto(site.app.url + "/claims/").status == 200
    assert page.request.get(site.app.url + "/api/v1/claims/").status == 200


def with_query(url, **changes):
    parts = urllib.parse.urlsplit(url)
    query = {**dict(urllib.parse.parse_qsl(parts.query)), **changes}
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def redirect_to(route, location, response=None):
    """Answer an intercepted navigation with a redirect (keeping the cookies the real answer set)."""
    headers = {"location": location, "cache-control": "no-store"}
    cookies = response.headers.get("set-cookie") if response is not None else None
    if cookies:
        headers["set-cookie"] = cookies
    route.fulfill(status=303, headers=headers)


def test_tampered_state_or_nonce_is_refused(site, browser):
    callback = site.app.url + "/oidc/callback/"
    # State: the provider's answer comes back with another state than the one this browser's session holds.
    # Playwright does not intercept redirect hops, so the login form's POST is intercepted and the
    # provider's redirects are followed in the browser context (its cookies) up to the callback.
    page = new_page(browser)

    def answer_with_forged_state(route):
        response = route.fetch(max_redirects=0)
        location = response.headers["location"]
        while not location.startswith(callback):
            location = urllib.parse.urljoin(site.idp_url, location)
            location = page.request.get(location, max_redirects=0).headers["location"]
        state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))["state"]
        redirect_to(route, with_query(location, state="forged-" + state[:8]))

    page.route(re.compile(re.escape(site.idp_url) + r"/interaction/.*/login"), answer_with_forged_state)
    page.goto(site.app.url + "/accounts/login/")
    page.click("#sso")
    page.fill("#idp-username", "alice")
    page.fill("#idp-password", USERS["alice"]["password"])
    with page.expect_response(re.compile(re.escape(callback) + ".*")) as answer:
        page.click("#idp-submit")
    assert answer.value.status == 400 and "state=forged-" in answer.value.url
    assert signed_in_user(page, site) is None
    assert not User.objects.filter(username="alice").exists()

    # Nonce: the authorization request reaches the provider with another nonce than the session's, so the
    # ID token carries that one.
    page = new_page(browser)
    sent = {}

    def forge_nonce(route):
        response = route.fetch(max_redirects=0)
        location = response.headers["location"]
        sent.update(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
        redirect_to(route, with_query(location, nonce="forged-nonce-" + secrets.token_hex(8)), response)

    page.route(re.compile(re.escape(site.app.url) + "/oidc/authenticate/.*"), forge_nonce)
    page.goto(site.app.url + "/accounts/login/")
    page.click("#sso")
    page.fill("#idp-username", "alice")
    page.fill("#idp-password", USERS["alice"]["password"])
    with page.expect_response(re.compile(re.escape(callback) + ".*")) as answer:
        page.click("#idp-submit")
    assert sent["code_challenge_method"] == "S256" and sent["code_challenge"] and sent["nonce"]  # PKCE, a nonce
    assert answer.value.status == 400
    assert signed_in_user(page, site) is None
    assert not User.objects.filter(username="alice").exists()
    assert "JWT Nonce verification failed" in site.app.log_path.read_text(errors="replace")


def test_password_sign_in_turned_off(site, browser):
    User.objects.create_user("local", password="local-pw-1")
    User.objects.create_superuser("root", password="root-pw-1")
    page = new_page(browser)
    page.goto(site.app.url + "/accounts/login/")
    assert page.locator("input[name=password]").count() == 0 and page.locator("#sso").count() == 1
    assert page.inner_text("#sso") == "Sign in with Test IdP"
    # The Django admin's own login form still renders, but authenticates through the same (password-less) backends.
    page.goto(site.app.url + "/admin/login/")
    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    page.request.post(
        site.app.url + "/admin/login/", form={"username": "root", "password": "root-pw-1", "csrfmiddlewaretoken": csrf}
    )
    assert signed_in_user(page, site) is None
    assert "/login/" in page.goto(site.app.url + "/admin/").url
    refused = page.request.post(
        site.app.url + "/accounts/login/",
        form={"username": "local", "password": "local-pw-1", "csrfmiddlewaretoken": csrf},
    )
    assert refused.status == 403 and "Password sign-in is turned off" in refused.text()
    assert signed_in_user(page, site) is None


def test_oidc_discover_prints_the_providers_settings(site):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("oidc_discover", site.idp_url, stdout=out)
    lines = dict(line.split("=", 1) for line in out.getvalue().splitlines())
    assert lines == {
        "OIDC_OP_ISSUER": site.idp_url,
        "OIDC_OP_AUTHORIZATION_ENDPOINT": site.idp_url + "/auth",
        "OIDC_OP_TOKEN_ENDPOINT": site.idp_url + "/token",
        "OIDC_OP_USER_ENDPOINT": site.idp_url + "/me",
        "OIDC_OP_JWKS_ENDPOINT": site.idp_url + "/jwks",
    }
    with pytest.raises(CommandError, match="names the issuer"):
        call_command("oidc_discover", site.idp_url + "/", stdout=StringIO())


def test_a_code_the_provider_refuses_is_a_failed_sign_in(site, settings, caplog):
    from django.test import RequestFactory

    from accounts.backend import GpudashOIDCBackend
    from accounts.config import sign_in_settings

    env = {**discover(site.idp_url), "OIDC_RP_CLIENT_ID": CLIENT_ID, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET}
    for name, value in sign_in_settings(env).items():
        setattr(settings, name, value)
    request = RequestFactory().get("/oidc/callback/", {"code": "forged-code", "state": "some-state"})
    request.session = {}
    with caplog.at_level("WARNING", logger="accounts.backend"):
        assert GpudashOIDCBackend().authenticate(request, nonce="n", code_verifier="v" * 64) is None
    assert f"OIDC sign-in failed talking to the provider: HTTPError 400 {site.idp_url}/token" in caplog.text
    assert CLIENT_SECRET not in caplog.text and "forged-code" not in caplog.text
