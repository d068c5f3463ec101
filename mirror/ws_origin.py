"""The websocket handshake's origin check: only pages of this dashboard may open /ws/live/.

A browser sends the session cookie with a websocket handshake from any page, so the Origin header is
what tells our pages from another site's, or another app on the same host. channels'
AllowedHostsOriginValidator compares host names only: http://127.0.0.1:9999 passed for a dashboard
on 127.0.0.1:8000. Here the origin must match scheme, host and port of the dashboard's own origin
(the scheme and Host of the handshake, as Django reads them for a request: SECURE_PROXY_SSL_HEADER,
ALLOWED_HOSTS) or of one of CSRF_TRUSTED_ORIGINS (`https://*.example.com` for its subdomains), the
same origins Django's CSRF check accepts for a form post.
"""

from urllib.parse import urlparse

from channels.security.websocket import OriginValidator, WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest


class _Handshake(HttpRequest):
    """The handshake as a Django request, for its scheme and validated host."""

    def __init__(self, scope):
        super().__init__()
        self._ws_scheme = scope.get("scheme") or "ws"
        for name, value in scope.get("headers") or ():
            self.META["HTTP_" + name.decode("latin1").upper().replace("-", "_")] = value.decode("latin1")
        server = scope.get("server") or (None, None)
        self.META["SERVER_NAME"], self.META["SERVER_PORT"] = server[0] or "", str(server[1] or "")

    def _get_scheme(self):
        return "https" if self._ws_scheme in ("wss", "https") else "http"


def allowed_origins(scope):
    """The origins a page may open this connection from."""
    request = _Handshake(scope)
    try:
        own = [f"{request.scheme}://{request.get_host()}"]
    except DisallowedHost:  # a Host outside ALLOWED_HOSTS is no origin of ours
        own = []
    # channels' pattern for "this domain and its subdomains" is a leading dot, Django's "*.".
    return own + [o.replace("://*.", "://.", 1) for o in settings.CSRF_TRUSTED_ORIGINS]


class SameOriginValidator(OriginValidator):
    def __init__(self, application):
        super().__init__(application, allowed_origins=())

    async def __call__(self, scope, receive, send):
        origin = dict(scope.get("headers") or ()).get(b"origin")
        if origin and self.origin_allowed(origin.decode("latin1"), scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)  # the handshake answers 403

    def origin_allowed(self, origin, scope):
        parsed = urlparse(origin)
        try:
            return bool(parsed.hostname) and any(self.match_allowed_origin(parsed, o) for o in allowed_origins(scope))
        except ValueError:  # a port that is no number, or out of range
            return False
