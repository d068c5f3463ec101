from django.conf import settings
from django.urls import include, path

from .views import AccessProfileView, LoginView

urlpatterns = [
    # Before django.contrib.auth.urls, so its "login" name resolves here.
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/profile/", AccessProfileView.as_view(), name="access-profile"),
]
if settings.GPUDASH_OIDC:
    # Only with OIDC configured: without a provider its views fail on the missing settings (a 500), so
    # the paths are not served at all (404).
    urlpatterns.append(path("oidc/", include("mozilla_django_oidc.urls")))
