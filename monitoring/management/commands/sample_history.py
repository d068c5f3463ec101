"""`manage.py sample_history [--prune]`: store this minute's fleet-history sample now (the same code
as the beat task); with --prune, also delete history older than the retention."""

from django.core.management.base import BaseCommand

from inventory import vanished
from monitoring import history, utilization


class Command(BaseCommand):
    help = "Store this minute's fleet-history sample (and, with --prune, delete samples past the retention)."

    def add_arguments(self, parser):
        parser.add_argument("--prune", action="store_true", help="Also delete history older than GPUDASH_HISTORY_DAYS.")

    def handle(self, *args, prune, **options):
        self.stdout.write(f"{history.sample()} history rows written")
        if prune:
            self.stdout.write(
                f"{history.prune()} history rows, {utilization.prune()} utilization samples and "
                f"{vanished.prune(history.retention_days())} last-seen records pruned"
            )
