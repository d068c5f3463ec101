from django.apps import AppConfig


class OpsConfig(AppConfig):
    """The pages and API that combine inventory and claims: readiness, the Pending explainer, stuck
    claims and the audit log (docs/architecture.md)."""

    name = "ops"
    verbose_name = "Operations"
