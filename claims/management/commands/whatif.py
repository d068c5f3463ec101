"""`manage.py whatif`: what would these changes do to the pending pods and claims? (nothing is written)"""

import json

from django.core.management.base import BaseCommand, CommandError

from claims.whatif import capacity_rows
from dra import whatif


class Command(BaseCommand):
    help = (
        "Apply hypothetical changes to a copy of a cluster's inventory and show, for every pending pod and "
        "claim, whether it becomes schedulable, stays blocked or loses its place. Nothing is written to the "
        "cluster. Changes: " + "; ".join(whatif.__doc__.split("\n\n")[1].strip().splitlines())
    )

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="Cluster in the database (default: the only one).")
        parser.add_argument(
            "--change",
            action="append",
            dest="changes",
            default=[],
            metavar="LINE",
            help="One change, e.g. 'add gpu-h100-02 3' or 'drain gpu-h100-04' (repeatable, applied in order).",
        )
        parser.add_argument("--file", help="A file of changes, one per line ('#' starts a comment).")
        parser.add_argument(
            "--shape",
            action="append",
            dest="shapes",
            default=[],
            metavar="COUNT x CLASS",
            help="Count the headroom of this request shape before and after, e.g. '8 x gpu.nvidia.com' (repeatable).",
        )
        parser.add_argument("--json", action="store_true", help="Print the JSON document the API returns.")

    def handle(self, *args, **opts):
        from claims.preview import PreviewError
        from claims.whatif import run_whatif
        from mirror.models import Cluster

        changes = list(opts["changes"])
        if opts["file"]:
            try:
                with open(opts["file"], encoding="utf-8") as fh:
                    changes += [
                        line for line in fh.read().splitlines() if line.strip() and not line.lstrip().startswith("#")
                    ]
            except OSError as exc:
                raise CommandError(f"cannot read --file {opts['file']}: {exc.strerror}") from None
        if opts["cluster"]:
            cluster = Cluster.objects.filter(name=opts["cluster"]).first()
            if cluster is None:
                raise CommandError(f"no cluster named {opts['cluster']!r}")
        else:
            clusters = list(Cluster.objects.all()[:2])
            if len(clusters) != 1:
                raise CommandError(
                    "give --cluster NAME: "
                    + ("no cluster in the database" if not clusters else "there are several clusters")
                )
            cluster = clusters[0]
        try:
            result = run_whatif(cluster, changes=changes, shapes=opts["shapes"])
        except PreviewError as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(result, indent=2))
        else:
            self._print(result)

    def _print(self, result):
        s = result["summary"]
        self.stdout.write(f"Cluster {s['cluster']}; changes: {'; '.join(s['changes']) or '(none)'}")
        if s["addedNodes"]:
            self.stdout.write(f"Added nodes: {', '.join(s['addedNodes'])}")
        for note in s["notes"]:
            self.stdout.write(f"Note: {note}")
        counts = ", ".join(f"{name} {n}" for name, n in s["verdicts"].items() if n)
        self.stdout.write(f"{s['workloads']} pending pods and claims: {counts or 'none'}")
        for entry in result["workloads"]:
            after = entry["after"] or {}
            where = ", ".join(after.get("nodes") or [])
            detail = f"fits on {after.get('fits', 0)} node(s){': ' + where if where else ''}"
            if entry["verdict"] == whatif.ERROR:
                detail = after.get("error") or ""
            self.stdout.write(
                f"  {entry['verdict']:<18} {entry['kind']} {entry['namespace']}/{entry['name']}  {detail}"
            )
        for item in result["displaced"]:
            self.stdout.write(f"  {'loses its place':<18} pod {item['pod']} ({item['why']} {item['node']})")
        for row in result["headroom"]:
            before, after = row["before"], row["after"]
            self.stdout.write(
                f"Headroom {row['shape']}: {before.get('copies', before.get('error'))} -> {after.get('copies', after.get('error'))}"
            )
        titles = {"gpus": "whole GPUs", "gpusFree": "whole GPUs free", "stranded": "GPUs stranded by partitions"}
        for row in capacity_rows(result.get("capacity")):
            what = titles.get(row["kind"]) or f"{row['profile']} partitions creatable"
            self.stdout.write(f"Capacity on the changed nodes, {what}: {row['before']} -> {row['after']}")
        if result.get("capacity") is None:
            self.stdout.write("Capacity: not counted (a change reaches every node)")
