"""Shape checks of what users hand in: a wrong type is an InputError naming the path
("document 1 (ResourceClaim x): spec.devices.requests[0].selectors: must be a list"), not a crash
deep inside the engine.

Hand-written rather than a JSON Schema validator: the engine reads a few dozen fields, a table of
them gives Kubernetes-style paths in the messages, and the engine stays free of extra dependencies.
Only the fields the engine reads are checked; others pass through untouched, and null counts as
absent (as in Kubernetes).
"""

from .errors import InputError, shown
from .limits import MAX_DEPTH


class MapOf:
    """An object with arbitrary keys whose values all have one shape (labels, resource limits)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


QUANTITY = (str, int, float)
SELECTOR = {"cel": {"expression": str}}
VARIANT = {
    "name": str,
    "deviceClassName": str,
    "selectors": [SELECTOR],
    "allocationMode": str,
    "count": int,
    "adminAccess": bool,
    "tolerations": [dict],
    "capacity": {"requests": MapOf(QUANTITY)},
}
REQUEST = {"name": str, "exactly": VARIANT, "firstAvailable": [VARIANT], "deviceClassName": str}
CONSTRAINT = {"requests": [str], "matchAttribute": str, "distinctAttribute": str}
CLAIM_SPEC = {"devices": {"requests": [REQUEST], "constraints": [CONSTRAINT], "config": [dict]}}
METADATA = {"name": str, "namespace": str, "generateName": str, "labels": MapOf(str), "annotations": MapOf(str)}
CONTAINER = {"name": str, "resources": {"limits": MapOf(QUANTITY), "requests": MapOf(QUANTITY)}}
POD_SPEC = {
    "resourceClaims": [{"name": str, "resourceClaimName": str, "resourceClaimTemplateName": str}],
    "containers": [CONTAINER],
    "initContainers": [CONTAINER],
    "nodeName": str,
    "nodeSelector": MapOf(str),
    "tolerations": [dict],
}
_BASE = {"apiVersion": str, "kind": str, "metadata": METADATA}
OBJECTS = {
    "ResourceClaim": {**_BASE, "spec": CLAIM_SPEC, "status": {"allocation": dict}},
    "ResourceClaimTemplate": {**_BASE, "spec": {"metadata": METADATA, "spec": CLAIM_SPEC}},
    "Pod": {**_BASE, "spec": POD_SPEC},
}

# Mirrored objects (what the sync stored from the API server) the Inventory indexes: only the fields
# its indexing and the node filters read without further checks. The API server's typed decoding
# never hands out anything else, so a mismatch means a garbage answer or a hand-edited row; that
# object is left out of the inventory with a problem naming the field (Inventory.problems), instead
# of failing every preview of its cluster.
_MIRRORED_META = {"name": str, "namespace": str, "labels": MapOf(str)}
_MIRRORED_BASE = {"metadata": _MIRRORED_META, "spec": dict, "status": dict}
MIRRORED = {
    "nodes": {
        "metadata": _MIRRORED_META,
        "spec": {"taints": [dict], "unschedulable": bool},
        "status": {"allocatable": dict, "conditions": [dict]},
    },
    "device_classes": {
        "metadata": _MIRRORED_META,
        "spec": {"selectors": [SELECTOR], "config": [dict], "extendedResourceName": str},
    },
    "resource_slices": {"metadata": _MIRRORED_META, "spec": {"nodeName": str, "driver": str, "pool": dict}},
    "resource_claims": _MIRRORED_BASE,
    "resource_claim_templates": _MIRRORED_BASE,
    "pods": {**_MIRRORED_BASE, "spec": {"nodeName": str}},
    "device_taint_rules": {"metadata": _MIRRORED_META, "spec": {"deviceSelector": dict, "taint": dict}},
    "namespaces": {"metadata": _MIRRORED_META},
}
KIND_NAMES = {
    "nodes": "Node",
    "device_classes": "DeviceClass",
    "resource_slices": "ResourceSlice",
    "resource_claims": "ResourceClaim",
    "resource_claim_templates": "ResourceClaimTemplate",
    "pods": "Pod",
    "device_taint_rules": "DeviceTaintRule",
    "namespaces": "Namespace",
}


def _base_ok(raw):
    """`raw` has the shape _MIRRORED_BASE wants (check_shape's verdict without its generic walk)."""
    meta, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status")
    if (spec is not None and type(spec) is not dict) or (status is not None and type(status) is not dict):
        return False
    if meta is None:
        return True
    if type(meta) is not dict:
        return False
    name, namespace, labels = meta.get("name"), meta.get("namespace"), meta.get("labels")
    if (name is not None and type(name) is not str) or (namespace is not None and type(namespace) is not str):
        return False
    return labels is None or (type(labels) is dict and all(type(v) is str or v is None for v in labels.values()))


def readable_names(raw):
    """(namespace, name) of a mirrored object when its metadata can be read (strings or absent; "" for
    absent), else None: what a malformed object's problem can be filed and named under."""
    meta = raw.get("metadata") if type(raw) is dict else None
    if type(meta) is not dict:
        return None
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return (namespace, name) if type(namespace) is str and type(name) is str else None


def mirrored_problem(kind, raw):
    """None when `raw` (an Inventory keyword's object: "nodes", "resource_claims", ...) has the
    shape MIRRORED wants, else the problem text: "Node gpu-1: spec.taints: must be a list, not ..."."""
    shape = MIRRORED.get(kind)
    if shape is None:
        return None
    if shape is _MIRRORED_BASE and type(raw) is dict and _base_ok(raw):
        return None  # claims and templates, tens of thousands per build: the same test, written out
    names = readable_names(raw)
    shown = (
        names
        and names[1]
        and (f"{names[0]}/{names[1]}" if kind in ("resource_claims", "resource_claim_templates", "pods") else names[1])
    )
    where = f"{KIND_NAMES[kind]} {shown or '(no name)'}"  # named as incremental.py keys problems
    if type(raw) is not dict:
        return f"{where}: must be an object, not {_got(raw)}"
    try:
        check_shape(raw, shape, where)
    except InputError as exc:
        return str(exc)
    return None


_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    bool: "true or false",
    float: "a number",
}


