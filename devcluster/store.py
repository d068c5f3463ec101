"""In-memory object store with Kubernetes semantics (the devcluster's "etcd").

Stored objects are plain dicts and are never mutated once stored (copy on write):
readers such as list pages and watch streams can hold references without copying, and
an event keeps both the new object and the one it replaced, which is what lets the store
answer a list "as of" an older resourceVersion (continue tokens, resourceVersionMatch=Exact)
without a multi-version database.

No Django here: the server and the tests use this module directly.
"""

import bisect
import collections
import datetime
import random
import threading
import uuid

from .patching import PatchError, apply_patch
from .resources import RESOURCES, resource_info
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .store_utils import clone

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


class ApiError(Exception):
    """An error that the server turns into a `Status` object."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


class NotFound(ApiError, KeyError):
    def __init__(self, plural, name):
        super().__init__(
            404,
            "NotFound",
            f'{resource_info(plural).resource_label} "{name}" not found',
            {"name": name, "group": resource_info(plural).group, "kind": plural},
        )

    __str__ = Exception.__str__


class AlreadyExists(ApiError):
    def __init__(self, plural, name):
        super().__init__(
            409,
            "AlreadyExists",
            f'{resource_info(plural).resource_label} "{name}" already exists',
            {"name": name, "group": resource_info(plural).group, "kind": plural},
        )


class Conflict(ApiError):
    def __init__(self, plural, name, message=None):
        message = message or (
            f'Operation cannot be fulfilled on {resource_info(plural).resource_label} "{name}": '
            "the object has been modified; please apply your changes to the latest version and try again"
        )
        super().__init__(409, "Conflict", message, {"name": name, "group": resource_info(plural).group, "kind": plural})


class Expired(ApiError):
    def __init__(self, message):
        super().__init__(410, "Expired", message)


class Invalid(ApiError):
    def __init__(self, message, code=422, reason="Invalid"):
        super().__init__(code, reason, message)


class BadRequest(ApiError):
    def __init__(self, message):
        super().__init__(400, "BadRequest", message)


def now_rfc3339():
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet


def random_suffix(rng=random, n=5):
    return "".join(rng.choice(_NAME_SUFFIX_ALPHABET) for _ in range(n))


class Event:
    """One change: `obj` is the object after it, `prev` the object before (None for ADDED)."""

    __slots__ = ("rv", "plural", "type", "obj", "prev", "_line")

    def __init__(self, rv, plural, type_, obj, prev):
        self.rv = rv
        self.plural = plural
        self.type = type_
        self.obj = obj
        self.prev = prev
        self._line = None

    def __repr__(self):
        meta = (self.obj or {}).get("metadata", {})
        return f"<Event {self.type} {self.plural} {meta.get('namespace', '')}/{meta.get('name')} rv={self.rv}>"


def object_key(obj):
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Store:
    """Thread-safe object store keyed by plural resource name, then (namespace, name).

    One global resourceVersion counter like etcd's revision. `history_limit` bounds the
    event history; events dropped from it (or by `compact`) make older resourceVersions
    answer 410 Expired.
    """

    def __init__(self, history_limit=200_000):
        self.lock = threading.RLock()
        self._objects = {plural: {} for plural in RESOURCES}
        self._sorted_keys = {}
        self._rv = 0
        self._history = collections.deque()
        self._history_limit = history_limit
        self._compacted_rv = 0
        self._listeners = []
        self._snapshots = collections.OrderedDict()  # (plural, rv) -> (sorted keys, objects) for paging
        self._rng = random.Random()

    # -- bookkeeping -------------------------------------------------------------------

    @property
    def resource_version(self):
        return self._rv

    @property
    def compacted_rv(self):
        """Oldest resourceVersion a watch or an exact list can still start from."""
        return self._compacted_rv

    def add_listener(self, listener):
        """`listener(event)` is called under the store lock, in resourceVersion order."""
        with self.lock:
            self._listeners.append(listener)

    def remove_listener(self, listener):
        with self.lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _bucket(self, plural):
        try:
            return self._objects[plural]
        except KeyError:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({plural})") from None

    def _record(self, plural, type_, obj, prev):
        event = Event(self._rv, plural, type_, obj, prev)
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft().rv
        for listener in list(self._listeners):
            listener(event)
        return event

    def _next_rv(self):
        self._rv += 1
        return self._rv

    def _put(self, plural, obj, type_, prev):
        key = object_key(obj)
        bucket = self._objects[plural]
        if type_ == "DELETED":
            del bucket[key]
        else:
            bucket[key] = obj
        if prev is None or type_ == "DELETED":
            self._sorted_keys.pop(plural, None)
        return self._record(plural, type_, obj, prev)

    # -- reads -------------------------------------------------------------------------

    def get(self, plural, namespace, name, copy=True):
        """The object, or NotFound. copy=False returns the stored (read-only!) dict."""
        with self.lock:
            info = resource_info(plural)
            obj = self._bucket(plural).get((namespace or "" if info.namespaced else "", name))
            if obj is None:
                raise NotFound(plural, name)
            return clone(obj) if copy else obj

    def find(self, plural, namespace, name):
        """Like get() but None when missing."""
        try:
            return self.get(plural, namespace, name)
        except NotFound:
            return None

    def list(self, plural, namespace=None, label_selector=None, field_selector=None, copy=True):
        items, _rv = self.list_with_rv(plural, namespace, label_selector, field_selector, copy=copy)
        return items

    def list_with_rv(self, plural, namespace=None, label_selector=None, field_selector=None, copy=True):
        match = make_matcher(namespace, label_selector, field_selector)
        with self.lock:
            keys, objects = self._current_sorted(plural)
            items = [objects[k] for k in keys if match(objects[k])]
            rv = self._rv
        if copy:
            items = [clone(i) for i in items]
        return items, rv

    def count(self, plural):
        with self.lock:
            return len(self._bucket(plural))

    def _current_sorted(self, plural):
        bucket = self._bucket(plural)
        keys = self._sorted_keys.get(plural)
        if keys is None:
            keys = self._sorted_keys[plural] = sorted(bucket)
        return keys, bucket

    def state_at(self, plural, rv):
        """(sorted keys, {key: obj}) as the collection was at resourceVersion `rv`.

        Rebuilt by undoing the history newer than rv; cached because paging through
        a large list asks for the same state once per page.
        """
        with self.lock:
            if rv > self._rv:
                raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: {self._rv}")
            if rv == self._rv:
                return self._current_sorted(plural)
            if rv < self._compacted_rv:
                raise Expired(f"too old resource version: {rv} ({self._compacted_rv})")
            cached = self._snapshots.get((plural, rv))
            if cached is not None:
                self._snapshots.move_to_end((plural, rv))
                return cached
            objects = dict(self._bucket(plural))
            for event in reversed(self._history):
                if event.rv <= rv:
                    break
                if event.plural != plural:
                    continue
                key = object_key(event.obj)
                if event.prev is None:
                    objects.pop(key, None)
                else:
                    objects[key] = event.prev
            snapshot = (sorted(objects), objects)
            self._snapshots[(plural, rv)] = snapshot
            while len(self._snapshots) > 16:
                self._snapshots.popitem(last=False)
            return snapshot

    def list_page(self, plural, rv=None, after=None, limit=0, match=None):
        """One page of a list, consistent at resourceVersion rv (None = now).

        Returns (items, rv, last_key, more): `after` and `last_key` are (namespace, name)
        positions in key order, `more` says whether matching items remain after the page.
        Items are the stored (read-only) dicts.
        """
        match = match or (lambda obj: True)
        with self.lock:
            rv = self._rv if rv is None else rv
            keys, objects = self.state_at(plural, rv)
            start = bisect.bisect_right(keys, after) if after is not None else 0
            items, last_key, more = [], None, False
            for index in range(start, len(keys)):
                obj = objects.get(keys[index])
                if obj is None or not match(obj):
                    continue
                if limit and len(items) >= limit:
                    more = True
                    break
                items.append(obj)
                last_key = keys[index]
            return items, rv, last_key, more

    def events_since(self, plural, rv):
        """Events of `plural` newer than rv (caller holds the lock); Expired when compacted."""
        if rv < self._compacted_rv:
            raise Expired(f"too old resource version: {rv} ({self._compacted_rv})")
        out = []
        for event in reversed(self._history):
            if event.rv <= rv:
                break
            if event.plural == plural:
                out.append(event)
        out.reverse()
        return out

    # -- writes ------------------------------------------------------------------------

    def _prepare_new(self, plural, obj, copy=True):
        info = resource_info(plural)
        if copy:
            obj = clone(obj)
        else:
            obj = dict(obj, metadata=dict(obj.get("metadata") or {}))
        obj.setdefault("kind", info.kind)
        obj.setdefault("apiVersion", info.api_version)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + random_suffix(self._rng)
            else:
                raise Invalid(f"{info.kind}: metadata.name: Required value: name or generateName is required")
        if info.namespaced:
            if not meta.get("namespace"):
                raise Invalid(f'{info.kind} "{meta["name"]}": metadata.namespace: Required value')
        else:
            meta.pop("namespace", None)
        return obj

    def create(self, plural, obj, reset_status=False):
        """Create; keeps the given status unless reset_status (what a POST does)."""
        with self.lock:
            self._bucket(plural)
            obj = self._prepare_new(plural, obj)
            meta = obj["metadata"]
            if object_key(obj) in self._objects[plural]:
                raise AlreadyExists(plural, meta["name"])
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            if "spec" in obj:
                meta["generation"] = 1
            meta.pop("deletionTimestamp", None)
            if reset_status and resource_info(plural).has_status:
                obj.pop("status", None)
                if plural == "pods":
                    obj["status"] = {"phase": "Pending"}
            meta["resourceVersion"] = str(self._next_rv())
            self._put(plural, obj, "ADDED", None)
            return clone(obj)

    def update(self, plural, obj, subresource=None, prepare=None):
        """Replace (PUT). A metadata.resourceVersion in obj is a precondition.

        subresource=None keeps the stored status of kinds with a status subresource,
        subresource="status" changes only the status.
        """
        with self.lock:
            meta = obj.get("metadata") or {}
            current = self.get(plural, meta.get("namespace"), meta.get("name"), copy=False)
            want_rv = meta.get("resourceVersion")
            if want_rv and want_rv != current["metadata"]["resourceVersion"]:
                raise Conflict(plural, meta.get("name"))
            if meta.get("uid") and meta["uid"] != current["metadata"]["uid"]:
                raise Conflict(plural, meta.get("name"), _uid_message(meta["uid"], current))
            return self._replace(plural, current, clone(obj), subresource, prepare)

    def apply(self, plural, obj):
        """Create or replace the whole object, status included (a test/fixture helper)."""
        with self.lock:
            meta = obj.get("metadata") or {}
            info = resource_info(plural)
            key = (meta.get("namespace") or "" if info.namespaced else "", meta.get("name") or "")
            current = self._bucket(plural).get(key)
            if current is None:
                return self.create(plural, obj)
            new = clone(obj)
            new.setdefault("metadata", {}).pop("resourceVersion", None)
            return self._replace(plural, current, new, subresource="*")

    def patch(self, plural, namespace, name, body, patch_type, subresource=None, prepare=None):
        """PATCH with merge, strategic merge or JSON patch; see patching.py."""
        with self.lock:
            current = self.get(plural, namespace, name, copy=False)
            try:
                new = apply_patch(current, body, patch_type)
            except PatchError as exc:
                raise ApiError(exc.code, exc.reason, str(exc)) from None
            if isinstance(body, dict):
                pmeta = body.get("metadata") or {}
                if pmeta.get("resourceVersion") and pmeta["resourceVersion"] != current["metadata"]["resourceVersion"]:
                    raise Conflict(plural, name)
                if pmeta.get("uid") and pmeta["uid"] != current["metadata"]["uid"]:
                    raise Conflict(plural, name, _uid_message(pmeta["uid"], current))
            new_meta = new.setdefault("metadata", {})
            # the patched copy carries the current resourceVersion unless the patch changed it
            # (a JSON patch can); removing it means "no precondition"
            new_meta.setdefault("resourceVersion", current["metadata"]["resourceVersion"])
            if new_meta["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise Conflict(plural, name)
            return self._replace(plural, current, new, subresource, prepare)

    def _replace(self, plural, current, new, subresource, prepare=None):
        """`prepare(new, current)`: the API server's strategy for this write (drop, normalize,
        validate: validation.py), run on the object about to be stored; it may raise ApiError."""
        info = resource_info(plural)
        cmeta = current["metadata"]
        meta = new.setdefault("metadata", {})
        if meta.get("name") not in (None, cmeta["name"]) or (
            info.namespaced and meta.get("namespace") not in (None, cmeta.get("namespace"))
        ):
            raise BadRequest("the name or namespace of the object does not match the request")
        new.setdefault("kind", current.get("kind", info.kind))
        new.setdefault("apiVersion", current.get("apiVersion", info.api_version))
        if info.immutable_spec and subresource is None and new.get("spec") != current.get("spec"):
            raise Invalid(
                f'{info.kind}.{info.group or "core"} "{cmeta["name"]}" is invalid: '
                "spec: Invalid value: field is immutable"
            )
        if subresource == "status":
            # only .status moves; everything else stays as stored
            merged = dict(current)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            merged["metadata"] = clone(cmeta)
            new = merged
            meta = new["metadata"]
            if prepare is not None and "status" in new:
                new["status"] = clone(new["status"])  # prepare edits it; never the stored copy
                prepare(new, current)
        else:
            if info.has_status and subresource != "*":
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
            for field in (
                "uid",
                "creationTimestamp",
                "name",
                "namespace",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if field in cmeta:
                    meta[field] = cmeta[field]
            if cmeta.get("deletionTimestamp") is None:
                meta.pop("deletionTimestamp", None)
            generation = cmeta.get("generation")
            if generation is not None:
                meta["generation"] = generation + 1 if new.get("spec") != current.get("spec") else generation
            elif "spec" in new:
                meta["generation"] = 1
        if new == current or (_without_rv(new) == _without_rv(current)):
            return clone(current)  # a no-op write does not bump the resourceVersion
        meta["resourceVersion"] = str(self._next_rv())
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            meta.pop("finalizers", None)
            self._put(plural, new, "DELETED", current)
            return clone(new)
        self._put(plural, new, "MODIFIED", current)
        return clone(new)

    def delete(self, plural, namespace, name, preconditions=None):
        """Delete; with finalizers only marks deletionTimestamp. Returns the final object."""
        with self.lock:
            current = self.get(plural, namespace, name, copy=False)
            cmeta = current["metadata"]
            preconditions = preconditions or {}
            if preconditions.get("uid") and preconditions["uid"] != cmeta["uid"]:
                raise Conflict(plural, name, _uid_message(preconditions["uid"], current))
            if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != cmeta["resourceVersion"]:
                raise Conflict(
                    plural,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions['resourceVersion']}, ResourceVersion in object meta: {cmeta['resourceVersion']}",
                )
            new = dict(current)
            new["metadata"] = meta = dict(cmeta)
            meta["resourceVersion"] = str(self._next_rv())
            if cmeta.get("finalizers"):
                if cmeta.get("deletionTimestamp"):
                    self._rv -= 1  # already terminating: nothing changes
                    return clone(current)
                meta["deletionTimestamp"] = now_rfc3339()
                meta["deletionGracePeriodSeconds"] = 0
                self._put(plural, new, "MODIFIED", current)
            else:
                self._put(plural, new, "DELETED", current)
            return clone(new)

    def remove_finalizer(self, plural, namespace, name, finalizer):
        """Convenience for tests and churn: drop one finalizer (deletes a terminating object)."""
        with self.lock:
            current = self.get(plural, namespace, name, copy=False)
            finalizers = [f for f in current["metadata"].get("finalizers", []) if f != finalizer]
            new = clone(current)
            new["metadata"]["finalizers"] = finalizers
            if not finalizers:
                del new["metadata"]["finalizers"]
            return self._replace(plural, current, new, subresource=None)

    # -- bulk and maintenance --------------------------------------------------------

    def bulk_load(self, objects_by_plural, copy=True):
        """Create many objects quickly (one lock, no per-object copies back to the caller).

        Each object still gets its own resourceVersion and ADDED event, so open watches
        and resumed watches see them like any other creation. copy=False takes ownership of
        the given dicts (the caller must not modify them afterwards; they may share
        read-only sub-structures).
        """
        with self.lock:
            for plural, objs in objects_by_plural.items():
                bucket = self._bucket(plural)
                for obj in objs:
                    obj = self._prepare_new(plural, obj, copy=copy)
                    meta = obj["metadata"]
                    if object_key(obj) in bucket:
                        raise AlreadyExists(plural, meta["name"])
                    meta.setdefault("uid", str(uuid.uuid4()))
                    meta.setdefault("creationTimestamp", now_rfc3339())
                    if "spec" in obj:
                        meta.setdefault("generation", 1)
                    meta["resourceVersion"] = str(self._next_rv())
                    bucket[object_key(obj)] = obj
                    self._record(plural, "ADDED", obj, None)
                self._sorted_keys.pop(plural, None)
            return self._rv

    def compact(self, keep_last=0):
        """Forget event history (all but the newest keep_last events) like an etcd compaction."""
        with self.lock:
            while len(self._history) > keep_last:
                self._history.popleft()
            self._compacted_rv = self._history[0].rv - 1 if self._history else self._rv
            for key in [k for k in self._snapshots if k[1] < self._compacted_rv]:
                del self._snapshots[key]
            return self._compacted_rv

    def clear(self):
        """Delete every object, emitting DELETED events (e.g. before loading another scenario)."""
        with self.lock:
            for plural in RESOURCES:
                for key in list(self._objects[plural]):
                    obj = self._objects[plural][key]
                    new = dict(obj)
                    new["metadata"] = dict(obj["metadata"], resourceVersion=str(self._next_rv()))
                    self._put(plural, new, "DELETED", obj)


def _without_rv(obj):
    return {**obj, "metadata": {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}}


def _uid_message(want, current):
    return f"Precondition failed: UID in precondition: {want}, UID in object meta: {current['metadata']['uid']}"


def make_matcher(namespace=None, label_selector=None, field_selector=None):
    """A predicate for namespace + label selector + field selector (strings or parsed)."""
    try:
        labels = (
            parse_label_selector(label_selector) if isinstance(label_selector, (str, type(None))) else label_selector
        )
        fields = (
            parse_field_selector(field_selector) if isinstance(field_selector, (str, type(None))) else field_selector
        )
    except SelectorError as exc:
        raise BadRequest(str(exc)) from None
    if not namespace and labels is None and fields is None:
        return lambda obj: True

    def match(obj):
        meta = obj.get("metadata") or {}
        if namespace and meta.get("namespace") != namespace:
            return False
        if labels is not None and not labels(meta.get("labels") or {}):
            return False
        if fields is not None and not fields(obj):
            return False
        return True

    return match
