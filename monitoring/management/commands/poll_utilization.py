"""`manage.py poll_utilization [--cluster NAME]`: one utilization poll now (the same code as the beat task)."""

from django.core.management.base import BaseCommand, CommandError

from monitoring.utilization import poll_all


class Command(BaseCommand):
    help = "Read GPU utilization from each cluster's Prometheus once and store it."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", action="append", default=[], help="Only this cluster (repeatable).")

    def handle(self, *args, cluster, **options):
        results = poll_all(cluster)
        if not results:
            raise CommandError("no cluster has a Prometheus source (see `manage.py set_prometheus`)")
        failed = False
        for name, r in results.items():
            if r.error:
                failed = True
                self.stdout.write(f"{name}: error: {r.error}")
            else:
                unmatched = (
                    f", {sum(r.unmatched.values())} series matched no device ({dict(r.unmatched)})"
                    if r.unmatched
                    else ""
                )
                self.stdout.write(f"{name}: {r.matched} devices{unmatched}")
        if failed:
            raise CommandError("some polls failed")
