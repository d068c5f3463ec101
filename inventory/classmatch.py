"""How many devices each DeviceClass matches now, using the allocator's CEL engine when it is installed.

Computed on demand (not in the background): selectors that pin `device.driver` only look at that
driver's devices, and the allocator's projection sharing evaluates each selector once per distinct
set of the fields it reads. Results are cached per (class resourceVersion, newest slice
resourceVersion): unchanged inventory costs nothing.
"""

import logging
import re
from types import SimpleNamespace

from django.core.cache import cache
from django.db.models import Max, TextField
from django.db.models.functions import Cast

from gpudash.sync import fastjson

from .models import Device, ResourceSlice

log = logging.getLogger(__name__)


def _engine():
    try:
        from claims.allocator import cel
    except ImportError:
        return None
    if not (hasattr(cel, "compile_selector") and hasattr(cel, "make_device")):
        return None
    return cel


# `device.driver == "x"` as a conjunct of the whole expression. Only trusted when the expression has
# no `||` and no `?:` (the only operators binding looser than `&&`), so a device of another driver
# makes the whole selector false, never an error: prefiltering on the column is then exact.
_DRIVER_FIRST = re.compile(r"""^\s*device\s*\.\s*driver\s*==\s*(["'])([^"'\\]+)\1\s*(?:&&|$)""")
_DRIVER_LAST = re.compile(r"""&&\s*device\s*\.\s*driver\s*==\s*(["'])([^"'\\]+)\1\s*$""")


_STRING_VALUE = re.compile(r'"string":\s*"(?:[^"\\]|\\.)*"')


def pinned_driver(expressions):
    """The driver a class's selectors pin with a literal `device.driver == "x"`, else None."""
    for expr in expressions:
        if "||" in expr or "?" in expr:
            continue
        m = _DRIVER_FIRST.search(expr) or _DRIVER_LAST.search(expr)
        if m:
            return m.group(2)
    return None


class _ClusterDevices:
    """The allocator's view of a cluster's devices, built once per request and shared by its classes.

    Selectors are evaluated through the allocator's own `evaluate_chain`, which shares one result
    between devices that look the same to the expression (claims/allocator/projection.py): on a
    fleet where every GPU has its own uuid, a `type == "gpu"` class costs a handful of evaluations.
    """

    def __init__(self, cluster_id):
        self.cluster_id = cluster_id
        self.by_driver = {}
        self.everything = None

    def devices(self, driver=None):
        from claims.allocator.model import Device as AllocatorDevice
        from claims.allocator.projection import device_is_odd

        if self.everything is not None:
            return self.everything if driver is None else [d for d in self.everything if d.driver == driver]
        if driver is not None and driver in self.by_driver:
            return self.by_driver[driver]
        rows = Device.objects.filter(cluster_id=self.cluster_id)
        if driver is not None:
            rows = rows.filter(driver=driver)
        # JSON read as text and parsed with orjson (Django's json.loads was half the time), and the
        # allocator's "odd device" check run once per shape: with string values blanked, the
        # documents of one GPU model differ only in ints, versions and capacities.
        rows = rows.annotate(attributes_text=Cast("attributes", TextField()), capacity_text=Cast("capacity", TextField()))
        odd_by_shape = {}
        out = []
        for drv, pool, name, attributes, capacity, multi in rows.values_list(
            "driver", "pool", "name", "attributes_text", "capacity_text", "allow_multiple_allocations"
        ).iterator(chunk_size=5000):
            raw = {"name": name, "attributes": fastjson.loads(attributes), "capacity": fastjson.loads(capacity), "allowMultipleAllocations": multi}
            device = AllocatorDevice(SimpleNamespace(driver=drv, pool=pool), raw)
            shape = (_STRING_VALUE.sub('"string":""', attributes), capacity)
            odd = odd_by_shape.get(shape)
            if odd is None:
                odd = odd_by_shape[shape] = device_is_odd(device)
            device._odd = odd
            out.append(device)
        if driver is None:
            self.everything = out
        else:
            self.by_driver[driver] = out
        return out


def _count(cls, cel, cluster_devices):
    """(matching devices, devices whose evaluation failed): a runtime error means "no match" in the
    scheduler too, but the page says how many so a broken selector is not mistaken for an empty fleet."""
    from claims.allocator.search import evaluate_chain

    expressions = [(sel.get("cel") or {}).get("expression", "") for sel in cls.selectors]
    chain = [(f"class {cls.name}", i, cel.compile_selector(expr), expr) for i, expr in enumerate(expressions)]
    matched = failed = 0
    for device in cluster_devices.devices(pinned_driver(expressions)):
        result = evaluate_chain(device, chain)
        if result is True:
            matched += 1
        elif result is not False:
            failed += 1
    return matched, failed


def annotate_matches(classes):
    """Set `match_count` (int or None) and `match_error` on each DeviceClass."""
    cel = _engine()
    newest = dict(ResourceSlice.objects.values_list("cluster_id").annotate(rv=Max("resource_version_num")).order_by())
    per_cluster = {}
    for cls in classes:
        cls.match_count, cls.match_error = None, ""
        if cel is None:
            cls.match_error = "CEL engine not installed"
            continue
        key = f"gpudash:classmatch:{cls.cluster_id}:{cls.uid}:{cls.resource_version}:{newest.get(cls.cluster_id, 0)}"
        cached = cache.get(key)
        if cached is not None:
            cls.match_count, cls.match_error = cached
            continue
        try:
            shared = per_cluster.setdefault(cls.cluster_id, _ClusterDevices(cls.cluster_id))
            cls.match_count, failed = _count(cls, cel, shared)
            if failed:
                cls.match_error = f"selector failed on {failed} device{'s' if failed != 1 else ''}"
        except cel.CelError as exc:  # a bad selector must show on the page, not break it
            log.info("class %s: selector does not compile: %s", cls.name, exc)
            cls.match_error = f"selector error: {exc}"
        cache.set(key, (cls.match_count, cls.match_error), 300)
