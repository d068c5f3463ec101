from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"
    verbose_name = "Device health"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from claims.stuck import register_rule
        from mirror.sync.hooks import register

        from . import findings, pages, timeline

        # The sync tells us after each batch of these kinds; we diff the health notion and write the timeline.
        register(health_kinds=timeline.KINDS, refresh_health=timeline.refresh)
        for rule in findings.RULES:
            register_rule(rule, **findings.RULE_INFO[rule])
        pages.register()
