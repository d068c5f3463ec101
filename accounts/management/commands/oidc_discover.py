from django.core.management.base import BaseCommand, CommandError

from accounts.discovery import DiscoveryError, discover


class Command(BaseCommand):
    help = "Print the OIDC_OP_* settings for an OpenID provider, read from its discovery document."

    def add_arguments(self, parser):
        parser.add_argument(
            "issuer", help="the issuer URL, exactly as the provider writes it (e.g. https://idp.example.com/realms/x)"
        )
        parser.add_argument("--timeout", type=float, default=10.0)

    def handle(self, issuer, timeout, **options):
        try:
            values = discover(issuer, timeout=timeout)
        except DiscoveryError as exc:
            raise CommandError(str(exc)) from None
        for name, value in values.items():
            self.stdout.write(f"{name}={value}")
