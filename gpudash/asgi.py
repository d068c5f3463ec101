import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpudash.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from gpudash.routing import websocket_urlpatterns  # noqa: E402
from gpudash.ws_origin import SameOriginValidator  # noqa: E402

from claims.live_inventory import start_warm_up  # noqa: E402

start_warm_up()  # the preview inventories, in a background thread (settings.GPUDASH_PREVIEW_WARM_UP)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