def _wanted(expected):
    if isinstance(expected, tuple):
        return " or ".join(_NAMES[t] for t in expected)
    return _NAMES[expected]


def _got(value):
    return f"{_NAMES.get(type(value), type(value).__name__)} {shown(value)}"


def _is(value, expected):
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        return False  # YAML `count: true` is not the integer 1
    return isinstance(value, types)


def _fail(where, path, expected, value):
    raise InputError(f"{where}: {path or '(top level)'}: must be {_wanted(expected)}, not {_got(value)}")


def check_shape(value, shape, where, path=""):
    """Raise InputError at the first field of `value` whose type differs from `shape`.

    `shape`: a dict (an object with those fields), a one-item list (a list of that shape), MapOf,
    or a type / tuple of types.
    """
    if value is None:
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            _fail(where, path, dict, value)
        for key, inner in shape.items():
            if key in value:
                check_shape(value[key], inner, where, f"{path}.{key}" if path else key)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            _fail(where, path, list, value)
        for i, item in enumerate(value):
            if item is None:
                _fail(where, f"{path}[{i}]", shape[0] if not isinstance(shape[0], (dict, list, MapOf)) else dict, item)
            check_shape(item, shape[0], where, f"{path}[{i}]")
    elif isinstance(shape, MapOf):
        if not isinstance(value, dict):
            _fail(where, path, dict, value)
        for key, inner in value.items():
            check_shape(inner, shape.value, where, f"{path}[{shown(key)}]")
    elif not _is(value, shape):
        _fail(where, path, shape, value)


def check_object(obj, where):
    """The fields the engine reads of one ResourceClaim, ResourceClaimTemplate or Pod."""
    shape = OBJECTS.get(obj.get("kind"))
    if shape is not None:
        check_shape(obj, shape, where)


def check_text(value, where):
    """Every string (keys too) is valid Unicode and the nesting stays under MAX_DEPTH.

    YAML's `"\\ud83d"` escape yields a lone surrogate, which no JSON encoder or page can write out.
    Iterative, and each container is visited once: YAML aliases may share one node many times. A
    path is written out only for a message (a trail of (parent trail, step) pairs until then), so a
    shared node's many places cost nothing.
    """
    seen = set()
    stack = [(value, None, 0)]
    while stack:
        item, trail, depth = stack.pop()
        if isinstance(item, str):
            _check_string(item, where, trail)
        elif isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            if depth >= MAX_DEPTH:
                raise InputError(f"{where}: {_path(trail)}: nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, inner in item.items():
                    if isinstance(key, str):
                        _check_string(key, where, (trail, shown(key), False))
                    stack.append((inner, (trail, key, False), depth + 1))
            else:
                stack.extend((inner, (trail, i, True), depth + 1) for i, inner in enumerate(item))


def _path(trail):
    """ "spec.devices.requests[0]" from check_text's trail of (parent trail, key or index, is index)."""
    steps = []
    while trail is not None:
        trail, step, index = trail
        steps.append(f"[{step}]" if index else f".{shown(step, quote=False)}")
    return "".join(reversed(steps)).removeprefix(".") or "(top level)"


def _check_string(text, where, trail):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise InputError(
            f"{where}: {_path(trail)}: contains a lone surrogate \\u{ord(bad):04x}; text must be valid Unicode"
        ) from None
