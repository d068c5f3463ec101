"""The live-updates websocket (/ws/live/): forwards the watchers' change messages to a page.

The page sends {"subscribe": {"cluster": id|null, "kind": [...], "node": name, "namespace": ns}};
the consumer joins the narrowest groups mirror/sync/publish.py sends to, filters what arrives
by the same scope, redacts changes outside the user's namespaces, and forwards {"type": "changes", ...}.
A new subscribe replaces the previous one. Anonymous connections and users without a role are
refused at the handshake (so are pages of other origins: mirror/ws_origin.py). A namespace-scoped
user may not subscribe to another namespace, and a frame that is not JSON, or not a valid scope, gets
an error frame; neither closes the socket. Only a frame over MAX_FRAME does: an error frame, then close
code 1009 ("message too big").
"""

from collections import OrderedDict

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from mirror import roles
from mirror.bounded import shown
from mirror.sync.publish import GROUP_ALL, cluster_group, kind_group, namespace_group, node_group

DEDUP_WINDOW = 2048  # recent (cluster, kind, uid, rv, event) keys; a change sent to two joined groups is forwarded once
MAX_FRAME = 16 * 1024  # characters (or bytes) of one client frame; a scope is a few hundred
CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process
CLUSTER_ID_MAX = 2**63 - 1  # a database id
# Kubernetes' own limits: a node name is a DNS subdomain, a namespace a DNS label, a kind a short word.
NAME_MAX = {"node": 253, "namespace": 63, "kind": 63}
KINDS_MAX = 20


class ScopeError(ValueError):
    pass


def _cluster_id(value):
    """A cluster id (a positive integer, or its decimal string) or None; anything else is a ScopeError."""
    if value in (None, "", "all"):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CLUSTER_ID_MAX:
        raise ScopeError(f"cluster must be an id or null, not {shown(value)}")
    return value


def _name(field, value):
    """A node, namespace or kind name: a string Kubernetes could hold (its length, valid unicode)."""
    if not isinstance(value, str):
        raise ScopeError(f"{field} must be a string, not {shown(value)}")
    if len(value) > NAME_MAX[field]:
        raise ScopeError(f"{field} is {len(value):,} characters long; Kubernetes allows at most {NAME_MAX[field]}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (\ud800 in the JSON) is no text at all
        raise ScopeError(f"{field} is not valid unicode (a lone surrogate)") from None
    return value


def parse_scope(data):
    """Validated subscription scope from the client's message."""
    if not isinstance(data, dict):
        raise ScopeError("subscribe must be an object")
    kinds = data.get("kind") or []
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, list) or len(kinds) > KINDS_MAX or not all(isinstance(k, str) and k for k in kinds):
        raise ScopeError(f"kind must be a list of at most {KINDS_MAX} kind names")
    return {
        "cluster": _cluster_id(data.get("cluster")),
        "kind": sorted({_name("kind", k) for k in kinds}),
        "node": _name("node", data.get("node") or ""),
        "namespace": _name("namespace", data.get("namespace") or ""),
    }


def groups_for(scope):
    """The fewest groups that carry every change the scope wants."""
    cid = scope["cluster"]
    if cid is None:
        return [GROUP_ALL]
    if scope["node"]:
        return [node_group(cid, scope["node"])]
    if scope["namespace"] and not scope["kind"]:
        return [namespace_group(cid, scope["namespace"])]
    if scope["kind"]:
        return [kind_group(cid, k) for k in scope["kind"]]
    return [cluster_group(cid)]


def wanted(change, scope):
    """Does this change belong to the subscribed scope?"""
    if scope["cluster"] is not None and change.get("cluster") != scope["cluster"]:
        return False
    if scope["kind"] and change.get("kind") not in scope["kind"]:
        return False
    if scope["node"] and change.get("event") != "RELIST" and change.get("node") != scope["node"]:
        return False
    ns = change.get("namespace") or ""
    if scope["namespace"] and ns and ns != scope["namespace"]:
        return False
    return True


# What a change outside the user's namespaces keeps: enough for a page to refresh (device states on
# shared nodes), nothing that says which claim or pod, or where (no name, uid, node, version, state).
REDACTED_FIELDS = ("cluster", "cluster_name", "kind", "event")


def redact(change, visible):
    """The change as this user may see it: outside their namespaces only that *something* changed."""
    ns = change.get("namespace") or ""
    if visible is None or not ns or ns in visible:
        return change
    return {**{k: change.get(k) for k in REDACTED_FIELDS}, "redacted": True}


class LiveConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if (
            user is None
            or not user.is_authenticated
            or not await database_sync_to_async(roles.has_role)(user, roles.VIEWER)
        ):
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        self.visible = await database_sync_to_async(roles.visible_namespaces)(user)
        self.sub = None
        self.joined = []
        self.recent = OrderedDict()
        await self.accept()

    async def disconnect(self, code):
        await self._leave()

    async def _leave(self):
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """A frame that is not JSON text is answered with an error frame; the socket stays open. A frame
        over MAX_FRAME is answered too, then the socket is closed: nothing of it is echoed."""
        size = len(text_data if text_data is not None else bytes_data or b"")
        if size > MAX_FRAME:
            await self.send_json(
                {"type": "error", "error": f"frame of {size:,} characters is over the limit of {MAX_FRAME:,}; closing"}
            )
            await self.close(code=CLOSE_TOO_BIG)
            return
        if text_data is None:
            await self.send_json({"type": "error", "error": "expected a JSON text frame, got a binary frame"})
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; RecursionError: absurd nesting
            await self.send_json(
                {
                    "type": "error",
                    "error": f"not JSON: {exc}" if isinstance(exc, ValueError) else "not JSON: nested too deeply",
                }
            )
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content, **kwargs):
        if not isinstance(content, dict) or "subscribe" not in content:
            await self.send_json({"type": "error", "error": 'expected {"subscribe": {...}}'})
            return
        try:
            scope = parse_scope(content["subscribe"])
        except ScopeError as exc:
            await self.send_json({"type": "error", "error": str(exc)})
            return
        if scope["namespace"] and self.visible is not None and scope["namespace"] not in self.visible:
            # Refused like a read, before anything is joined: the same answer whether the namespace exists.
            await self.send_json({"type": "error", "error": f"namespace {scope['namespace']} is outside your scope"})
            return
        await self._leave()
        self.sub = scope
        for group in groups_for(scope):
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)
        await self.send_json({"type": "subscribed", "scope": scope, "groups": self.joined})

    async def kube_changes(self, event):
        if self.sub is None:
            return
        out = []
        for change in event.get("changes") or []:
            key = (
                change.get("cluster"),
                change.get("kind"),
                change.get("uid"),
                change.get("resourceVersion"),
                change.get("event"),
            )
            if change.get("event") != "RELIST" and key in self.recent:
                continue
            self.recent[key] = True
            if len(self.recent) > DEDUP_WINDOW:
                self.recent.popitem(last=False)
            if wanted(change, self.sub):
                out.append(redact(change, self.visible))
        if out:
            await self.send_json({"type": "changes", "changes": out})
