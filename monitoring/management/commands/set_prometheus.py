"""`manage.py set_prometheus CLUSTER URL [--auth-header H] [--selector S] [--disable]`."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from mirror.models import Cluster
from monitoring.models import PrometheusSource


class Command(BaseCommand):
    help = "Name the Prometheus that scrapes a cluster's dcgm-exporter (GPU utilization is polled from it)."

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("url", help="e.g. http://prometheus.monitoring:9090")
        parser.add_argument("--auth-header", default="", help="Authorization header value, e.g. 'Bearer TOKEN'.")
        parser.add_argument("--selector", default="", help='Label matchers for every query, e.g. cluster="prod".')
        parser.add_argument("--disable", action="store_true", help="Keep the source but stop polling it.")

    def handle(self, *args, cluster, url, auth_header, selector, disable, **options):
        try:
            target = Cluster.objects.get(name=cluster)
        except Cluster.DoesNotExist:
            raise CommandError(f"no such cluster: {cluster} (see `manage.py add_cluster`)") from None
        source = PrometheusSource.objects.filter(cluster=target).first() or PrometheusSource(cluster=target)
        source.url, source.auth_header, source.series_selector, source.enabled = url, auth_header, selector, not disable
        try:
            source.full_clean(exclude=["cluster"])
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        source.save()
        self.stdout.write(f"cluster {cluster}: utilization from {url}{' (disabled)' if disable else ''}")
