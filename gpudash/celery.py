import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")

app = Celery("gpudash")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _stop_watchers(**kwargs):
    """Warm shutdown (SIGTERM): watchers finish the batch in hand and give up their leases, so
    another worker takes over at once instead of after the lease expires."""
    from mirror.sync.runner import stop_process_supervisor

    stop_process_supervisor()


# The main process (solo and threads pools) and each prefork child run their own watchers.
signals.worker_shutdown.connect(_stop_watchers, weak=False)
signals.worker_process_shutdown.connect(_stop_watchers, weak=False)


_preview_worker = {"serves": False, "prefork": False}


def _note_preview_queue(sender=None, instance=None, **kwargs):
    """A worker that consumes the `preview` queue warms the preview inventories up as it starts."""
    _preview_worker["serves"] = "preview" in instance.app.amqp.queues.consume_from
    _preview_worker["prefork"] = "prefork" in str(instance.pool_cls).lower()
    if _preview_worker["serves"]:
        from claims.preview_service.local_pool import WORKER_NICENESS

        os.nice(WORKER_NICENESS)  # as the local pool does: a web process on the same host keeps priority


def _warm_previews_in_child(**kwargs):
    if _preview_worker["serves"]:
        from claims.live_inventory import start_warm_up

        start_warm_up()


def _warm_previews_in_main(**kwargs):
    # Prefork children run the jobs and warm up their own inventories; the main process keeps none.
    if not _preview_worker["prefork"]:
        _warm_previews_in_child()


signals.celeryd_after_setup.connect(_note_preview_queue, weak=False)
signals.worker_process_init.connect(_warm_previews_in_child, weak=False)
signals.worker_ready.connect(_warm_previews_in_main, weak=False)
