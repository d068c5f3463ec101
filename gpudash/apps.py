from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class GpudashConfig(AppConfig):
    """The project shell. It owns no models now: its migrations created the tables that mirror/ took
    over (gpudash/migrations/0007 hands them on), and its commands (serve, demo) start the whole site."""

    default = True
    name = "gpudash"
    verbose_name = "gpudash"


class GpudashAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with gpudash's site: the admin role may use it (mirror/admin_site.py)."""

    default = False  # GpudashConfig stays this module's config for the "gpudash" entry
    default_site = "mirror.admin_site.GpudashAdminSite"
