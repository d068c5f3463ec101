"""Utilization on the pages: a device's latest values, tables for a node's or a claim's devices,
the poll status (errors shown, never hidden), and idle GPU-hours by namespace for the overview."""

from django import template

from gpudash import roles

from ..idle import idle_gpu_hours_by_namespace
from ..models import PrometheusSource
from ..utilization import latest

register = template.Library()

# Fleet-map colouring buckets (percent): cell class u-<index>.
BUCKETS = (5, 25, 50, 75)


def bucket(percent):
    return sum(1 for edge in BUCKETS if percent >= edge)


def _status(cluster_id):
    return PrometheusSource.objects.filter(cluster_id=cluster_id).first()


@register.inclusion_tag("monitoring/_device_utilization.html")
def device_utilization(device):
    sample = latest([device.cluster_id], [(device.cluster_id, device.driver, device.pool, device.name)]).get(
        (device.cluster_id, device.driver, device.pool, device.name))
    return {"sample": sample, "source": _status(device.cluster_id)}


@register.inclusion_tag("monitoring/_utilization_table.html", takes_context=True)
def devices_utilization(context, cluster_id, keys, title="Utilization"):
    """A table of (driver, pool, device) keys' latest values."""
    keys = [(cluster_id, *k) for k in keys]
    found = latest([cluster_id], keys)
    return {"rows": [(k, found.get(k)) for k in keys], "source": _status(cluster_id), "title": title}


@register.filter
def stuck_only(findings):
    """The findings that make a claim stuck (report-only ones, such as idle GPUs, do not)."""
    from claims.models import REPORT_ONLY_RULES

    return [f for f in findings or [] if f.rule not in REPORT_ONLY_RULES]


@register.simple_tag
def node_device_keys(devices):
    return [(d.driver, d.pool, d.name) for d in devices]


@register.simple_tag
def claim_device_keys(claim):
    return [(r.driver, r.pool, r.device) for r in claim.results.all()]


@register.inclusion_tag("monitoring/_utilization_overview.html", takes_context=True)
def utilization_overview(context, cluster_ids):
    sources = PrometheusSource.objects.select_related("cluster")
    if cluster_ids is not None:
        sources = sources.filter(cluster_id__in=cluster_ids)
    scope = roles.visible_namespaces(context["request"].user)
    idle = idle_gpu_hours_by_namespace(cluster_ids)
    if scope is not None:
        idle = [(ns, h) for ns, h in idle if ns in scope]
    return {"sources": list(sources), "idle": idle}
