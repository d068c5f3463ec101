"""mozilla-django-oidc's backend, adjusted: users are found by (issuer, subject), the ID token's issuer and
audience are checked, and the group mapping is applied at every sign-in."""

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .groupmap import rights_for
from .models import SignInIdentity
from .rights import apply_rights

log = logging.getLogger(__name__)


class GpudashOIDCBackend(OIDCAuthenticationBackend):
    def authenticate(self, request, **kwargs):
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            # Provider unreachable, or it refused the code: a failed sign-in (back to the login page), not a
            # 500. Only the exception type and URL are logged: bodies may carry tokens.
            response = getattr(exc, "response", None)
            url = getattr(response, "url", "") or getattr(getattr(exc, "request", None), "url", "") or ""
            log.warning(
                "OIDC sign-in failed talking to the provider: %s %s %s",
                type(exc).__name__,
                getattr(response, "status_code", ""),
                url.split("?")[0],
            )
            return None

    def verify_token(self, token, **kwargs):
        try:
            payload = super().verify_token(token, **kwargs)  # signature (JWKS) and nonce
        except jwt.InvalidTokenError as exc:  # expired, not yet valid, malformed: refused like a bad nonce
            raise SuspiciousOperation(f"ID token rejected: {type(exc).__name__}") from None
        if payload.get("iss") != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation(f"ID token issuer {payload.get('iss')!r} is not {settings.OIDC_OP_ISSUER!r}")
        audience = payload.get("aud")
        audience = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audience:
            raise SuspiciousOperation("ID token audience does not name this client")
        self._id_claims = payload
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        # Groups may come in the ID token, the userinfo answer or both; the userinfo must be the same subject.
        info = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") not in (None, payload.get("sub")):
            raise SuspiciousOperation("userinfo answered for another subject")
        return {**payload, **info}

    def verify_claims(self, claims):
        return bool(claims.get("sub")) and bool(self._username(claims))

    def filter_users_by_claims(self, claims):
        identity = (
            SignInIdentity.objects.filter(issuer=settings.OIDC_OP_ISSUER, subject=claims["sub"])
            .select_related("user")
            .first()
        )
        return get_user_model().objects.filter(pk=identity.user_id) if identity else get_user_model().objects.none()

    def create_user(self, claims):
        username = self._username(claims)
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            # Never hand a local (password) account to an identity-provider user of the same name.
            log.warning("OIDC sign-in refused: username %r already belongs to a local account", username)
            raise SuspiciousOperation(f"username {username!r} belongs to a local account")
        with transaction.atomic():
            user = User.objects.create_user(username, email=claims.get("email", ""))
            user.set_unusable_password()
            user.save(update_fields=["password"])
            return self.update_user(user, claims)

    def update_user(self, user, claims):
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        groups = sorted({str(g) for g in groups})
        rights = rights_for(groups, settings.OIDC_GROUP_MAP)
        with transaction.atomic():
            apply_rights(user, rights)
            SignInIdentity.objects.update_or_create(
                user=user,
                defaults={
                    "issuer": settings.OIDC_OP_ISSUER,
                    "subject": claims["sub"],
                    "groups": groups,
                    "sources": [list(s) for s in rights.sources],
                    "kube_username": self._kube_username(claims),
                    "kube_groups": self._kube_groups(groups),
                },
            )
        log.info(
            "OIDC sign-in: %s, groups %s -> role %s", user.username, ", ".join(groups) or "none", rights.role or "none"
        )
        return user

    @staticmethod
    def _kube_username(claims):
        """The username the cluster's OIDC authenticator gives this user ("" = none: writes use the dashboard's)."""
        value = claims.get(settings.GPUDASH_KUBE_USERNAME_CLAIM)
        return settings.GPUDASH_KUBE_USERNAME_PREFIX + str(value) if value else ""

    @staticmethod
    def _kube_groups(groups):
        if settings.GPUDASH_KUBE_IMPERSONATE_GROUPS == "mapped":
            mapped = {rule.group for rule in settings.OIDC_GROUP_MAP}
            groups = [g for g in groups if g in mapped]
        return [settings.GPUDASH_KUBE_GROUPS_PREFIX + g for g in groups]

    @staticmethod
    def _username(claims):
        return str(claims.get(settings.OIDC_USERNAME_CLAIM) or "")[:150]
