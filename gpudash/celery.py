import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")

app = Celery("gpudash")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _stop_watchers(**kwargs):
    """Warm shutdown (SIGTERM): watchers finish the batch in hand and give up their leases, so
    another worker takes over at once instead of after the lease expires."""
    from gpudash.sync.runner import stop_process_supervisor

    stop_process_supervisor()


# The main process (solo and threads pools) and each prefork child run their own watchers.
signals.worker_shutdown.connect(_stop_watchers, weak=False)
signals.worker_process_shutdown.connect(_stop_watchers, weak=False)
