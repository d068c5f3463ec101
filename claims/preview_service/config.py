"""The preview service's settings (settings.GPUDASH_PREVIEW_SERVICE), read on every use so tests and
operators can change them without a restart of this module."""

from django.conf import settings

DEFAULTS = {
    # "local": a pool of worker processes beside this web process (the embedded default);
    # "celery": the `preview` Celery queue served by dedicated workers (production, needs REDIS_URL);
    # "inline": in the calling process (the `preview` command and the benches only).
    "BACKEND": "local",
    "WORKERS": 2,  # local pool processes; with Celery, the preview worker slots the web tier counts on
    "PER_USER": 2,  # previews one user may have in flight
    "QUEUE": 8,  # previews admitted beyond WORKERS, waiting for a free worker
    "LOST_AFTER": 3.0,  # seconds without a running job's heartbeat before its worker counts as lost
    "GRACE": 5.0,  # seconds past a job's deadline before the web tier stops waiting for its answer
}


def limits():
    return {**DEFAULTS, **getattr(settings, "GPUDASH_PREVIEW_SERVICE", {})}
