"""How many devices each DeviceClass matches now, using the allocator's CEL engine when it is installed.

Matching runs every selector against every device of the class's cluster, so results are cached
per (class resourceVersion, newest slice resourceVersion): unchanged inventory costs nothing.
"""

import logging

from django.core.cache import cache
from django.db.models import Max

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


def _count(cls, cel):
    """(matching devices, devices whose evaluation failed): a runtime error means "no match" in the
    scheduler too, but the page says how many so a broken selector is not mistaken for an empty fleet."""
    compiled = [cel.compile_selector((sel.get("cel") or {}).get("expression", "")) for sel in cls.selectors]
    matched = failed = 0
    devices = Device.objects.filter(cluster_id=cls.cluster_id).only("driver", "attributes", "capacity", "allow_multiple_allocations")
    for dev in devices.iterator(chunk_size=2000):
        device = cel.make_device(dev.driver, dev.attributes, dev.capacity, dev.allow_multiple_allocations)
        try:
            if all(sel.evaluate(device) for sel in compiled):
                matched += 1
        except cel.CelError:
            failed += 1
    return matched, failed


def annotate_matches(classes):
    """Set `match_count` (int or None) and `match_error` on each DeviceClass."""
    cel = _engine()
    newest = dict(ResourceSlice.objects.values_list("cluster_id").annotate(rv=Max("resource_version_num")).order_by())
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
            cls.match_count, failed = _count(cls, cel)
            if failed:
                cls.match_error = f"selector failed on {failed} device{'s' if failed != 1 else ''}"
        except cel.CelError as exc:  # a bad selector must show on the page, not break it
            log.info("class %s: selector does not compile: %s", cls.name, exc)
            cls.match_error = f"selector error: {exc}"
        cache.set(key, (cls.match_count, cls.match_error), 300)
