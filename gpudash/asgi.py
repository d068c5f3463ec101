import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from claims.preview_service.dispatch import start as start_previews  # noqa: E402
from gpudash.routing import websocket_urlpatterns  # noqa: E402
from mirror.ws_origin import SameOriginValidator  # noqa: E402

start_previews()  # the local pool's preview workers (embedded default); nothing to start with Celery

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
