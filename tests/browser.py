"""Helpers shared by the tests that run the dashboard for real: free ports, subprocess servers (daphne),
waiting on conditions, and headless Chromium driven by Playwright.

The browser tests need Debian's chromium and REDIS_URL (the ASGI server subprocess and the watchers
share the Redis channel layer); `BROWSER_MARKS` skips them otherwise. `make test` provides both.
"""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("browser_stack"),  # the server and Chromium the browser files share
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="the ASGI server subprocess and the watcher share Redis"),
]


# Screenshots are for people (artifacts/screenshots/; docs/screenshots/ are picked from them): no test
# reads them, and they are a fifth of a browser test's time. GPUDASH_SCREENSHOTS=0 skips them (.ci/run).
SCREENSHOTS = os.environ.get("GPUDASH_SCREENSHOTS", "1").lower() not in ("0", "false", "no", "off", "")


def shot(target, **kwargs):
    """target.screenshot(**kwargs) (a page or a locator), unless screenshots are off."""
    if SCREENSHOTS:
        target.screenshot(**kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def stop_process(proc, grace=10):
    """Terminate a subprocess, killing it when it does not exit within `grace` seconds."""
    stop_processes([proc], grace)


def stop_processes(procs, grace=10):
    """Terminate subprocesses together (a server and its preview workers each take seconds to shut down:
    their shutdowns overlap), killing any that has not exited within `grace` seconds of the signal."""
    running = [p for p in procs if p is not None and p.poll() is None]
    for proc in running:
        proc.terminate()
    deadline = time.monotonic() + grace
    for proc in running:
        try:
            proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def subprocess_env():
    """The environment for a subprocess that must use this test run's database (not create its own test DB)."""
    db = connection.settings_dict
    # Not the switch chromium() turns on for this process while Playwright runs: a server keeps Django's checks.
    env = {k: v for k, v in os.environ.items() if k not in ("GPUDASH_TEST_DB_NAME", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    if connection.vendor == "sqlite":  # the test database is a file (gpudash/settings.py), so a subprocess can open it
        env["DATABASE_URL"] = f"sqlite:///{db['NAME']}"
    else:
        env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return env


def celery_worker_command(*options, pool="solo"):
    """`celery -A gpudash worker` as the tests start it: no mingle or gossip (they only slow a start
    and chatter between the test's workers), logs at INFO so a test can wait for " ready.". `options`:
    queues, concurrency, node name."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "gpudash",
        "worker",
        "-P",
        pool,
        "--without-mingle",
        "--without-gossip",
        "-l",
        "INFO",
        *options,
    ]


def preview_backend(env):
    """Where a server started with `env` runs its previews (as gpudash.settings decides it)."""
    return env.get("GPUDASH_PREVIEW_BACKEND") or ("celery" if env.get("REDIS_URL") else "local")


class PreviewWorkers:
    """`celery -A gpudash worker -Q preview`: production's preview workers, for a server whose previews
    go to the Celery queue. (The embedded default's local pool is started by the server itself.)"""

    def __init__(self, env, log_path, concurrency=2):
        self.env, self.log_path, self.concurrency = env, Path(log_path), concurrency
        self.proc = None

    def start(self, bound=60):
        return self.launch().wait_ready(bound)

    def launch(self):
        """Start the worker without waiting for it (a server can start meanwhile); wait_ready then."""
        self.log = open(self.log_path, "ab")
        self._log_start = self.log_path.stat().st_size
        cmd = celery_worker_command(
            "-Q",
            "preview",
            "-c",
            str(self.concurrency),
            "--without-heartbeat",
            "-n",
            f"preview-{os.getpid()}-{free_port()}@%h",
            pool="prefork",
        )
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, bound=60):
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the preview worker exited with {self.proc.returncode}; see {self.log_path}")
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                if b" ready." in log.read():
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the preview worker was not ready within {bound} s; see {self.log_path}")

    def stop(self):
        stop_process(self.proc)
        self.closed()

    def closed(self):
        """After the process was stopped (stop_processes, with its server's)."""
        self.proc = None
        self.log.close()


def start_preview_workers(env, log_path):
    """PreviewWorkers (launched, not yet ready: wait_ready once the server is up) for a server started
    with `env` when its previews go to Celery, else None."""
    return PreviewWorkers(env, log_path).launch() if preview_backend(env) == "celery" else None


class AsgiServer:
    """daphne serving gpudash.asgi against this test run's database and Redis (with its preview workers)."""

    def __init__(self, port, log_path):
        self.port = port
        self.log_path = log_path
        self.env = subprocess_env()
        self.proc = None
        self.log = None
        self.previews = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        # daphne, not uvicorn: the tests do not depend on uvicorn's websocket library.
        cmd = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-v",
            "0",
            "gpudash.asgi:application",
        ]
        self.previews = start_preview_workers(self.env, str(self.log_path) + ".previews")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.proc.returncode}; see {self.log_path}")
            try:
                urllib.request.urlopen(self.url + "/accounts/login/", timeout=2)
                if self.previews:
                    self.previews.wait_ready()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer within 30 s; see {self.log_path}")

    def stop(self):
        stop_processes([self.proc, self.previews and self.previews.proc])
        self.proc = None
        if self.log:
            self.log.close()
            self.log = None
        if self.previews:
            self.previews.closed()
            self.previews = None


@contextlib.contextmanager
def launch_chromium():
    """Headless Debian chromium through Playwright; closed on exit."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in the test's thread; the ORM calls a test makes between
    # browser steps are ordinary blocking calls, which this switch allows -- only while the browser runs,
    # so Django's async-safety checks still guard every other test.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            try:
                yield browser
            finally:
                # While Playwright's loop runs, Django keeps the ORM's connections apart from the
                # thread's own (asgiref sees a running loop): close them here, or they outlive the
                # test and the test database cannot be dropped at the end of the run.
                connections.close_all()
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@contextlib.contextmanager
def chromium():
    """Headless Debian chromium: in a browser test, the one this test process shares (BrowserStack);
    the contexts (and so the pages, cookies and websockets) opened in the block are closed on exit.
    Elsewhere a Chromium of its own, closed on exit."""
    if not STACK.active:
        with launch_chromium() as browser:
            yield browser
        return
    browser = STACK.chromium()
    before = set(browser.contexts)
    try:
        yield browser
    finally:
        for context in browser.contexts:
            if context not in before:
                context.close()
        connections.close_all()  # as launch_chromium does: none of the block's connections outlives it


class BrowserStack:
    """What the browser tests of one test process share: one daphne (with its preview workers) per
    server environment, and one Chromium. A server start costs ~10 s and its stop ~6 s, a Chromium a
    second or two; each browser file used to pay them for every test.

    Sharing keeps the tests apart: a server holds no state of its own between requests (every page reads
    the test database, which is emptied after each browser test, and the clusters a test makes get new
    ids, which key the servers' and preview workers' caches); each test's pages are in their own browser
    contexts, closed at the end of its chromium() block. Everything is stopped before the first test that
    is not a browser test (tests/conftest.py orders the browser files first under xdist) and before the
    test database is dropped.
    """

    def __init__(self):
        self.active = False
        self.log_dir = None
        self.servers = {}  # environment overrides (sorted items) -> AsgiServer
        self._chromium = None  # (ExitStack, browser)

    def server(self, env=None):
        """The shared daphne for `env` (extra environment, e.g. GPUDASH_PREVIEW_BACKEND), started on first use
        (or again, when a test stopped it and did not restart it)."""
        env = dict(env or {})
        if env.get("GPUDASH_PREVIEW_BACKEND") == preview_backend(os.environ):
            del env["GPUDASH_PREVIEW_BACKEND"]  # what the server would choose anyway: the same server
        key = tuple(sorted(env.items()))
        server = self.servers.get(key)
        if server is None or server.proc is None or server.proc.poll() is not None:
            if server is not None:
                server.stop()
            suffix = "".join(f"-{v}" for _, v in key)
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            server = AsgiServer(free_port(), self.log_dir / f"daphne-shared{suffix}-{worker}.log")
            server.env.update(env)
            server.start()
            self.servers[key] = server
        return server

    def chromium(self):
        if self._chromium is None:
            stack = contextlib.ExitStack()
            self._chromium = (stack, stack.enter_context(launch_chromium()))
        return self._chromium[1]

    def close(self):
        """Stop the servers (together: their shutdowns overlap) and Chromium."""
        servers, self.servers = list(self.servers.values()), {}
        procs = [p for s in servers for p in (s.proc, s.previews and s.previews.proc)]
        stop_processes(procs)
        for server in servers:
            server.proc = None
            if server.log:
                server.log.close()
                server.log = None
            if server.previews:
                server.previews.closed()
                server.previews = None
        if self._chromium is not None:
            stack, self._chromium = self._chromium[0], None
            stack.close()


STACK = BrowserStack()


@pytest.fixture(scope="session")
def browser_stack(django_db_setup, artifacts_dir):
    """Turns on the sharing (BROWSER_MARKS asks for it); stops what is shared before the test database goes."""
    STACK.active, STACK.log_dir = True, artifacts_dir
    yield STACK
    STACK.close()
    STACK.active = False


def pytest_runtest_setup(item):
    """A test that is not a browser test gets the process without the shared servers and Chromium
    (no idle daphne or preview worker beside it, no Playwright loop in its thread)."""
    if STACK.active and item.get_closest_marker("browser") is None:
        STACK.close()


class SharedServer:
    """A browser test's handle on the shared daphne of its environment (BrowserStack.server): start()
    makes sure that one runs, stop() lets go of it (it keeps running for the next browser test)."""

    def __init__(self):
        self.env = {}  # extra environment, as AsgiServer.env takes it
        self.server = None

    @property
    def url(self):
        return self.server.url

    def start(self):
        self.server = STACK.server(self.env)
        return self

    def stop(self):
        self.server = None


def browser_server(log_path):
    """The daphne for a browser test on the test database (the test loads its own rows): in a browser
    test the shared one (SharedServer), elsewhere its own (AsgiServer, logging to `log_path`). Either
    way: set .env, start(), use .url, stop()."""
    return SharedServer() if STACK.active else AsgiServer(free_port(), log_path)


@contextlib.contextmanager
def demo_site(tmp_path, artifacts_dir, log_name, set_up_bound=120):
    """The demo scenario end to end: the built-in API server, the watchers (a Supervisor in this process)
    syncing it into the test database and publishing to Redis, daphne serving the pages.

    Yields {"api", "cluster", "server", "base", "shots"}; users are the test's to make (any time before
    they sign in). `set_up_bound` bounds each wait of the set-up on a loaded machine; it is not a figure.
    """
    from devcluster.testing import running_devcluster
    from inventory.models import Device
    from mirror.models import Cluster, SyncState
    from mirror.sync.runner import Supervisor

    shots = artifacts_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with running_devcluster("demo") as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = Cluster.objects.create(name="demo", kubeconfig=str(kubeconfig))
        supervisor = Supervisor(cluster_names=["demo"]).start()
        own_server = None if STACK.active else AsgiServer(free_port(), artifacts_dir / log_name)
        try:
            connected = SyncState.objects.filter(cluster=cluster, status=SyncState.Status.CONNECTED)
            wait_until(lambda: connected.count() >= 6, set_up_bound, "the watchers to connect")
            wait_until(lambda: Device.objects.filter(cluster=cluster).exists(), set_up_bound, "devices to sync")
            if own_server:
                own_server.start()
            server = own_server or STACK.server()
            yield {"api": api, "cluster": cluster, "server": server, "base": server.url, "shots": shots}
        finally:
            if own_server and own_server.proc:
                own_server.stop()
            supervisor.stop()


@pytest.fixture
def browser():
    """Chromium for one test; pages get a context each (new_page below), so cookies never leak between them."""
    with chromium() as launched:
        yield launched


def new_page(browser, base=None, username=None, password=None, viewport=None):
    """A page in a fresh context (its own cookies), signed in as `username` when given."""
    page = browser.new_context(viewport=viewport or {"width": 1400, "height": 900}).new_page()
    return log_in(page, base, username, password) if username else page


def log_in(page, base, username, password):
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    return page


def wait_live(page):
    """The page's websocket is connected (the live indicator is on)."""
    # A function, not an expression: Playwright evaluates expression strings with eval(), which the
    # pages' Content-Security-Policy refuses.
    page.wait_for_function("() => document.body.dataset.live === 'on'", timeout=10000)
