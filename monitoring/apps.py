from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Monitoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from claims.stuck import register_rule
        from inventory.mapcolours import register_map_colouring

        from .idle import idle_candidates
        from .utilization import attach_latest

        register_rule(idle_candidates)  # the stuck-claim detector's report-only idle-GPU rule
        register_map_colouring("utilization", attach_latest)  # the fleet map's ?colour=utilization
