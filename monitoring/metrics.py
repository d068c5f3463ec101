"""/metrics: the fleet, the sync and operations in Prometheus' text format (prometheus-client).

Every family is read from what is already stored (the per-node device summary, claim states, the
sync state rows, the audit log, stored counters), a handful of GROUP BYs per scrape, so a scrape
costs the same whatever else the dashboard is doing and every web replica reports the same fleet.
Only the preview histogram is process-local (previews run in the process that serves them).
Names follow Prometheus conventions: `gpudash_` prefix, base units, `_total` for counters.
"""

import hmac

from django.conf import settings
from django.db.models import Count, Q, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from mirror import instruments


def monitoring_setting(name, default=None):
    return (getattr(settings, "GPUDASH_MONITORING", None) or {}).get(name, default)


def _cluster_names():
    from mirror.models import Cluster

    return dict(Cluster.objects.values_list("id", "name"))


def node_pools():
    """{(cluster_id, node): pool} for nodes carrying one of NODE_POOL_LABELS (the first present wins)."""
    from inventory.models import Node

    labels = monitoring_setting("NODE_POOL_LABELS", []) or []
    if not labels:
        return {}
    carrying = Q()
    for label in labels:
        carrying |= Q(labels__has_key=label)
    pool = Coalesce(*[KT(f"labels__{label}") for label in labels], Value(""), output_field=TextField())
    return {
        (cid, name): p
        for cid, name, p in Node.objects.filter(carrying, namespace="")
        .annotate(node_pool=pool)
        .values_list("cluster_id", "name", "node_pool")
    }


_COUNTS = ("n_free", "n_tainted_unheld", "n_allocated", "n_admin", "n_partial")


def _summary_groups():
    """Per (cluster_id, driver, model, kind): the summary's counts with node readiness applied, as
    fleet.FleetSnapshot sums them, plus free whole GPUs per (cluster_id, node pool, model).

    The summary rows (one per node, driver, model and kind) are read once and summed here: the
    SQL GROUP BY with a NotReady lookup per row costs several times more on a large fleet.
    """
    from inventory.models import Node, NodeDeviceSummary

    unready = set(Node.objects.filter(ready=False, namespace="").values_list("cluster_id", "name"))
    pools = node_pools()
    groups, free = {}, {}
    for cid, driver, model, kind, node, *counts in NodeDeviceSummary.objects.values_list(
        "cluster_id", "driver", "model", "kind", "node_name", *_COUNTS
    ).iterator(chunk_size=5000):
        n_free, tainted_unheld, allocated, admin, partial = counts
        is_unready = bool(node) and (cid, node) in unready
        g = groups.setdefault(
            (cid, driver, model, kind),
            {"free": 0, "unready_free": 0, "tainted_unheld": 0, "allocated": 0, "admin": 0, "partial": 0},
        )
        g["unready_free" if is_unready else "free"] += n_free
        g["tainted_unheld"] += tainted_unheld
        g["allocated"] += allocated
        g["admin"] += admin
        g["partial"] += partial
        if kind == "gpu" and node:
            key = (cid, pools.get((cid, node), ""), model)
            free[key] = free.get(key, 0) + (0 if is_unready else n_free)
    return groups, free


class FleetCollector:
    """Devices, free whole GPUs, claims and findings."""

    def collect(self):
        from collections import Counter

        from claims.models import Finding, ResourceClaim
        from inventory import fleet, summary

        names = _cluster_names()
        devices = GaugeMetricFamily(
            "gpudash_devices",
            "Devices by cluster, driver, model, kind (gpu, partition, other) and state.",
            labels=["cluster", "driver", "model", "kind", "state"],
        )
        groups, free_gpus = _summary_groups()
        # Devices held by stuck claims: the short list fleet.py applies when reading (keyed like the summary).
        where = [summary.KEY.index(k) for k in ("cluster_id", "driver", "model", "kind")]
        stuck = {}
        for key, counts in fleet.FleetSnapshot().stuck.items():
            stuck.setdefault(tuple(key[i] for i in where), Counter()).update(counts)
        for (cid, driver, model, kind), row in groups.items():
            for state, n in fleet._decide(row, stuck.get((cid, driver, model, kind))).items():
                devices.add_metric([names.get(cid, ""), driver, model, kind, state], n)
        yield devices

        free = GaugeMetricFamily(
            "gpudash_free_whole_gpus",
            "Whole GPUs that are free (unheld, untainted, on a Ready node), by node pool and model.",
            labels=["cluster", "node_pool", "model"],
        )
        for (cid, pool, model), n in free_gpus.items():
            free.add_metric([names.get(cid, ""), pool, model], n)
        yield free

        claims = GaugeMetricFamily(
            "gpudash_claims", "ResourceClaims by state and namespace.", labels=["cluster", "namespace", "state"]
        )
        pending = GaugeMetricFamily(
            "gpudash_pending_claims", "ResourceClaims waiting for an allocation.", labels=["cluster"]
        )
        pending_by_cluster = dict.fromkeys(names, 0)
        for cid, namespace, state, n in (
            ResourceClaim.objects.values_list("cluster_id", "namespace", "state").annotate(n=Count("id")).order_by()
        ):
            claims.add_metric([names.get(cid, ""), namespace, state], n)
            if state == ResourceClaim.State.PENDING:
                pending_by_cluster[cid] = pending_by_cluster.get(cid, 0) + n
        for cid, n in pending_by_cluster.items():
            pending.add_metric([names.get(cid, "")], n)
        yield claims
        yield pending

        findings = GaugeMetricFamily(
            "gpudash_active_findings",
            "Active findings (stuck claims, idle GPUs) by rule and severity.",
            labels=["cluster", "rule", "severity"],
        )
        for cid, rule, severity, n in (
            Finding.objects.active().values_list("cluster_id", "rule", "severity").annotate(n=Count("id")).order_by()
        ):
            findings.add_metric([names.get(cid, ""), rule, severity], n)
        yield findings


