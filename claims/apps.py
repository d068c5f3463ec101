from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    name = "claims"

    def ready(self):
        from mirror.sync.hooks import register

        from .tasks import request_detection

        register(request_detection=request_detection)  # the stuck-claim detector looks at each committed batch
