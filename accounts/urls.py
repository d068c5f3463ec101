from functools import wraps

from django.conf import settings
from django.http import Http404
from django.urls import URLPattern, include, path
from mozilla_django_oidc import urls as oidc_urls

from .views import AccessProfileView, LoginView


def _only_with_oidc(view):
    """Without a provider configured the OIDC views fail on the missing settings (a 500): they answer
    404 instead, as if not there. Decided per request, not when the URLs load, so the names still
    reverse and a configuration applied later (tests, a reload) takes effect."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not settings.GPUDASH_OIDC:
            raise Http404("Single sign-on (OIDC) is not configured.")
        return view(request, *args, **kwargs)

    return guarded


urlpatterns = [
    # Before django.contrib.auth.urls, so its "login" name resolves here.
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/profile/", AccessProfileView.as_view(), name="access-profile"),
    path(
        "oidc/",
        include(
            [
                URLPattern(pattern.pattern, _only_with_oidc(pattern.callback), pattern.default_args, pattern.name)
                for pattern in oidc_urls.urlpatterns
            ]
        ),
    ),
]
