"""Test data written through the watchers' own write path (mirror.sync.apply.apply_object), and users.

Shared by the hand-made fleets (tests/api_fixtures.py, tests/ui_fixtures.py) and the tests that want the
built-in demo scenario in the database without running an API server.
"""

import itertools

from django.contrib.auth.models import User

from mirror import roles
from mirror.sync.apply import apply_object
from mirror.sync.kinds import KINDS

# One counter for every hand-made object, so a later apply of the same object is always newer
# (the sync ignores an object whose resourceVersion does not move forward).
_resource_versions = itertools.count(100)
KIND_OF_PLURAL = {k.plural: k.kind for k in KINDS}
# Referenced objects first, so each apply finds what it points at (as after a watcher's initial lists).
SCENARIO_ORDER = (
    "namespaces",
    "nodes",
    "deviceclasses",
    "resourceslices",
    "devicetaintrules",
    "resourceclaimtemplates",
    "resourceclaims",
    "pods",
)
NOT_MIRRORED = {"events", "daemonsets"}  # read live (Pending checklist, readiness), never stored


def meta(name, namespace="", **extra):
    """Object metadata with a deterministic uid and a fresh resourceVersion."""
    out = {
        "name": name,
        "uid": f"uid-{namespace or 'cluster'}-{name}",
        "resourceVersion": str(next(_resource_versions)),
        "creationTimestamp": "2026-01-05T10:00:00Z",
    }
    if namespace:
        out["namespace"] = namespace
    out.update(extra)
    return out


def apply_all(cluster, objects):
    """Apply (kind, raw) pairs in order."""
    for kind, raw in objects:
        apply_object(cluster, kind, raw)


def load_scenario(cluster, scenario="demo"):
    """A devcluster scenario (by name or path) into `cluster`'s mirror, as the watchers would store it."""
    from devcluster.scenario import scenario_objects

    objects = scenario_objects(scenario)
    unknown = set(objects) - set(SCENARIO_ORDER) - NOT_MIRRORED
    assert not unknown, f"scenario {scenario!r} has kinds this loader does not apply: {sorted(unknown)}"
    apply_all(cluster, ((KIND_OF_PLURAL[plural], raw) for plural in SCENARIO_ORDER for raw in objects.get(plural, ())))
    return cluster


def make_user(username, role=None, namespaces=None, password=None):
    """A user with a password (default `pw-<username>`), optionally a role and a namespace scope."""
    user = User.objects.create_user(username, password=password or "pw-" + username)
    if role:
        roles.grant(user, role, namespaces)
    return user
