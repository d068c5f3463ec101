# Websocket routes; the live-view consumers register here.
from django.urls import path

from gpudash.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
]
