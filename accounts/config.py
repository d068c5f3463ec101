"""OIDC and sign-in settings from the environment (called by gpudash/settings.py; no Django imports).

OIDC is on when `OIDC_RP_CLIENT_ID` is set; then the provider's endpoints must be set too (the values
its `/.well-known/openid-configuration` lists; `manage.py oidc_discover ISSUER` prints them).
"""

from mirror.envconfig import ConfigError, env_bool, env_choice, env_number

from .groupmap import parse_group_map

ENDPOINTS = (
    "OIDC_OP_ISSUER",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
)


def sign_in_settings(env):
    """Django settings (a dict) for the sign-in methods the environment asks for."""
    password = env_bool("GPUDASH_PASSWORD_LOGIN", True, env)
    client_id = env.get("OIDC_RP_CLIENT_ID", "")
    backends = ["django.contrib.auth.backends.ModelBackend"] if password else []
    out = {"GPUDASH_PASSWORD_LOGIN": password, "GPUDASH_OIDC": bool(client_id)}
    if not client_id:
        if not password:
            raise ConfigError("GPUDASH_PASSWORD_LOGIN=off needs OIDC (OIDC_RP_CLIENT_ID and the provider's endpoints)")
        out["AUTHENTICATION_BACKENDS"] = backends
        out["GPUDASH_KUBE_IMPERSONATION"] = ()
        return out
    missing = [name for name in ENDPOINTS if not env.get(name)]
    if missing:
        raise ConfigError(f"OIDC_RP_CLIENT_ID is set but {', '.join(missing)} not: set the provider's endpoints")
    try:
        group_map = parse_group_map(env.get("OIDC_GROUP_MAP", ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    impersonation = env.get("GPUDASH_KUBE_IMPERSONATION", "all").strip()
    out.update(
        {
            "AUTHENTICATION_BACKENDS": ["accounts.backend.GpudashOIDCBackend", *backends],
            "OIDC_RP_CLIENT_ID": client_id,
            "OIDC_RP_CLIENT_SECRET": env.get("OIDC_RP_CLIENT_SECRET", ""),
            **{name: env[name] for name in ENDPOINTS},
            "OIDC_RP_SCOPES": env.get("OIDC_RP_SCOPES", "openid profile email groups"),
            "OIDC_RP_SIGN_ALGO": env.get("OIDC_RP_SIGN_ALGO", "RS256"),
            "OIDC_USE_PKCE": True,  # authorization code flow with PKCE (S256), plus state and nonce
            "OIDC_USE_NONCE": True,
            "OIDC_STORE_ACCESS_TOKEN": False,  # tokens are used once at sign-in and never kept
            "OIDC_STORE_ID_TOKEN": False,
            "OIDC_TIMEOUT": env_number("OIDC_TIMEOUT", 10.0, positive=True, env=env),
            "OIDC_VERIFY_SSL": env_bool("OIDC_VERIFY_SSL", True, env),
            "OIDC_USERNAME_CLAIM": env.get("OIDC_USERNAME_CLAIM", "preferred_username"),
            "OIDC_GROUPS_CLAIM": env.get("OIDC_GROUPS_CLAIM", "groups"),
            "OIDC_GROUP_MAP": group_map,
            "OIDC_PROVIDER_NAME": env.get("OIDC_PROVIDER_NAME", "single sign-on"),
            "LOGIN_REDIRECT_URL_FAILURE": "/accounts/login/?failed=1",
            # How the cluster's own OIDC authenticator names the user (--oidc-username-prefix/-groups-prefix).
            "GPUDASH_KUBE_USERNAME_PREFIX": env.get("GPUDASH_KUBE_USERNAME_PREFIX", "oidc:"),
            "GPUDASH_KUBE_GROUPS_PREFIX": env.get("GPUDASH_KUBE_GROUPS_PREFIX", "oidc:"),
            # The claim the cluster takes the username from (--oidc-username-claim); default: the sign-in's.
            "GPUDASH_KUBE_USERNAME_CLAIM": env.get("GPUDASH_KUBE_USERNAME_CLAIM")
            or env.get("OIDC_USERNAME_CLAIM", "preferred_username"),
            # "mapped": impersonate only the groups OIDC_GROUP_MAP names (the RBAC grant can then list them by
            # name); "all": every group of the user (impersonate on any group needed).
            "GPUDASH_KUBE_IMPERSONATE_GROUPS": env_choice("GPUDASH_KUBE_IMPERSONATE_GROUPS", ("mapped", "all"), env),
            # "all" (default), "off", or comma-separated cluster names: writes there run as the signed-in user.
            "GPUDASH_KUBE_IMPERSONATION": ("*",)
            if impersonation in ("all", "*", "")
            else ()
            if impersonation == "off"
            else tuple(n.strip() for n in impersonation.split(",") if n.strip()),
        }
    )
    return out
