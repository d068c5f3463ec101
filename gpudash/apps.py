from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class GpudashConfig(AppConfig):
    default = True
    name = "gpudash"
    verbose_name = "gpudash"

    def ready(self):
        from . import lookups  # noqa: F401  registers field__any_of


class GpudashAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with gpudash's site: the admin role may use it (gpudash/admin_site.py)."""

    default = False  # GpudashConfig stays this module's config for the "gpudash" entry
    default_site = "gpudash.admin_site.GpudashAdminSite"
