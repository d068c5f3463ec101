"""settings.GPUDASH_MONITORING, read where monitoring needs one of its values."""

from django.conf import settings


def setting(name, default):
    return (getattr(settings, "GPUDASH_MONITORING", None) or {}).get(name, default)
