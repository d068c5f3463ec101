"""The provider settings OIDC sign-in needs, read from the provider's discovery document."""

import requests

SETTINGS = {  # environment variable -> discovery document key
    "OIDC_OP_ISSUER": "issuer",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class DiscoveryError(Exception):
    pass


def discover(issuer, timeout=10.0, verify=True):
    """{environment variable: value} for `issuer`, checked the way OpenID Connect Discovery asks."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=timeout, verify=verify)
        response.raise_for_status()
        doc = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise DiscoveryError(f"{url}: {exc}") from None
    if not isinstance(doc, dict):
        raise DiscoveryError(f"{url}: not a JSON object")
    if doc.get("issuer") != issuer:
        raise DiscoveryError(f"{url} names the issuer {doc.get('issuer')!r}, not {issuer!r}: use exactly that value")
    missing = [key for key in SETTINGS.values() if not doc.get(key)]
    if missing:
        raise DiscoveryError(f"{url} lacks {', '.join(missing)}")
    if "S256" not in (doc.get("code_challenge_methods_supported") or ["S256"]):
        raise DiscoveryError(f"{url}: the provider does not offer PKCE with S256")
    return {name: doc[key] for name, key in SETTINGS.items()}
