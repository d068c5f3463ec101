"""How many devices each DeviceClass matches, using the allocator's CEL engine when it is installed.

Counted off the request path: the sync apply path asks for a recount after DeviceClass and
ResourceSlice changes (inventory/tasks.py: debounced, a Celery task with Redis, a thread without),
`refresh_cluster` counts every class of the cluster and stores the result on the DeviceClass row
(match_count, match_error, match_computed_at, and match_version: the inventory it counted); the
classes page and the API read what is stored, say when it was counted and whether the class or
the slices changed since. Counting itself: selectors that
pin `device.driver` only look at that driver's devices, and the allocator's projection sharing
evaluates each selector once per distinct set of the fields it reads.
"""

import logging
import re
from types import SimpleNamespace

from django.conf import settings
from django.db.models import Count, Max, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from dra import cel
from dra.deadline import Deadline
from mirror.sync import fastjson

from .models import Device, DeviceClass, ResourceSlice

log = logging.getLogger(__name__)


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
    between devices that look the same to the expression (dra/projection.py): on a
    fleet where every GPU has its own uuid, a `type == "gpu"` class costs a handful of evaluations.
    """

    def __init__(self, cluster_id):
        self.cluster_id = cluster_id
        self.by_driver = {}
        self.everything = None

    def devices(self, driver=None):
        from dra.model import Device as AllocatorDevice
        from dra.projection import device_is_odd

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
        rows = rows.annotate(
            attributes_text=Cast("attributes", TextField()), capacity_text=Cast("capacity", TextField())
        )
        odd_by_shape = {}
        out = []
        for drv, pool, name, attributes, capacity, multi in rows.values_list(
            "driver", "pool", "name", "attributes_text", "capacity_text", "allow_multiple_allocations"
        ).iterator(chunk_size=5000):
            raw = {
                "name": name,
                "attributes": fastjson.loads(attributes),
                "capacity": fastjson.loads(capacity),
                "allowMultipleAllocations": multi,
            }
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


class _OutOfTime(Exception):
    """The recount's deadline passed (settings.GPUDASH_ENGINE_LIMITS["CLASS_COUNT_DEADLINE"])."""


def _count(cls, cel, cluster_devices, deadline=None):
    """(matching devices, devices whose evaluation failed): a runtime error means "no match" in the
    scheduler too, but the page says how many so a broken selector is not mistaken for an empty fleet."""
    from dra.matching import evaluate_chain

    expressions = [(sel.get("cel") or {}).get("expression", "") for sel in cls.selectors]
    chain = [(f"class {cls.name}", i, cel.compile_selector(expr), expr) for i, expr in enumerate(expressions)]
    matched = failed = 0
    for device in cluster_devices.devices(pinned_driver(expressions)):
        if deadline is not None and deadline.expired():
            raise _OutOfTime()
        result = evaluate_chain(device, chain)
        if result is True:
            matched += 1
        elif result is not False:
            failed += 1
    return matched, failed


def classes_matching(device):
    """The cluster's DeviceClasses whose selectors match one Device row (the device page's links to
    its classes): the same evaluation as the counts, for one device."""
    from dra.matching import evaluate_chain
    from dra.model import Device as AllocatorDevice

    raw = {
        "name": device.name,
        "attributes": device.attributes,
        "capacity": device.capacity,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }
    candidate = AllocatorDevice(SimpleNamespace(driver=device.driver, pool=device.pool), raw)
    out = []
    for cls in DeviceClass.objects.filter(cluster_id=device.cluster_id).order_by("name"):
        expressions = [(sel.get("cel") or {}).get("expression", "") for sel in cls.selectors if isinstance(sel, dict)]
        driver = pinned_driver(expressions)
        if driver is not None and driver != device.driver:
            continue
        try:
            chain = [
                (f"class {cls.name}", i, cel.compile_selector(expr, stored=True), expr)
                for i, expr in enumerate(expressions)
            ]
        except cel.CelError:  # a selector that does not compile matches nothing (the classes page shows why)
            continue
        if evaluate_chain(candidate, chain) is True:
            out.append(cls)
    return out


def annotate_matches(classes, deadline=None):
    """Count now: set `match_count` (int or None) and `match_error` on each DeviceClass (not saved).

    Takes seconds on a large fleet: only `refresh_cluster` (the background job) and tests call it.
    `deadline` (dra.deadline.Deadline) bounds the whole count: classes not counted by
    then keep no count and say so.
    """
    per_cluster = {}
    for cls in classes:
        cls.match_count, cls.match_error = None, ""
        try:
            shared = per_cluster.setdefault(cls.cluster_id, _ClusterDevices(cls.cluster_id))
            cls.match_count, failed = _count(cls, cel, shared, deadline)
            if failed:
                cls.match_error = f"selector failed on {failed} device{'s' if failed != 1 else ''}"
        except _OutOfTime:
            cls.match_count, cls.match_error = (
                None,
                f"not counted: the recount's time limit of {deadline.seconds:g} s passed",
            )
        except cel.CelError as exc:  # a bad selector must show on the page, not break it
            log.info("class %s: selector does not compile: %s", cls.name, exc)
            cls.match_error = f"selector error: {exc}"
        except Exception as exc:  # the CEL library failing on one class (e.g. a budget): the other classes still count
            log.warning("class %s: selector could not be evaluated", cls.name, exc_info=exc)
            cls.match_count = None
            cls.match_error = f"selector could not be evaluated ({type(exc).__name__}: {str(exc)[:300]})"


def inventory_versions(cluster_ids=None):
    """{cluster_id: "<newest slice resourceVersion>.<slice count>"}: the inventory a count is for.
    Any slice written gets the cluster's newest resourceVersion; a slice deleted lowers the count."""
    slices = (
        ResourceSlice.objects.all() if cluster_ids is None else ResourceSlice.objects.filter(cluster_id__in=cluster_ids)
    )
    rows = slices.values_list("cluster_id").annotate(rv=Max("resource_version_num"), n=Count("id")).order_by()
    return {cluster_id: f"{rv}.{n}" for cluster_id, rv, n in rows}


def version_of(cls, versions):
    """What a count of `cls` depends on: the class's own resourceVersion and its cluster's slices."""
    return f"{cls.resource_version_num}:{versions.get(cls.cluster_id, '0.0')}"


def is_current(cls, versions):
    return cls.match_computed_at is not None and cls.match_version == version_of(cls, versions)


def refresh_cluster(cluster_id):
    """Count the matches of every class of the cluster and store them. Returns the classes."""
    versions = inventory_versions([cluster_id])
    classes = list(DeviceClass.objects.filter(cluster_id=cluster_id))
    if not classes:
        return []
    annotate_matches(classes, Deadline(settings.GPUDASH_ENGINE_LIMITS["CLASS_COUNT_DEADLINE"] or None))
    now = timezone.now()
    for cls in classes:
        cls.match_computed_at, cls.match_version = now, version_of(cls, versions)
    # Only these columns: a class the sync updated meanwhile keeps its new spec (and, its version
    # no longer matching, is counted again on the next request).
    DeviceClass.objects.bulk_update(
        classes, ["match_count", "match_error", "match_computed_at", "match_version"], batch_size=500
    )
    return classes
