"""`make test` runs the suite with PostgreSQL, REDIS_URL and Debian's chromium. The browser, Celery-worker and
lease-takeover tests skip themselves without those parts (so a laptop without chromium can still run the
rest); this check makes the full run fail loudly instead of passing with them silently skipped."""

import os

import pytest
from django.conf import settings
from django.db import connection

from tests.browser import CHROMIUM

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="only the full run (REDIS_URL set) must have every part")


def test_the_full_run_has_every_part_the_skippable_tests_need():
    assert connection.vendor == "postgresql", "the Celery and lease tests share a server database with subprocesses"
    assert os.environ.get("DATABASE_URL", "").startswith("postgres")
    assert os.path.exists(CHROMIUM), f"the browser tests need Debian's chromium at {CHROMIUM}"
