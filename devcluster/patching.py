"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Hand-written: strategic merge patch is Kubernetes-specific (no Python implementation
exists), and the other two are small enough that owning them lets errors carry the
apiserver's status codes (400 malformed, 422 "cannot apply", e.g. a failed `test`).
"""

from .store_utils import clone

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists merged by key under strategic merge patch (field name -> patchMergeKey), for the
# kinds served here. Lists not named here are replaced wholesale, as for atomic lists.
MERGE_KEYS = {
    "reservedFor": "uid",
    "ownerReferences": "uid",
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "resourceClaims": "name",
    "resourceClaimStatuses": "name",
    # (containerStatuses and initContainerStatuses are atomic lists: a patch replaces them; so are a
    # claim's status.devices.)
    "volumes": "name",
    "env": "name",
    "taints": "key",
    "tolerations": "key",
}
# Lists of scalars merged as sets.
PRIMITIVE_MERGE_LISTS = {"finalizers"}


class PatchError(Exception):
    def __init__(self, message, code=422, reason="Invalid"):
        super().__init__(message)
        self.code = code
        self.reason = reason


def apply_patch(current, body, patch_type):
    """A new object: `current` (never modified) with the patch applied."""
    patch_type = (patch_type or "").split(";")[0].strip()
    if patch_type == JSON_PATCH:
        if not isinstance(body, list):
            raise PatchError("json patch must be a list of operations", 400, "BadRequest")
        return json_patch(clone(current), body)
    if not isinstance(body, dict):
        raise PatchError(f"{patch_type or 'patch'} body must be a JSON object", 400, "BadRequest")
    if patch_type == MERGE_PATCH:
        return merge_patch(current, body)
    if patch_type in (STRATEGIC_MERGE_PATCH, ""):
        return strategic_merge(current, body)
    raise PatchError(f"unsupported patch type {patch_type!r}", 415, "UnsupportedMediaType")


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return clone(patch)
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target, patch, field=None):
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            drop = set(value or [])
            result[name] = [v for v in result.get(name) or [] if v not in drop]
            continue
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue  # ordering hints: order here is already the stored order
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key], key)
        elif isinstance(value, list) and key in PRIMITIVE_MERGE_LISTS:
            merged = list(result.get(key) or [])
            merged.extend(v for v in value if v not in merged)
            result[key] = merged
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = clone(value)
    return result


def _merge_keyed_list(current, patch_items, merge_key, field):
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch_items):
        return [clone(i) for i in patch_items if not (isinstance(i, dict) and i.get("$patch"))]
    result = [clone(i) for i in current]
    for item in patch_items:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(
                f"{field}: every element of a strategic merge patch list needs its merge key {merge_key!r}",
                400,
                "BadRequest",
            )
        index = next((n for n, cur in enumerate(result) if cur.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: clone(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge(result[index], item, field)
    return result


# -- JSON patch ----------------------------------------------------------------------


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"json patch path {path!r} must start with '/'", 400, "BadRequest")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc, parts, path):
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise PatchError(f"jsonpatch: doc is missing path: {path!r}")
    return doc


def _parent(doc, path):
    parts = _pointer(path)
    if not parts:
        raise PatchError("json patch on the document root is not supported", 400, "BadRequest")
    return _resolve(doc, parts[:-1], path), parts[-1]


def _add(doc, path, value):
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"jsonpatch add operation does not apply: index out of range in {path!r}")
    else:
        raise PatchError(f"jsonpatch add operation does not apply: doc is missing path: {path!r}")


def _remove(doc, path):
    parent, last = _parent(doc, path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError(f"jsonpatch remove operation does not apply: doc is missing path: {path!r}")


def json_patch(doc, operations):
    for n, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"json patch operation {n} needs 'op' and 'path'", 400, "BadRequest")
        kind, path = op["op"], op["path"]
        if kind == "add":
            _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _remove(doc, path)
            _add(doc, path, clone(op.get("value")))
        elif kind == "move":
            _add(doc, path, _remove(doc, op["from"]))
        elif kind == "copy":
            _add(doc, path, clone(_resolve(doc, _pointer(op["from"]), op["from"])))
        elif kind == "test":
            try:
                actual = _resolve(doc, _pointer(path), path)
            except PatchError:
                actual = object()
            if actual != op.get("value"):
                raise PatchError(f"Testing value {path} failed")
        else:
            raise PatchError(f"json patch operation {n}: unknown op {kind!r}", 400, "BadRequest")
    return doc