class SyncCollector:
    """Per cluster and kind, from the watchers' SyncState rows."""

    COUNTERS = (
        ("events_applied", "gpudash_sync_events_applied", "Watch events applied to the mirror."),
        ("relist_count", "gpudash_sync_relists", "Full re-LISTs after the first one."),
        ("gone_count", "gpudash_sync_gone", "410 Gone answers (resourceVersion expired), each followed by a relist."),
        (
            "watch_restarts",
            "gpudash_sync_watch_restarts",
            "Watch connections opened (the server ends each after its timeout).",
        ),
        ("malformed_count", "gpudash_sync_malformed_objects", "Objects or watch lines skipped as malformed."),
    )

    def collect(self):
        from mirror.models import SyncState

        now = timezone.now()
        labels = ["cluster", "kind"]
        since = GaugeMetricFamily(
            "gpudash_sync_seconds_since_last_event",
            "Seconds since the last watch event was applied (or the last list).",
            labels=labels,
        )
        objects = GaugeMetricFamily("gpudash_sync_objects", "Objects mirrored.", labels=labels)
        status = GaugeMetricFamily(
            "gpudash_sync_status", "1 for the watcher's current status.", labels=labels + ["status"]
        )
        lease = GaugeMetricFamily(
            "gpudash_sync_lease_held",
            "1 while a watcher holds the (cluster, kind) lease, by holder.",
            labels=labels + ["holder"],
        )
        counters = {field: CounterMetricFamily(name, text, labels=labels) for field, name, text in self.COUNTERS}
        for s in SyncState.objects.select_related("cluster"):
            key = [s.cluster.name, s.kind]
            last = max((t for t in (s.last_event_at, s.last_list_at) if t), default=None)
            if last is not None:
                since.add_metric(key, max((now - last).total_seconds(), 0.0))
            objects.add_metric(key, s.object_count)
            status.add_metric(key + [s.status], 1)
            held = bool(s.lease_holder) and s.lease_expires is not None and s.lease_expires > now
            if held:
                lease.add_metric(key + [s.lease_holder], 1)
            for field, family in counters.items():
                family.add_metric(key, getattr(s, field))
        yield from (since, objects, status, lease, *counters.values())
        from mirror.sync.workers import metric_families  # each worker's share of the leases (issue 15)

        yield from metric_families(GaugeMetricFamily)


class OperationsCollector:
    """Release actions (the audit log), detector runs and utilization polls (stored counters)."""

    def collect(self):
        from claims.models import AuditEntry
        from mirror.models import OpsCounter

        from .models import PrometheusSource

        release = CounterMetricFamily(
            "gpudash_release_actions",
            "Release actions by action and outcome (dry runs included, outcome dry-run).",
            labels=["cluster", "action", "outcome"],
        )
        for cluster, action, outcome, n in (
            AuditEntry.objects.values_list("cluster_name", "action", "outcome").annotate(n=Count("id")).order_by()
        ):
            release.add_metric([cluster, action, outcome], n)
        yield release
        families = {
            "detector_runs": CounterMetricFamily(
                "gpudash_detector_runs", "Stuck-claim detector runs.", labels=["cluster"]
            ),
            "utilization_polls": CounterMetricFamily(
                "gpudash_utilization_polls",
                "Utilization polls of the cluster's Prometheus, by outcome.",
                labels=["cluster", "outcome"],
            ),
        }
        for name, cluster, label, value in OpsCounter.objects.filter(name__in=families).values_list(
            "name", "cluster_name", "label", "value"
        ):
            families[name].add_metric([cluster] + ([label] if name == "utilization_polls" else []), value)
        yield from families.values()
        success = GaugeMetricFamily(
            "gpudash_utilization_last_success_timestamp_seconds",
            "When utilization was last read from the cluster's Prometheus.",
            labels=["cluster"],
        )
        matched = GaugeMetricFamily(
            "gpudash_utilization_devices_matched",
            "Devices the last utilization poll found series for.",
            labels=["cluster"],
        )
        for source in PrometheusSource.objects.select_related("cluster").filter(enabled=True):
            if source.last_success_at:
                success.add_metric([source.cluster.name], source.last_success_at.timestamp())
            matched.add_metric([source.cluster.name], source.devices_matched)
        yield success
        yield matched


# Metric families of the floors above (usage: gpudash_gpu_seconds_total), registered from their
# AppConfig.ready(): callables yielding families, read at every scrape.
_families = []


def register_families(produce):
    if produce not in _families:
        _families.append(produce)


class RegisteredCollector:
    def collect(self):
        for produce in _families:
            yield from produce()


def build_registry():
    registry = CollectorRegistry(auto_describe=False)
    for collector in (FleetCollector(), SyncCollector(), OperationsCollector(), RegisteredCollector()):
        registry.register(collector)
    registry.register(instruments.PREVIEW_SECONDS)
    return registry


REGISTRY = build_registry()


def _authorized(request):
    token = monitoring_setting("METRICS_TOKEN", "")
    if not token:
        return True  # off when unset: documented, protect /metrics with a NetworkPolicy instead
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def metrics_view(request):
    if not _authorized(request):
        response = HttpResponse(
            "a bearer token is required (Authorization: Bearer <GPUDASH_METRICS_TOKEN>)\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="gpudash metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
