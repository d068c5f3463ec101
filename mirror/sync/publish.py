"""Change messages on the channel layer for the live views (format: docs/sync.md).

Every committed change is published to the groups a view may listen to: everything, one cluster,
one kind of a cluster, one node of a cluster, one namespace of a cluster. Changes are coalesced for
about 100 ms and sent as one message per group, from a background thread so the watchers never wait
on the channel layer.
"""

import asyncio
import functools
import hashlib
import logging
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

MESSAGE_TYPE = "kube.changes"
GROUP_ALL = "gpudash.all"
_GROUP_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_GROUP_MAX = 99  # channels rejects group names of 100 characters or more
# A flush with more changes than this sends one RELIST per (cluster, kind) to the wide groups instead
# of every change: a view listening to a whole cluster reloads rather than replays thousands of rows.
MAX_CHANGES_PER_MESSAGE = 500


@functools.lru_cache(maxsize=100_000)  # node and namespace names repeat in every flush
def _safe(prefix, value):
    """`prefix` + a group-safe form of `value`; long or unusual values are hashed so names stay unique."""
    cleaned = _GROUP_UNSAFE.sub("_", value)
    name = prefix + cleaned
    if cleaned != value or len(name) > _GROUP_MAX:
        digest = hashlib.sha1(value.encode()).hexdigest()[:12]
        keep = _GROUP_MAX - len(prefix) - len(digest) - 1
        name = f"{prefix}{cleaned[:keep]}-{digest}"
    return name[:_GROUP_MAX]


def cluster_group(cluster_id):
    return f"gpudash.c{int(cluster_id)}"


def kind_group(cluster_id, kind):
    return _safe(f"gpudash.c{int(cluster_id)}.k.", kind)


def node_group(cluster_id, node):
    return _safe(f"gpudash.c{int(cluster_id)}.n.", node)


def namespace_group(cluster_id, namespace):
    return _safe(f"gpudash.c{int(cluster_id)}.ns.", namespace)


@dataclass
class Change:
    cluster: int
    cluster_name: str
    kind: str
    event: str  # ADDED, MODIFIED, DELETED, RELIST
    namespace: str = ""
    name: str = ""
    uid: str = ""
    node: str = ""
    resourceVersion: str = ""
    state: str | None = None

    def groups(self):
        groups = [GROUP_ALL, cluster_group(self.cluster), kind_group(self.cluster, self.kind)]
        if self.node:
            groups.append(node_group(self.cluster, self.node))
        if self.namespace:
            groups.append(namespace_group(self.cluster, self.namespace))
        return groups

    def as_message_item(self):
        return dict(vars(self))  # flat fields: dataclasses.asdict's deep copy is the cost of a busy flush


def group_messages(changes):
    """{group: message} for a batch of changes (what one flush sends)."""
    by_group = defaultdict(list)
    for change in changes:
        item = change.as_message_item()  # once per change, shared by its five groups' messages
        for group in change.groups():
            by_group[group].append((change, item))
    messages = {}
    for group, pairs in by_group.items():
        if len(pairs) > MAX_CHANGES_PER_MESSAGE:
            items = [c.as_message_item() for c in _relist_summary([change for change, _ in pairs])]
        else:
            items = [item for _, item in pairs]
        messages[group] = {"type": MESSAGE_TYPE, "changes": items}
    return messages


async def send_messages(layer, messages):
    """Send {group: message}; returns how many were sent (on the Redis pub/sub layer: to groups
    somebody listens to). A failure is logged per group (or per shard) and never stops the sync."""
    if _pipelined_layer(layer):
        return await _publish_pipelined(layer, messages)
    sent = 0
    for group, message in messages.items():
        try:
            await layer.group_send(group, message)
            sent += 1
        except Exception:  # a full channel or a Redis hiccup must not stop the sync
            log.warning("publishing to %s failed", group, exc_info=True)
    return sent


def _pipelined_layer(layer):
    from channels_redis.pubsub import RedisPubSubChannelLayer

    return isinstance(layer, RedisPubSubChannelLayer)


