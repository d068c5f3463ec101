from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from monitoring.metrics import register_families
        from monitoring.periodic import register_job

        from . import report_tasks  # noqa: F401 (registers the rollup's Celery task)
        from .rollup import metric_families, run

        register_families(metric_families)  # gpudash_gpu_seconds_total on /metrics
        register_job("usage rollup", 600.0, run)  # the embedded mode's beat (no Redis)
