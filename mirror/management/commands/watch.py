"""Run the list+watch loops in the foreground: `manage.py watch [--cluster NAME] [--once]`."""

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from mirror.models import Cluster, SyncState
from mirror.sync.runner import Supervisor


class Command(BaseCommand):
    help = "Mirror clusters in the foreground (the same loops the Celery workers run)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", action="append", default=[], help="Only this cluster (repeatable).")
        parser.add_argument("--once", action="store_true", help="List every served kind once, then exit.")

    def handle(self, *args, cluster, once, **options):
        known = set(Cluster.objects.filter(name__in=cluster).values_list("name", flat=True))
        missing = sorted(set(cluster) - known)
        if missing:
            raise CommandError(f"no such cluster: {', '.join(missing)} (see `manage.py add_cluster`)")
        supervisor = Supervisor(cluster_names=cluster, once=once)
        if once:
            supervisor.run()
            self._report(cluster)
            return
        stopped = threading.Event()

        def on_signal(signum, frame):
            stopped.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"watching as {supervisor.holder}; Ctrl-C to stop")
        self.stdout.flush()
        supervisor.start()
        while not stopped.wait(1.0):
            if not supervisor.thread.is_alive():
                raise CommandError("sync supervisor died; see the log above")
        supervisor.stop()

    def _report(self, names):
        states = SyncState.objects.select_related("cluster")
        if names:
            states = states.filter(cluster__name__in=names)
        failed = False
        for state in states:
            line = f"{state.cluster.name} {state.kind}: {state.status} ({state.object_count} objects, rv {state.resource_version or '-'})"
            if state.status == SyncState.Status.ERROR:
                failed = True
                line += f" {state.last_error}"
            self.stdout.write(line)
        if failed:
            raise CommandError("some kinds failed to sync")
