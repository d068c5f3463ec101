from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from monitoring.metrics import register_families

        from . import report_tasks  # noqa: F401 (registers the rollup's Celery task)
        from .rollup import metric_families

        register_families(metric_families)  # gpudash_gpu_seconds_total on /metrics
