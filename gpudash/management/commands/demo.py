"""One command for a fresh machine: SQLite, the built-in demo cluster with churn, watchers, web server."""

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from gpudash.management.commands.serve import serve
from mirror import roles
from mirror.models import Cluster

DEMO_USER, DEMO_PASSWORD = "demo", "demo"  # demo only: this command never runs against a real cluster


class Command(BaseCommand):
    help = "Run gpudash with the built-in demo cluster (embedded SQLite, no Redis needed)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--api-port", type=int, default=0, help="Port of the built-in API server (0 = any free).")
        parser.add_argument(
            "--scenario",
            default="demo-mixed",
            help="Scenario name or YAML path (demo-mixed: the demo fleet plus device-plugin and HAMi nodes).",
        )
        parser.add_argument("--churn", type=float, default=0.5, help="Demo changes per second (0 = none).")

    def handle(self, *args, **opts):
        from devcluster.churn import Churn
        from devcluster.scenario import load_scenario
        from devcluster.server import DevCluster

        call_command("migrate", interactive=False, verbosity=0)
        user, created = User.objects.get_or_create(username=DEMO_USER, defaults={"is_staff": True})
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        roles.grant(user, roles.ADMIN)

        server = DevCluster(port=opts["api_port"])
        load_scenario(server.store, opts["scenario"])
        api_url = server.start()
        kubeconfig = settings.DATA_DIR / "demo-kubeconfig.yaml"
        server.write_kubeconfig(str(kubeconfig), context="demo")
        # A fresh API server starts its resourceVersions from scratch: drop the old mirror of it.
        Cluster.objects.filter(name="demo").delete()
        Cluster.objects.create(name="demo", kubeconfig=str(kubeconfig), context="demo")
        churn = Churn(server.store, rate=opts["churn"]) if opts["churn"] > 0 else None
        if churn:
            churn.start()

        url = f"http://127.0.0.1:{opts['port']}/"
        self.stdout.write(self.style.SUCCESS(f"gpudash demo: {url}  (login {DEMO_USER} / {DEMO_PASSWORD})"))
        self.stdout.write(f"Built-in API server for cluster 'demo': {api_url}")
        try:
            serve("127.0.0.1", opts["port"], in_process_watchers=not settings.REDIS_URL)
        finally:
            if churn:
                churn.stop()
            server.stop()
