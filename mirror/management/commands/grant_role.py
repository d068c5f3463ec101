from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from mirror import roles


class Command(BaseCommand):
    help = "Give a user one role (viewer, operator, admin), optionally limited to some namespaces."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=roles.ROLES)
        parser.add_argument("--namespaces", default=None, help="Comma-separated namespaces; empty string = all.")

    def handle(self, *args, username, role, namespaces, **opts):
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        scope = None if namespaces is None else [n.strip() for n in namespaces.split(",") if n.strip()]
        roles.grant(user, role, scope)
        where = ", ".join(scope) if scope else "all namespaces"
        self.stdout.write(f"{username}: {role} ({where if scope is not None else 'scope unchanged'})")
