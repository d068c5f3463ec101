"""Load a `kubectl get ... -A -o json` dump as a read-only snapshot cluster.

kubectl get deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods,nodes -A -o json > dump.json
python manage.py import_snapshot dump.json --name prod-dump
"""

import json
from collections import defaultdict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from mirror.models import Cluster, SyncState
from mirror.sync.apply import LISTED, apply_batch
from mirror.sync.kinds import KINDS, KINDS_BY_NAME


class Command(BaseCommand):
    help = "Import a kubectl JSON dump (a List of mixed kinds) as a read-only snapshot cluster."

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSON written by `kubectl get ... -A -o json`.")
        parser.add_argument("--name", default="", help="Cluster name (default: from the file name).")

    def handle(self, *args, file, name, **options):
        path = Path(file)
        items = self._read_items(path)
        name = name or slugify(path.stem)[:63] or "snapshot"
        if slugify(name) != name:
            raise CommandError(f"cluster name {name!r} is not valid: use lowercase letters, digits, '-' and '_'")
        existing = Cluster.objects.filter(name=name).first()
        if existing is not None and not existing.is_snapshot:
            raise CommandError(f"cluster {name!r} exists and is a live cluster; pick another --name")

        by_kind, skipped = defaultdict(list), defaultdict(int)
        for index, item in enumerate(items):
            kind = item.get("kind") if isinstance(item, dict) else None
            if kind in KINDS_BY_NAME:
                by_kind[kind].append(item)
            else:
                skipped[str(kind)] += 1
                if not isinstance(item, dict):
                    self.stderr.write(f"{path}: items[{index}] is not an object; skipped")

        malformed = 0
        with transaction.atomic():
            if existing is not None:
                existing.delete()  # a re-import replaces the snapshot wholesale
            cluster = Cluster.objects.create(name=name, is_snapshot=True, read_only=True, discovered_at=timezone.now())
            for spec in KINDS:
                result = apply_batch(
                    cluster, spec.kind, [(LISTED, raw) for raw in by_kind.get(spec.kind, [])], record_states=False
                )
                for message, text in result.malformed:
                    self.stderr.write(f"{path}: {message}: {text[:300]}")
                malformed += len(result.malformed)
                SyncState.objects.create(
                    cluster=cluster,
                    kind=spec.kind,
                    status=SyncState.Status.SNAPSHOT,
                    object_count=spec.model.objects.filter(cluster=cluster).count(),
                    malformed_count=len(result.malformed),
                    last_list_at=timezone.now(),
                )
            versions = sorted(
                {
                    str(item.get("apiVersion"))
                    for items_ in by_kind.values()
                    for item in items_
                    if "/" in str(item.get("apiVersion"))
                }
            )
            Cluster.objects.filter(pk=cluster.pk).update(served_resource_versions=versions)

        counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_kind.items())) or "nothing"
        self.stdout.write(f"Imported snapshot cluster {name} (id {cluster.pk}): {counts}.")
        if skipped:
            self.stdout.write(
                "Skipped kinds gpudash does not mirror: " + ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
            )
        if malformed:
            self.stderr.write(f"{malformed} malformed object(s) were not imported (listed above).")

    def _read_items(self, path):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CommandError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it: {exc}") from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise CommandError(f"{path}: not JSON ({exc}); expected the output of `kubectl get ... -o json`") from exc
        if not isinstance(doc, dict):
            raise CommandError(f"{path}: expected a JSON object (a List), got {type(doc).__name__}")
        if "items" not in doc:
            if doc.get("kind") in KINDS_BY_NAME:
                return [doc]  # a single object (`kubectl get pod x -o json`)
            raise CommandError(f"{path}: no 'items' list; expected a List from `kubectl get ... -o json`")
        if not isinstance(doc["items"], list):
            raise CommandError(f"{path}: 'items' is not a list")
        return doc["items"]
