"""Shared test set-up. Area fixtures live in tests/<area>_fixtures.py and are registered here."""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

pytest_plugins = [
    "tests.sync_fixtures",
    "tests.browser",
]  # registered here so their asserts are rewritten like the tests'
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
REDIS_DATABASES = 16  # redis-server's default `databases`
# No preview warm-up thread in the servers tests start (they inherit this) nor in this process (below);
# the tests of the warm-up turn it on themselves.
os.environ["GPUDASH_PREVIEW_WARM_UP"] = "0"


def pytest_configure(config):
    from django.conf import settings

    settings.GPUDASH_PREVIEW_WARM_UP = False  # the settings were read before this file
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        _flush_postgres_by_delete()
    if getattr(config.option, "dist", "no") == "loadfile":
        # xdist would queue the files by number of tests, most first: the one-test browser files, the
        # longest of all, came last, and the run ended on one worker finishing them. The files go in
        # the order pytest_collection_modifyitems gives instead.
        config.option.loadscopereorder = False


def _file_weight(items):
    """0: a browser file (the longest: a server, a cluster, Chromium); 1: a slow file or one using the
    database; 2: the rest (the quick engine tests). The browser files run beside each other, as they did
    at the end of xdist's own order, not beside the files that time /healthz."""
    if any(item.get_closest_marker("browser") for item in items):
        return 0
    db = ("db", "transactional_db", "django_db_setup")
    if any(
        item.get_closest_marker("slow")
        or item.get_closest_marker("django_db")
        or any(f in item.fixturenames for f in db)
        for item in items
    ):
        return 1
    return 2


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`), the longest files (the browser files) first and the quick engine
    tests last, so the two workers end together: what one worker still has at the end is short.
    A file's tests stay together and in their order."""
    if not hasattr(config, "workerinput"):
        return
    by_file = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::")[0], []).append(item)
    files = sorted(by_file.values(), key=_file_weight)  # stable: collection order within a weight
    items[:] = [item for file_items in files for item in file_items]


def _flush_postgres_by_delete():
    """Empty the tables after a transactional test with DELETE, not TRUNCATE.

    Django's flush (what django_db(transaction=True) runs after each test) truncates every table in one
    statement; on PostgreSQL that makes new files for each of the ~45 tables and their indexes: 0.14 s a
    test on a quiet machine, 1-2 s on a busy one, against 15-80 ms to DELETE the few rows a test leaves. The same rows
    go and the sequences are kept, as with the plain TRUNCATE. Django makes every foreign key DEFERRABLE
    INITIALLY DEFERRED, so the deletes can run in any order inside flush's one transaction (checked at
    commit, when the referencing rows are gone too). Flushes asked to reset sequences or cascade keep
    Django's own statement."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        deletes = [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};" for t in tables]
        return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

    DatabaseOperations.sql_flush = sql_flush


@pytest.fixture(scope="session")
def in_process_previews(django_db_setup, django_db_blocker, tmp_path_factory):
    """Preview workers for the views this process runs through Django's test client: with the Celery
    backend (REDIS_URL set) a `preview` queue worker on this run's database; the embedded default's
    local pool starts itself on first use. The tests using it need committed rows
    (django_db(transaction=True)): a worker process cannot see a test's open transaction."""
    from django.conf import settings

    from .browser import PreviewWorkers, subprocess_env

    if settings.GPUDASH_PREVIEW_SERVICE["BACKEND"] != "celery":
        yield None
        return
    with django_db_blocker.unblock():
        workers = PreviewWorkers(subprocess_env(), tmp_path_factory.mktemp("previews") / "preview-worker.log").start()
    yield workers
    workers.stop()


PREVIEW_WORKER_MARKS = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("in_process_previews")]


def runs_previews(test):
    """PREVIEW_WORKER_MARKS for one test of a module whose other tests keep the faster rolled-back database."""
    for mark in reversed(PREVIEW_WORKER_MARKS):
        test = mark(test)
    return test


@pytest.fixture(scope="session")
def artifacts_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(autouse=True)
def stop_debounce_timers():
    """After each test, the in-process debounced runs it asked for (mirror/debounce.py, the embedded
    default's timer threads) are cancelled, or waited for when running: left alone, one fires seconds
    later on the next test's rows or, at the end of the run, on a test database that is gone."""
    yield
    from mirror import debounce

    debounce.stop_pending()


@pytest.fixture(autouse=True)
def fast_password_hashing(request, settings):
    """MD5 instead of PBKDF2's million rounds (0.5 s of CPU per user made or password checked, and the
    suite makes hundreds). Not for the browser tests: their users sign in through a server subprocess,
    which keeps the real hashers and could not check an MD5 hash."""
    if not request.node.get_closest_marker("browser"):
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_report_header(config):
    db = os.environ.get("DATABASE_URL", "sqlite (embedded default)")
    return f"gpudash: DATABASE_URL={db.split('@')[-1]} REDIS_URL={os.environ.get('REDIS_URL', '(unset: in-memory)')}"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """Under pytest-xdist (`make test` runs `-n 2`) each worker gets its own Redis database and data directory.

    pytest-django gives each worker its own test database (a _gwN suffix), but Redis is shared by name:
    one worker's `celery worker` would take the other's tasks, a purge would drop them, and its Stuck-claim
    debounce keys would collide. The settings read REDIS_URL when Django starts in the worker, before any
    conftest runs, so the value goes into the worker's environment here, in the controller, before the
    worker process is made; the servers and workers a test starts inherit it.
    """
    redis_url = os.environ.get("REDIS_URL")
    data_dir = Path(os.environ.get("GPUDASH_DATA_DIR") or ROOT / ".data")
    for spec in specs:
        n = int(spec.id.removeprefix("gw"))
        if redis_url:
            parts = urlsplit(redis_url)
            db = int(parts.path.strip("/") or 0) + n
            if db >= REDIS_DATABASES:
                raise pytest.UsageError(
                    f"worker {spec.id} would need Redis database {db}: use a lower one in REDIS_URL or fewer workers"
                )
            spec.env["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{db}"))
        spec.env["GPUDASH_DATA_DIR"] = str(data_dir / f"xdist-{spec.id}")
