from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Monitoring"
    default_auto_field = "django.db.models.BigAutoField"
