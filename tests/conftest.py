"""Shared test set-up. Area fixtures live in tests/<area>_fixtures.py and are registered here."""

import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.sync_fixtures"]  # registered here so its asserts are rewritten like the tests'
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture(scope="session")
def artifacts_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def pytest_report_header(config):
    db = os.environ.get("DATABASE_URL", "sqlite (embedded default)")
    return f"gpudash: DATABASE_URL={db.split('@')[-1]} REDIS_URL={os.environ.get('REDIS_URL', '(unset: in-memory)')}"
