from django.apps import AppConfig


class DevclusterConfig(AppConfig):
    name = "devcluster"
