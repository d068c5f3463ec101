"""The health app's settings: GPUDASH_HEALTH thresholds, and the history period it shares with monitoring."""

import math

from django.conf import settings

DEFAULTS = {
    # "Prepared but not ready": how long after allocation a device status may say not Ready.
    "NOT_READY_GRACE": 300,
}


def setting(name):
    value = (getattr(settings, "GPUDASH_HEALTH", None) or {}).get(name, DEFAULTS[name])
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"settings.GPUDASH_HEALTH[{name!r}] must be a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"settings.GPUDASH_HEALTH[{name!r}] must be 0 or more seconds, got {value!r}")
    return number


def retention_days():
    """The fleet history's period (GPUDASH_MONITORING["HISTORY_DAYS"], default 14): the timeline is kept as long.
    Read from the setting itself: monitoring is a sibling floor, not imported."""
    value = (getattr(settings, "GPUDASH_MONITORING", None) or {}).get("HISTORY_DAYS", 14)
    try:
        days = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"GPUDASH_HISTORY_DAYS must be a number of days, got {value!r}") from None
    if not math.isfinite(days) or days <= 0:
        raise ValueError(f"GPUDASH_HISTORY_DAYS must be more than 0, got {value!r}")
    return days
