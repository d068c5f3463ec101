from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Monitoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from claims.stuck import register_rule

        from .idle import idle_candidates

        register_rule(idle_candidates)  # the stuck-claim detector's report-only idle-GPU rule