async def _publish_pipelined(layer, messages):
    """The pub/sub layer's group_send for a whole flush: the groups somebody listens to, in one Redis
    pipeline per shard.

    Written by hand because the channel layer API sends one group at a time: a busy flush names
    ~1,700 groups (a node and a namespace group per changed object), each group_send is an awaited
    round trip costing the sync process as much CPU as applying the events, and most
    of those groups have no listener (a node group has one only while someone views that node).
    PUBSUB NUMSUB asks Redis which channels have subscribers, in one command. A page that subscribes
    between that answer and the publish misses this flush, as it misses any change made before it
    subscribed: pages load their rows first and then replay what arrives. It uses the layer's own
    channel names, shard choice and serializer (channels_redis 4.3, pinned; tests/mirror/test_publish.py
    checks subscribers receive what group_send would deliver).
    """
    loop_layer = layer._get_layer()
    by_shard = defaultdict(dict)
    for group, message in messages.items():
        channel = loop_layer._get_group_channel_name(group)
        by_shard[loop_layer._get_shard(channel)][channel] = message
    sent = 0
    for shard, by_channel in by_shard.items():
        try:
            async with shard._lock:
                shard._ensure_redis()
                counts = await shard._redis.pubsub_numsub(*by_channel)
                listened = [name.decode() if isinstance(name, bytes) else name for name, count in counts if count]
                if listened:
                    async with shard._redis.pipeline(transaction=False) as pipe:
                        for channel in listened:
                            pipe.publish(channel, layer.serialize(by_channel[channel]))
                        await pipe.execute()
            sent += len(listened)
        except Exception:  # a Redis hiccup must not stop the sync
            log.warning("publishing %d change messages failed", len(by_channel), exc_info=True)
    return sent


def _relist_summary(items):
    seen = {}
    for c in items:
        seen.setdefault((c.cluster, c.kind), Change(c.cluster, c.cluster_name, c.kind, "RELIST"))
    return list(seen.values())


class Publisher:
    """Collects changes and sends them from one background thread, coalesced per interval."""

    def __init__(self, interval=None):
        self.interval = interval if interval is not None else settings.GPUDASH_SYNC.get("PUBLISH_COALESCE_SECONDS", 0.1)
        self._pending = []
        self._lock = threading.Lock()
        # Held while a batch is taken and sent: flush() waits for a send in flight, so that after it
        # returns every change published before it has gone out.
        self._sending = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        self._loop = None  # an event loop owned by someone else (the web server's) to send on, if set
        self.sent_messages = 0

    def use_event_loop(self, loop):
        """Send on this running loop (in-process mode: the in-memory layer lives in the web server's loop)."""
        self._loop = loop

    def publish(self, changes):
        if not changes:
            return
        with self._lock:
            self._pending.extend(changes)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gpudash-publisher", daemon=True)
                self._thread.start()
        self._wake.set()

    def flush(self, timeout=5.0):
        """Send what is pending now, after any send in flight (tests and shutdown)."""
        with self._sending:
            with self._lock:
                pending, self._pending = self._pending, []
            if pending:
                self._send(pending, timeout)

    def _run(self):
        own_loop = asyncio.new_event_loop()
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                time.sleep(self.interval)  # coalesce what arrives meanwhile
                with self._sending:
                    with self._lock:
                        pending, self._pending = self._pending, []
                    if pending:
                        self._send(pending, 30.0, own_loop)
        finally:  # pragma: no cover - daemon thread dies with the process
            own_loop.close()

    def _send(self, changes, timeout, own_loop=None):
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        messages = group_messages(changes)
        try:
            if self._loop is not None and self._loop.is_running():
                sent = asyncio.run_coroutine_threadsafe(send_messages(layer, messages), self._loop).result(timeout)
            elif own_loop is not None:
                sent = own_loop.run_until_complete(send_messages(layer, messages))
            else:
                sent = asyncio.run(send_messages(layer, messages))
            self.sent_messages += sent
        except Exception:
            log.warning("publishing %d changes failed", len(changes), exc_info=True)


publisher = Publisher()


def publish_on_commit(changes):
    """Publish `changes` once the current transaction commits (immediately outside one)."""
    if changes:
        changes = list(changes)
        transaction.on_commit(lambda: publisher.publish(changes))
