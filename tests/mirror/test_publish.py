"""Change messages as the sync sends them: one pipelined flush on the Redis pub/sub layer delivers what
group_send would to every group somebody listens to (and skips the others); a Redis that is down
loses the flush with a warning, never the sync."""

import asyncio
import logging

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings as django_settings

from mirror.sync.publish import MAX_CHANGES_PER_MESSAGE, Change, group_messages, send_messages

needs_redis = pytest.mark.skipif(not django_settings.REDIS_URL, reason="the production layer (Redis pub/sub)")


def change(i, node=None, namespace="team-a"):
    return Change(
        1,
        "alpha",
        "ResourceClaim",
        "MODIFIED",
        namespace,
        f"c{i}",
        f"uid-{i}",
        node or f"node-{i}",
        str(100 + i),
        "reserved",
    )


def test_each_change_goes_to_its_groups_once_and_wide_groups_summarise():
    changes = [change(i, node="node-a" if i < 2 else None) for i in range(MAX_CHANGES_PER_MESSAGE + 1)]
    messages = group_messages(changes)
    assert [c["name"] for c in messages["gpudash.c1.n.node-a"]["changes"]] == ["c0", "c1"]
    assert messages["gpudash.c1.n.node-7"]["changes"] == [changes[7].as_message_item()]
    # More changes than one message carries: the cluster-wide groups get a RELIST per kind instead.
    for group in ("gpudash.all", "gpudash.c1", "gpudash.c1.k.ResourceClaim", "gpudash.c1.ns.team-a"):
        assert [(c["kind"], c["event"]) for c in messages[group]["changes"]] == [("ResourceClaim", "RELIST")]
    item = changes[3].as_message_item()
    assert item == {
        "cluster": 1,
        "cluster_name": "alpha",
        "kind": "ResourceClaim",
        "event": "MODIFIED",
        "namespace": "team-a",
        "name": "c3",
        "uid": "uid-3",
        "node": "node-3",
        "resourceVersion": "103",
        "state": "reserved",
    }
    item["name"] = "changed"
    assert changes[3].name == "c3"  # the item is a copy


@needs_redis
@pytest.mark.django_db
def test_a_pipelined_flush_delivers_what_group_send_would():
    layer = get_channel_layer()
    assert isinstance(layer, RedisPubSubChannelLayer)  # the production layer takes the pipelined path
    changes = [change(i, node="node-a" if i % 2 else "node-b", namespace="team-b") for i in range(6)]
    messages = group_messages(changes)
    watched = ["gpudash.c1.n.node-a", "gpudash.c1.ns.team-b", "gpudash.c1.k.ResourceClaim"]

    async def scenario():
        channels = {}
        for group in watched:
            channels[group] = await layer.new_channel()
            await layer.group_add(group, channels[group])
        sent = await send_messages(layer, messages)
        got = {group: await asyncio.wait_for(layer.receive(channel), 5) for group, channel in channels.items()}
        try:  # one message per group and flush, nothing more
            extra = await asyncio.wait_for(layer.receive(channels["gpudash.c1.n.node-a"]), 0.3)
        except TimeoutError:
            extra = None
        for group, channel in channels.items():
            await layer.group_discard(group, channel)
        return sent, got, extra

    sent, got, extra = async_to_sync(scenario)()
    assert len(messages) == 2 + 3 + 1  # two nodes; all, cluster, kind; one namespace
    assert sent == len(watched)  # only the groups somebody listens to go out
    assert extra is None
    for group in watched:
        assert got[group] == messages[group]
    assert [c["name"] for c in got["gpudash.c1.n.node-a"]["changes"]] == ["c1", "c3", "c5"]


@needs_redis
def test_a_flush_to_a_redis_that_is_down_is_logged_and_the_sync_goes_on(caplog):
    layer = RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:1/0"], prefix="gpudash.down")
    with caplog.at_level(logging.WARNING, logger="mirror.sync.publish"):
        sent = async_to_sync(send_messages)(layer, group_messages([change(1)]))
    assert sent == 0
    assert "publishing 5 change messages failed" in caplog.text  # all, cluster, kind, node, namespace
