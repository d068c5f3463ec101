"""What the pages show of device status (drivers) and device health (kubelet): the rows of a claim
and of a pod, and the panels the device and node pages (inventory) get through
mirror.views.register_page_parts."""

from django.template.loader import render_to_string

from mirror import roles
from mirror.objectpage import to_yaml

from .models import ClaimDeviceStatus, PodResourceHealth

HEALTH_ORDER = {"Unhealthy": 0, "Unknown": 1, "": 2, "Healthy": 3}


def with_yaml(statuses):
    """The rows, each with `data_yaml`: its opaque data as block YAML ("" without data)."""
    for s in statuses:
        s.data_yaml = "" if s.data is None else to_yaml(s.data)
    return statuses


def claim_statuses(claim):
    return with_yaml(list(claim.device_statuses.order_by("id")))


def claim_health(claim):
    """What the kubelet reports about the claim's devices, from the pods that use it."""
    rows = (
        PodResourceHealth.objects.filter(
            cluster_id=claim.cluster_id, namespace=claim.namespace, resource_claim_name=claim.name
        )
        .select_related("pod")
        .order_by("pod__name", "id")
        .with_devices()
    )
    return rows


def pod_health(pod):
    return pod.resource_health.order_by("id").with_devices()


def _visible(request, rows):
    return [r for r in rows if roles.can_see_namespace(request.user, r.namespace)]


def _panel(view, template, section):
    return render_to_string(template, {"section": section}, request=view.request)


def device_panel(view, device):
    """The device page: the status entries drivers wrote for it (one per claim holding it) and the
    health the kubelet reports for it."""
    if device is None:
        return ""
    request = view.request
    statuses = roles.scope_queryset(
        ClaimDeviceStatus.objects.filter(
            cluster_id=device.cluster_id, driver=device.driver, pool=device.pool, device=device.name
        ).select_related("claim"),
        request.user,
    ).order_by("claim__namespace", "claim__name", "id")
    health = PodResourceHealth.objects.select_related("pod").for_devices(
        device.cluster_id, {(device.driver, device.pool, device.name)}
    )
    return _panel(
        view,
        "claims/_device_health_section.html",
        {
            "cluster_name": device.slice.cluster.name,
            "statuses": with_yaml(list(statuses)),
            "health": sorted(_visible(request, health), key=lambda r: (r.pod.namespace, r.pod.name, r.id)),
        },
    )


def node_panel(view, node):
    """The node page: per device of the node's claims, the driver's Ready condition and the
    kubelet's health reports (worst first)."""
    if node is None:
        return ""
    request = view.request
    statuses = roles.scope_queryset(
        ClaimDeviceStatus.objects.filter(cluster_id=node.cluster_id, claim__node_name=node.name).select_related(
            "claim"
        ),
        request.user,
    )
    health = roles.scope_queryset(
        PodResourceHealth.objects.filter(cluster_id=node.cluster_id, pod__node_name=node.name).select_related("pod"),
        request.user,
    ).with_devices()
    by_device = {}
    for s in statuses:
        by_device.setdefault((s.driver, s.pool, s.device), {"statuses": [], "health": []})["statuses"].append(s)
    for h in health:
        key = h.device_key or ("", "", "")
        by_device.setdefault(key, {"statuses": [], "health": []})["health"].append(h)
    rows = []
    for key, parts in by_device.items():
        parts["health"].sort(key=lambda h: (HEALTH_ORDER.get(h.health, 2), h.pod.name, h.id))
        rows.append({"key": key, "driver": key[0], "pool": key[1], "device": key[2], **parts})
    rows.sort(key=lambda r: (min((HEALTH_ORDER.get(h.health, 2) for h in r["health"]), default=3), r["key"]))
    return _panel(view, "claims/_node_health_section.html", {"cluster_name": node.cluster.name, "rows": rows})
