"""`manage.py create_token USER [--reset]`: print the user's REST API token (created if missing)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from mirror.roles import role_of


class Command(BaseCommand):
    help = "Print USER's API token for `Authorization: Token <key>`, creating it if needed."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--reset", action="store_true", help="Replace an existing token (the old one stops working)."
        )

    def handle(self, username, reset=False, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(
                f"No user named {username!r}; create one with `manage.py createsuperuser` or the admin."
            ) from exc
        if reset:
            Token.objects.filter(user=user).delete()
        token, created = Token.objects.get_or_create(user=user)
        if role_of(user) is None:
            self.stderr.write(f"warning: {username} has no gpudash role; the API will answer 403 until one is granted.")
        self.stdout.write(token.key)
