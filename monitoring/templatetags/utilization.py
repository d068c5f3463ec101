"""Utilization on the pages: a device's latest values, tables for a node's or a claim's devices,
the poll status (errors shown, never hidden), and idle GPU-hours by namespace for the overview."""

from django import template

from mirror import roles

from ..idle import idle_gpu_hours_by_namespace
from ..models import PrometheusSource
from ..utilization import latest

register = template.Library()


def _status(cluster_id):
    return PrometheusSource.objects.filter(cluster_id=cluster_id).first()


@register.inclusion_tag("monitoring/_device_utilization.html")
def device_utilization(device):
    sample = latest([device.cluster_id], [(device.cluster_id, device.driver, device.pool, device.name)]).get(
        (device.cluster_id, device.driver, device.pool, device.name)
    )
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


@register.simple_tag
def utilization_hint(pods):
    """Why a page's GPU utilization column is empty, in words (None when nothing needs saying)."""
    from django.utils.translation import gettext

    cluster_ids = {p.cluster_id for p in pods}
    if not cluster_ids:
        return None
    sources = PrometheusSource.objects.filter(cluster_id__in=cluster_ids, enabled=True)
    if not sources.exists():
        return gettext("no metrics source configured: add the cluster's Prometheus (dcgm-exporter) in the admin")
    if not sources.exclude(last_minute=None).exists():
        return gettext("no samples yet: the metrics source has not been polled successfully")
    return gettext("no samples for these pods' devices in the last poll")


@register.simple_tag
def pods_utilization(pods):
    """{pod id: [(device, GPU utilization %)]} for a page of pods (their `refs` set by the pod list):
    the latest poll's values of the devices their claims hold. One query for the claims' allocation
    results, one for the samples, whatever the page size."""
    from collections import defaultdict

    from claims.models import AllocationResult

    pods_of_claim = defaultdict(list)
    for p in pods:
        for ref in getattr(p, "refs", ()):
            if ref.claim_name:
                pods_of_claim[(p.cluster_id, p.namespace, ref.claim_name)].append(p.id)
    if not pods_of_claim:
        return {}
    from claims.lookups import claim_keys_q

    results = (
        AllocationResult.objects.filter(claim_keys_q(pods_of_claim, prefix="claim__"), admin_access=False)
        .values_list("cluster_id", "claim__namespace", "claim__name", "driver", "pool", "device")
        .order_by("cluster_id", "pool", "device")
    )
    held = [(r[:3], (r[0], *r[3:])) for r in results if r[:3] in pods_of_claim]
    found = latest({k[0] for k in pods_of_claim}, [key for _claim, key in held])
    out = defaultdict(list)
    for claim, key in held:
        sample = found.get(key)
        if sample is not None and sample.gpu_util is not None:
            for pod_id in pods_of_claim[claim]:
                out[pod_id].append((key[3], sample.gpu_util))
    return dict(out)


@register.filter
def util_of(pods_util, pod_id):
    """The (device, %) pairs of one pod from `pods_utilization`'s answer."""
    return pods_util.get(pod_id, ()) if pods_util else ()


@register.simple_tag
def result_device_keys(results):
    """(driver, pool, device) of allocation results (a pod's devices)."""
    return [(r.driver, r.pool, r.device) for r in results]
