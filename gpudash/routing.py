# Websocket routes; the live-view consumers register here.
from django.urls import path

from mirror.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
]
