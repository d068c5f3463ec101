# Websocket routes; the live-view consumers register here.
websocket_urlpatterns = []
