"""The live websocket consumer over the real channel layer (Redis when REDIS_URL is set)."""

import asyncio
from urllib.parse import urlsplit, urlunsplit

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import AnonymousUser

from mirror.consumers import LiveConsumer, groups_for, parse_scope
from mirror.sync.publish import Change, group_messages
from tests.ui_fixtures import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def change(cluster=1, kind="ResourceClaim", namespace="team-a", name="c1", node="node-a", rv="5", event="MODIFIED"):
    return Change(cluster, "alpha", kind, event, namespace, name, f"uid-{name}", node, rv, "allocated")


async def _publish(*changes):
    layer = get_channel_layer()
    for group, message in group_messages(list(changes)).items():
        await layer.group_send(group, message)


async def _connect(user):
    comm = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    return comm, connected


def run(coro_fn, *args):
    return async_to_sync(coro_fn)(*args)


def test_anonymous_is_refused():
    async def scenario():
        comm, connected = await _connect(AnonymousUser())
        await comm.disconnect()
        return connected

    assert run(scenario) is False


def test_user_without_role_is_refused():
    user = make_user("norole", role=None)

    async def scenario():
        comm, connected = await _connect(user)
        await comm.disconnect()
        return connected

    assert run(scenario) is False


def test_subscribed_kinds_are_forwarded_once_and_others_not():
    user = make_user("alice")

    async def scenario():
        comm, connected = await _connect(user)
        assert connected
        await comm.send_json_to({"subscribe": {"cluster": 1, "kind": ["ResourceClaim"]}})
        ack = await comm.receive_json_from(timeout=2)
        await _publish(change(kind="Pod", name="p1"), change(name="c1"))
        got = await comm.receive_json_from(timeout=2)
        # The same change again (a replay on another group) is not forwarded twice.
        await _publish(change(name="c1"))
        silent = await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()
        return ack, got, silent

    ack, got, silent = run(scenario)
    assert ack["type"] == "subscribed" and ack["groups"] == ["gpudash.c1.k.ResourceClaim"]
    assert got["type"] == "changes" and [(c["kind"], c["name"]) for c in got["changes"]] == [("ResourceClaim", "c1")]
    assert silent


def test_node_scope_and_other_clusters():
    user = make_user("alice")

    async def scenario():
        comm, _ = await _connect(user)
        await comm.send_json_to({"subscribe": {"cluster": 1, "node": "node-b"}})
        await comm.receive_json_from(timeout=2)
        await _publish(
            change(cluster=2, node="node-b", name="elsewhere"),
            change(node="node-a", name="a"),
            change(node="node-b", name="b", kind="ResourceSlice", namespace=""),
        )
        got = await comm.receive_json_from(timeout=2)
        await comm.disconnect()
        return got

    got = run(scenario)
    assert [c["name"] for c in got["changes"]] == ["b"]


def test_namespace_scoped_user_gets_redacted_changes_from_other_namespaces():
    user = make_user("bob", namespaces=["team-a"])

    async def scenario():
        comm, _ = await _connect(user)
        await comm.send_json_to({"subscribe": {"cluster": None, "kind": ["ResourceClaim"]}})
        await comm.receive_json_from(timeout=2)
        await _publish(
            change(namespace="team-a", name="mine", rv="7"), change(namespace="team-b", name="secret", rv="8")
        )
        got = []
        while len(got) < 2:
            got += (await comm.receive_json_from(timeout=2))["changes"]
        await comm.disconnect()
        return got

    got = run(scenario)
    mine = [c for c in got if c.get("name") == "mine"]
    other = [c for c in got if c.get("redacted")]
    assert len(mine) == 1 and len(other) == 1
    assert "secret" not in str(other) and "team-b" not in str(other)
    assert other[0]["kind"] == "ResourceClaim"


def test_bad_subscriptions_get_an_error():
    user = make_user("alice")

    async def scenario():
        comm, _ = await _connect(user)
        await comm.send_json_to({"hello": 1})
        first = await comm.receive_json_from(timeout=2)
        await comm.send_json_to({"subscribe": {"cluster": "x1"}})
        second = await comm.receive_json_from(timeout=2)
        await comm.disconnect()
        return first, second

    first, second = run(scenario)
    assert first["type"] == "error" and "subscribe" in first["error"]
    assert second["type"] == "error" and "cluster must be an id" in second["error"]


def test_groups_for_uses_the_narrowest_groups():
    assert groups_for(parse_scope({"cluster": None})) == ["gpudash.all"]
    assert groups_for(parse_scope({"cluster": 3})) == ["gpudash.c3"]
    assert groups_for(parse_scope({"cluster": 3, "kind": ["Pod", "ResourceClaim"]})) == [
        "gpudash.c3.k.Pod",
        "gpudash.c3.k.ResourceClaim",
    ]
    assert groups_for(parse_scope({"cluster": 3, "namespace": "team-a"})) == ["gpudash.c3.ns.team-a"]
    assert groups_for(parse_scope({"cluster": "3", "node": "n1", "kind": ["Pod"]})) == ["gpudash.c3.n.n1"]


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="only the Redis layer is shared between processes")
def test_dashboards_on_other_redis_databases_do_not_hear_each_other():
    """Redis pub/sub ignores the database number; the layer's prefix names it, so a dashboard (or a test
    run) using another database of the same Redis server never receives this one's changes."""
    from channels_redis.pubsub import RedisPubSubChannelLayer

    ours = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]
    db = urlsplit(ours["hosts"][0]).path.strip("/") or "0"
    other_db = "1" if db != "1" else "2"
    assert ours["prefix"].endswith("db" + db)
    other = RedisPubSubChannelLayer(
        hosts=[urlunsplit(urlsplit(ours["hosts"][0])._replace(path="/" + other_db))],
        prefix=ours["prefix"][: -len(db)] + other_db,
    )
    group = "gpudash.c1.k.ResourceClaim"

    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await other.group_send(group, {"type": "kube.changes", "changes": [{"name": "foreign"}]})
        await layer.group_send(group, {"type": "kube.changes", "changes": [{"name": "ours"}]})
        first = await asyncio.wait_for(layer.receive(channel), 5)
        try:
            extra = await asyncio.wait_for(layer.receive(channel), 0.5)
        except TimeoutError:
            extra = None
        await layer.group_discard(group, channel)
        await other.flush()
        return first, extra

    first, extra = run(scenario)
    assert first["changes"] == [{"name": "ours"}] and extra is None
