from django.apps import AppConfig


class GpudashConfig(AppConfig):
    name = "gpudash"
    verbose_name = "gpudash"
