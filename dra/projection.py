"""Share CEL results between devices that look the same to a selector.

Evaluating a selector needs the device's CEL view (all attributes converted), which costs far more
than the evaluation itself; a fleet has 100,000+ devices but a class selector such as
`device.driver == "x" && device.attributes["x"].type == "gpu"` only reads two fields. When every
use of `device` in an expression is a plain field read (`device.driver`,
`device.allowMultipleAllocations`, `device.attributes["dom"].id`, `device.capacity["dom"]["id"]`),
the result depends only on those fields, so devices with equal values share one evaluation.
Anything else (`device.attributes["dom"]` used as a map, macros over it, `device` passed around)
is not projected and is evaluated per device. Hand-written: no CEL library exposes this analysis.
"""

import re
from functools import lru_cache

from .model import quantity_ok as _quantity_ok

_ACCESS = re.compile(
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(["'])([^"'\\]+)\2\s*\]"""
    r"""(?:\s*\.\s*\??\s*([A-Za-z_][A-Za-z0-9_]*)(?!\s*\()|\s*\[\s*\??\s*(["'])([^"'\\]+)\5\s*\])"""
)
_PLAIN = re.compile(r"device\s*\.\s*(driver|allowMultipleAllocations)\b")
_DEVICE = re.compile(r"\bdevice\b")
_SCALARS = ("int", "bool", "string", "version")
_FLAT = frozenset((str, int, bool, float))
MISSING = object()


class Projector:
    """Which device fields one expression reads; results are cached per distinct projection."""

    __slots__ = ("fields", "results", "_lookups")

    def __init__(self, fields):
        self.fields = fields  # ((kind, domain, id), ...)
        self.results = {}
        # Per field: attributes or capacity, the qualified name, the domain and the bare id (the
        # first preview of a fleet computes a key for every device: no name formatting per device).
        self._lookups = tuple(
            (kind == "attributes", f"{domain}/{ident}", domain, ident) for kind, domain, ident in fields
        )

    def key(self, device):
        if device_is_odd(device):
            return None
        driver = device.driver
        parts = [driver, device.multi]
        attrs, caps = device.attributes, None
        for is_attr, qualified, domain, ident in self._lookups:
            if is_attr:
                source = attrs
            else:
                if caps is None:
                    caps = device.raw.get("capacity") or {}
                source = caps
            value = source.get(qualified, MISSING)
            if value is MISSING and domain == driver:
                value = source.get(ident, MISSING)
            if value is not MISSING:
                value = _freeze(value)
            parts.append(value)
        return tuple(parts)


def _freeze(value):
    if type(value) is dict and len(value) == 1:  # the usual attribute shape, {"string": "gpu"}: no sort
        ((k, v),) = value.items()
        if type(v) in _FLAT:
            return ((k, v),)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


@lru_cache(maxsize=2048)
def projector_for(expr):
    """A Projector, or None when the expression reads the device in a way that cannot be projected."""
    fields = []
    for m in _ACCESS.finditer(expr):
        fields.append((m.group(1), m.group(3), m.group(4) or m.group(6)))
    rest = _PLAIN.sub(" ", _ACCESS.sub(" ", expr))
    if _DEVICE.search(rest):
        return None
    return Projector(tuple(dict.fromkeys(fields)))


def device_is_odd(device):
    """Devices whose CEL view fails or differs for reasons outside the projection are never shared."""
    odd = device._odd
    if odd is None:
        odd = device._odd = _compute_odd(device)
    return odd


_PLAIN_TYPES = {"int": int, "bool": bool, "string": str}
ATTRIBUTE, CAPACITY = "attribute", "capacity"


def plain_value(kind, item):
    """What the one-entry value `{kind: item}` is to the fast checks of `_compute_odd`: ATTRIBUTE for
    a plain attribute value (an int, bool or string of exactly that type, or a valid version),
    CAPACITY for a quantity (`{"value": "80Gi"}`), else None. A device whose every attribute value is
    ATTRIBUTE and every capacity value CAPACITY is not odd; callers that visit every value anyway
    (the live inventory while it shares them) say so with `Inventory(plain_devices=...)`, and the
    first preview then skips the per-device check."""
    if type(item) is _PLAIN_TYPES.get(kind):
        return ATTRIBUTE
    if type(item) is str:
        if kind == "version" and _version_ok(item):
            return ATTRIBUTE
        if kind == "value" and _quantity_ok(item):
            return CAPACITY
    return None


def _compute_odd(device):
    for attr in device.attributes.values():
        if type(attr) is dict and len(attr) == 1:  # the usual shape, checked fast (first preview: 56,000 devices)
            ((kind, value),) = attr.items()
            if type(value) is _PLAIN_TYPES.get(kind):
                continue
            if kind == "version" and type(value) is str and _version_ok(value):
                continue
        if not isinstance(attr, dict):
            return True
        kinds = [k for k in _SCALARS if attr.get(k) is not None]
        if len(kinds) != 1 or any(k for k in attr if k not in _SCALARS):
            return True
        if kinds[0] == "version":
            if not _version_ok(attr["version"]):
                return True
        elif kinds[0] == "int" and (not isinstance(attr["int"], int) or isinstance(attr["int"], bool)):
            return True
        elif kinds[0] == "bool" and not isinstance(attr["bool"], bool):
            return True
        elif kinds[0] == "string" and not isinstance(attr["string"], str):
            return True
    caps = device.raw.get("capacity") or {}
    if type(caps) is not dict:
        return True
    for cap in caps.values():  # a capacity that is not a quantity makes the CEL view fail
        if type(cap) is dict and type(cap.get("value")) is str and _quantity_ok(cap["value"]):
            continue
        try:
            device.capacity  # noqa: B018  (the full parse decides the odd shapes)
        except Exception:
            return True
        break
    return False


@lru_cache(maxsize=4096)
def _version_ok(text):
    from .semver import SemverError, parse_semver

    try:
        parse_semver(text)
        return True
    except (SemverError, TypeError, ValueError):
        return False
