from django.apps import AppConfig


class MirrorConfig(AppConfig):
    """The ground floor: clusters, the sync that mirrors them, Kubernetes access, roles, API and page bases."""

    name = "mirror"
    verbose_name = "mirror"

    def ready(self):
        from . import lookups  # noqa: F401  registers field__any_of
