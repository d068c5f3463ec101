import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from mirror import roles

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_default]


def test_grant_role_command_sets_role_and_scope():
    user = User.objects.create_user("bob")
    call_command("grant_role", "bob", "operator", "--namespaces", "ml-training, inference")
    user.refresh_from_db()
    assert roles.role_of(user) == roles.OPERATOR
    assert roles.visible_namespaces(user) == {"ml-training", "inference"}
    assert roles.can_operate(user, "inference") and not roles.can_operate(user, "research")


def test_a_new_role_replaces_the_old_one():
    user = User.objects.create_user("carol")
    roles.grant(user, roles.ADMIN)
    roles.grant(user, roles.VIEWER)
    assert roles.role_of(user) == roles.VIEWER
    assert not roles.can_operate(user)


def test_admins_see_every_namespace_even_with_a_scope():
    user = User.objects.create_user("dave")
    roles.grant(user, roles.ADMIN, ["ml-training"])
    assert roles.visible_namespaces(user) is None


def test_unknown_user_is_a_clear_error():
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("grant_role", "nobody", "viewer")
