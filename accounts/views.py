"""The login page (password form and/or the single sign-on button) and the access profile page."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpResponseForbidden
from django.views.generic import TemplateView

from mirror import roles


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"

    def post(self, request, *args, **kwargs):
        if not settings.GPUDASH_PASSWORD_LOGIN:
            return HttpResponseForbidden(
                "Password sign-in is turned off: sign in with single sign-on.", content_type="text/plain"
            )
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "password_login": settings.GPUDASH_PASSWORD_LOGIN,
            "oidc": settings.GPUDASH_OIDC,
            "oidc_provider": getattr(settings, "OIDC_PROVIDER_NAME", ""),
            "oidc_failed": "failed" in self.request.GET,
        }


class AccessProfileView(LoginRequiredMixin, TemplateView):
    """Who am I to gpudash and to the clusters, and where each right came from."""

    template_name = "accounts/profile.html"

    def get_context_data(self, **kwargs):
        user = self.request.user
        identity = getattr(user, "sign_in_identity", None)
        scope = roles.visible_namespaces(user)
        if identity is not None:
            sources = [
                {"right": right, "source": f"identity-provider group {group}"} for right, group in identity.sources
            ]
        else:
            sources = self._local_sources(user, scope)
        if scope is not None:  # granted by an admin, whatever signed the user in
            sources += [
                {
                    "right": f"DRA driver pods (and their logs) in namespace {n}",
                    "source": "access profile: driver namespaces (Django admin)",
                }
                for n in sorted(roles.driver_namespaces(user) - scope)
            ]
        return {
            **super().get_context_data(**kwargs),
            "role": roles.role_of(user),
            "scope": sorted(scope) if scope is not None else None,
            "identity": identity,
            "sources": sources,
            "impersonation": getattr(settings, "GPUDASH_KUBE_IMPERSONATION", ()),
        }

    @staticmethod
    def _local_sources(user, scope):
        if user.is_superuser:
            return [{"right": "role admin", "source": "superuser flag (Django admin)"}]
        role = roles.role_of(user)
        out = (
            [{"right": f"role {role}", "source": f"Django group {role} (Django admin or manage.py grant_role)"}]
            if role
            else []
        )
        if scope is not None:
            out += [
                {"right": f"namespace {n}", "source": "access profile (Django admin or manage.py grant_role)"}
                for n in sorted(scope)
            ]
        return out
