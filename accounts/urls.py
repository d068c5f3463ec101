from django.urls import include, path

from .views import AccessProfileView, LoginView

urlpatterns = [
    # Before django.contrib.auth.urls, so its "login" name resolves here.
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/profile/", AccessProfileView.as_view(), name="access-profile"),
    path("oidc/", include("mozilla_django_oidc.urls")),
]
