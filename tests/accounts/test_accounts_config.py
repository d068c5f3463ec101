"""Sign-in settings from the environment (accounts.config) and the group map (accounts.groupmap): what an
operator writes either works as documented or is refused with a message naming the variable."""

import pytest

from accounts.config import ConfigError, sign_in_settings
from accounts.groupmap import GroupMapError, parse_group_map, rights_for

pytestmark = pytest.mark.sqlite_default  # nothing here needs PostgreSQL or Redis

PROVIDER = {
    "OIDC_RP_CLIENT_ID": "gpudash",
    "OIDC_OP_ISSUER": "https://idp.example",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://idp.example/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example/token",
    "OIDC_OP_USER_ENDPOINT": "https://idp.example/me",
    "OIDC_OP_JWKS_ENDPOINT": "https://idp.example/jwks",
}


def test_without_oidc_only_passwords():
    out = sign_in_settings({})
    assert out["AUTHENTICATION_BACKENDS"] == ["django.contrib.auth.backends.ModelBackend"]
    assert out["GPUDASH_OIDC"] is False and out["GPUDASH_KUBE_IMPERSONATION"] == ()
    with pytest.raises(ConfigError, match="GPUDASH_PASSWORD_LOGIN=off needs OIDC"):
        sign_in_settings({"GPUDASH_PASSWORD_LOGIN": "off"})


def test_oidc_settings_and_defaults():
    out = sign_in_settings({**PROVIDER, "GPUDASH_PASSWORD_LOGIN": "0", "OIDC_GROUP_MAP": "ops=admin"})
    assert out["AUTHENTICATION_BACKENDS"] == ["accounts.backend.GpudashOIDCBackend"]
    assert (
        out["OIDC_USE_PKCE"]
        and out["OIDC_USE_NONCE"]
        and not out["OIDC_STORE_ACCESS_TOKEN"]
        and not out["OIDC_STORE_ID_TOKEN"]
    )
    assert out["GPUDASH_KUBE_IMPERSONATION"] == ("*",) and out["GPUDASH_KUBE_IMPERSONATE_GROUPS"] == "mapped"
    assert out["GPUDASH_KUBE_USERNAME_PREFIX"] == "oidc:" and out["GPUDASH_KUBE_USERNAME_CLAIM"] == "preferred_username"
    assert sign_in_settings({**PROVIDER, "GPUDASH_KUBE_IMPERSONATION": "off"})["GPUDASH_KUBE_IMPERSONATION"] == ()
    assert sign_in_settings({**PROVIDER, "GPUDASH_KUBE_IMPERSONATION": "prod, lab"})["GPUDASH_KUBE_IMPERSONATION"] == (
        "prod",
        "lab",
    )
    assert sign_in_settings({**PROVIDER, "OIDC_USERNAME_CLAIM": "email"})["GPUDASH_KUBE_USERNAME_CLAIM"] == "email"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"OIDC_OP_TOKEN_ENDPOINT": ""}, "OIDC_OP_TOKEN_ENDPOINT not"),
        ({"GPUDASH_PASSWORD_LOGIN": "maybe"}, "GPUDASH_PASSWORD_LOGIN='maybe'"),
        ({"OIDC_GROUP_MAP": "team=boss"}, "role 'boss' is not one of viewer, operator, admin"),
        ({"OIDC_GROUP_MAP": "team-a"}, "entry 1 ('team-a'): expected GROUP=ROLE"),
        ({"OIDC_TIMEOUT": "soon"}, "OIDC_TIMEOUT='soon'"),
        ({"GPUDASH_KUBE_IMPERSONATE_GROUPS": "some"}, "expected one of mapped, all"),
    ],
)
def test_bad_settings_are_refused_by_name(env, message):
    with pytest.raises(ConfigError) as exc:
        sign_in_settings({**PROVIDER, **env})
    assert message in str(exc.value)


def test_group_map_highest_role_over_the_union_of_namespaces():
    rules = parse_group_map(
        "gpu-team-a=operator:team-a,team-a-dev; gpu-team-b = viewer : team-b ;gpu-viewers=viewer; gpu-admins=admin"
    )
    both = rights_for(["gpu-team-a", "gpu-team-b", "other"], rules)
    assert both.role == "operator" and both.namespaces == ["team-a", "team-a-dev", "team-b"]
    assert ("namespace team-b", "gpu-team-b") in both.sources and ("role operator", "gpu-team-a") in both.sources
    assert rights_for(["gpu-team-a", "gpu-viewers"], rules).namespaces is None  # an entry without namespaces: all
    admin = rights_for(["gpu-admins", "gpu-team-b"], rules)
    assert admin.role == "admin" and admin.namespaces is None
    nothing = rights_for(["marketing"], rules)
    assert nothing.role is None and nothing.sources == []
    with pytest.raises(GroupMapError, match="empty namespace list"):
        parse_group_map("g=viewer: , ")


@pytest.mark.django_db
def test_admin_lists_sign_in_identities_read_only(client):
    from django.contrib.auth.models import User

    from accounts.models import SignInIdentity

    root = User.objects.create_superuser("root", password="root-pw-1")
    alice = User.objects.create_user("alice")
    SignInIdentity.objects.create(
        user=alice, issuer="https://idp.example", subject="sub-alice", kube_username="oidc:alice"
    )
    client.force_login(root)
    page = client.get("/admin/accounts/signinidentity/")
    assert page.status_code == 200 and b"oidc:alice" in page.content
    assert client.get("/admin/accounts/signinidentity/add/").status_code == 403
