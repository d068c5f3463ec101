from django.apps import AppConfig
from django.conf import settings


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from mirror.sync.hooks import register
        from monitoring.metrics import register_families
        from monitoring.periodic import register_job

        from . import ledger, report_tasks, tasks  # noqa: F401 (report_tasks registers the rollup's Celery task)
        from .rollup import metric_families, queue_families, run

        if getattr(settings, "USAGE_LEDGER", True):
            # The sync times claim events and reports its stream's liveness only for a ledger that listens.
            register(
                ledger_kinds=frozenset({ledger.KIND}),
                ledger_claims=tasks.on_claims,
                ledger_alive=ledger.mark_alive,
                ledger_relist=ledger.on_relist,
                ledger_resume=ledger.on_resume,
            )
        register_families(metric_families)  # gpudash_gpu_seconds_total on /metrics
        register_families(queue_families)  # the ledger's queue of claim events
        # The embedded mode's beat (no Redis): monitoring's one periodic thread runs these.
        register_job("usage rollup", 600.0, run)
        register_job("ledger prune", 3600.0, _prune)
        register_job("ledger fold", 60.0, ledger.fold_all)  # the debounced folds' safety net


def _prune():
    from .prune import prune

    prune()
