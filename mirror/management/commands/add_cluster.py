"""Register a cluster to mirror: `manage.py add_cluster NAME --kubeconfig PATH [--context CTX]`."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from mirror.models import Cluster


class Command(BaseCommand):
    help = "Register (or update) a Kubernetes cluster for gpudash to mirror."

    def add_arguments(self, parser):
        parser.add_argument("name", help="Short name for the cluster (letters, digits, - and _).")
        parser.add_argument("--kubeconfig", default="", help="Path to the kubeconfig file.")
        parser.add_argument("--context", default="", help="Context in the kubeconfig (default: its current context).")
        parser.add_argument(
            "--in-cluster", action="store_true", help="Use the pod's service account instead of a kubeconfig."
        )
        parser.add_argument(
            "--read-only", action="store_true", help="Never write to this cluster (release actions disabled)."
        )

    def handle(self, *args, name, kubeconfig, context, in_cluster, read_only, **options):
        if slugify(name) != name:
            raise CommandError(f"cluster name {name!r} is not valid: use lowercase letters, digits, '-' and '_'")
        if in_cluster and kubeconfig:
            raise CommandError("give either --kubeconfig or --in-cluster, not both")
        if not in_cluster:
            if not kubeconfig:
                raise CommandError("--kubeconfig PATH is required (or --in-cluster)")
            path = Path(kubeconfig).expanduser()
            if not path.is_file():
                raise CommandError(f"kubeconfig {kubeconfig}: no such file")
            kubeconfig = str(path.resolve())
            self._check_context(path, context)
        existing = Cluster.objects.filter(name=name).first()
        if existing is not None and existing.is_snapshot:
            raise CommandError(f"cluster {name!r} is an imported snapshot; pick another name")
        cluster, created = Cluster.objects.update_or_create(
            name=name,
            defaults={
                "kubeconfig": kubeconfig,
                "context": context,
                "in_cluster": in_cluster,
                "read_only": read_only,
                "enabled": True,
            },
        )
        self.stdout.write(f"{'Added' if created else 'Updated'} cluster {cluster.name} (id {cluster.pk}).")

    def _check_context(self, path, context):
        import yaml

        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise CommandError(f"kubeconfig {path}: cannot read it: {exc}") from exc
        if not isinstance(doc, dict):
            raise CommandError(f"kubeconfig {path}: not a kubeconfig (expected a YAML mapping)")
        names = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
        if context and context not in names:
            raise CommandError(
                f"kubeconfig {path}: no context {context!r} (has: {', '.join(map(str, names)) or 'none'})"
            )
        if not context and not doc.get("current-context") and len(names) != 1:
            raise CommandError(
                f"kubeconfig {path}: no current-context; pass --context (has: {', '.join(map(str, names)) or 'none'})"
            )
