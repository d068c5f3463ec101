"""Test helpers: a running devcluster and clients for it.

Use from a test module or conftest with `pytest_plugins = ["devcluster.testing"]`, or call
`running_devcluster()` directly. No Django needed.
"""

import contextlib
import json

import pytest

from .scenario import load_scenario
from .server import DevCluster


@contextlib.contextmanager
def running_devcluster(scenario=None, **kwargs):
    """A started DevCluster (optionally seeded from a scenario), stopped afterwards."""
    kwargs.setdefault("bookmark_interval", 0.2)
    server = DevCluster(**kwargs)
    if scenario:
        load_scenario(server.store, scenario)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def raw_json(response):
    """Body of a `_preload_content=False` response as parsed JSON (keeps unknown fields)."""
    return json.loads(response.data)


@pytest.fixture
def devcluster():
    """An empty running devcluster."""
    with running_devcluster() as server:
        yield server


@pytest.fixture
def demo_devcluster():
    """A running devcluster loaded with the demo scenario."""
    with running_devcluster("demo") as server:
        yield server
