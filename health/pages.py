"""Device health on the pages of the floors below (through mirror.views.register_page_parts): the device
page (state, reasons, reports, timeline), the node page (its devices' health), the claim and pod pages
(the health of their devices), the overview (counts) and the fleet map (a marker per device, a legend)."""

from collections import Counter

from django.db.models import Count
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from claims.models import AllocationResult, PodClaimRef
from mirror import roles
from mirror.messages import render

from . import notion
from .models import HEALTHY, MARK_TITLES, SOURCE_LABELS, STATE_LABELS, STATES, DeviceHealth, HealthChange

TIMELINE_ROWS = 50


def state_label(state):
    return STATE_LABELS.get(state, state)


def _shown(names, scope):
    """ "namespace/name" texts the user may see; the others counted, not named."""
    if scope is None:
        return list(names), 0
    seen = [n for n in names if n.split("/", 1)[0] in scope]
    return seen, len(names) - len(seen)


# Parameters of reasons shown as written (Kubernetes' and the driver's words, names): translate="no".
VERBATIM = ("health", "detail", "taint", "rule", "pod", "container")


def reason_html(msg, fallback):
    """A reason's message in the reader's language, as HTML: its verbatim parts marked translate="no"."""
    if not isinstance(msg, dict) or not msg.get("msgid"):
        return fallback
    params = {
        k: f'<span translate="no">{escape(v)}</span>'
        if k in VERBATIM
        else escape(render(v, str(v)) if isinstance(v, dict) else v)
        for k, v in (msg.get("params") or {}).items()
    }
    try:
        return mark_safe(escape(gettext(msg["msgid"])) % params)  # every part escaped above
    except (KeyError, TypeError, ValueError):
        return fallback


def _reasons(reasons, scope=None):
    out = []
    for r in reasons or []:
        text = notion.scoped_reason(r.get("text"), scope)
        fallback = r.get("english", "") if text is r.get("text") else ""
        out.append({"state": r.get("state"), "label": state_label(r.get("state")), "text": reason_html(text, fallback)})
    return out


def health_of(cluster_id, keys):
    """{(driver, pool, device): DeviceHealth} for the keys that are not healthy."""
    keys = set(keys)
    if not keys:
        return {}
    rows = DeviceHealth.objects.filter(cluster_id=cluster_id, device__in={k[2] for k in keys})
    return {(h.driver, h.pool, h.device): h for h in rows if (h.driver, h.pool, h.device) in keys}


def _entry(key, h, scope=None):
    state = h.state if h is not None else HEALTHY
    return {
        "device": "/".join(key),
        "key": key,
        "state": state,
        "label": state_label(state),
        "reasons": _reasons(h.reasons, scope) if h is not None else [],
        "since": h.since if h is not None else None,
    }


def timeline_rows(changes, user):
    scope = roles.visible_namespaces(user)
    rows = []
    for c in changes:
        pods, hidden_pods = _shown(c.pods, scope)
        claims, hidden_claims = _shown(c.claims, scope)
        rows.append(
            {
                "change": c,
                "from_label": state_label(c.from_state),
                "to_label": state_label(c.to_state),
                "source_label": SOURCE_LABELS.get(c.source, c.source),
                "reason": reason_html(notion.scoped_reason(c.reason_message, scope), c.reason),
                "pods": pods,
                "claims": claims,
                "hidden": hidden_pods + hidden_claims,
            }
        )
    return rows


def device_panel(view, device):
    if device is None:
        return ""
    key = (device.driver, device.pool, device.name)
    entry = _entry(key, health_of(device.cluster_id, [key]).get(key), roles.visible_namespaces(view.request.user))
    changes = HealthChange.objects.of_device(device.cluster_id, *key)[:TIMELINE_ROWS]
    return render_to_string(
        "health/_device_health.html",
        {
            "entry": entry,
            "timeline": timeline_rows(changes, view.request.user),
        },
        request=view.request,
    )


def node_panel(view, node):
    if node is None:
        return ""
    scope = roles.visible_namespaces(view.request.user)
    troubled = list(DeviceHealth.objects.filter(cluster_id=node.cluster_id, node_name=node.name).order_by("device"))
    changes = HealthChange.objects.filter(cluster_id=node.cluster_id, node_name=node.name)[:TIMELINE_ROWS]
    return render_to_string(
        "health/_node_health.html",
        {
            "node": node,
            "entries": sorted(
                (_entry((h.driver, h.pool, h.device), h, scope) for h in troubled),
                key=lambda e: STATES.index(e["state"]),
            ),
            "timeline": timeline_rows(changes, view.request.user),
        },
        request=view.request,
    )


def _devices_panel(view, cluster_id, keys, title_id):
    keys = sorted(set(keys))
    if not keys:
        return ""
    health = health_of(cluster_id, keys)
    entries = [_entry(key, health.get(key), roles.visible_namespaces(view.request.user)) for key in keys]
    return render_to_string(
        "health/_devices_health.html",
        {"entries": entries, "cluster": view.request.resolver_match.kwargs.get("cluster", ""), "title_id": title_id},
        request=view.request,
    )


def claim_panel(view, claim):
    if claim is None:
        return ""
    keys = AllocationResult.objects.filter(claim=claim).values_list("driver", "pool", "device")
    return _devices_panel(view, claim.cluster_id, keys, "claim-health")


def pod_panel(view, pod):
    if pod is None:
        return ""
    names = PodClaimRef.objects.filter(pod=pod).exclude(claim_name="").values_list("claim_name", flat=True)
    keys = AllocationResult.objects.filter(
        cluster_id=pod.cluster_id, claim__namespace=pod.namespace, claim__name__in=list(names)
    ).values_list("driver", "pool", "device")
    return _devices_panel(view, pod.cluster_id, keys, "pod-health")


def counts(cluster_ids=None):
    """{state: devices} of the devices that are not healthy."""
    rows = DeviceHealth.objects.all()
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    return Counter(dict(rows.order_by().values_list("state").annotate(n=Count("id"))))


def overview_panel(view, obj=None):
    cluster_ids = view.cluster_ids
    scope = roles.visible_namespaces(view.request.user)
    found = counts(cluster_ids)
    worst = DeviceHealth.objects.order_by("state", "-since")
    if cluster_ids is not None:
        worst = worst.filter(cluster_id__in=cluster_ids)
    names = {}
    rows = []
    for h in sorted(worst[:200], key=lambda h: (STATES.index(h.state), -h.since.timestamp()))[:10]:
        if h.cluster_id not in names:
            names[h.cluster_id] = h.cluster.name
        rows.append({"h": h, "cluster_name": names[h.cluster_id], **_entry((h.driver, h.pool, h.device), h, scope)})
    return render_to_string(
        "health/_overview_health.html",
        {"counts": [(s, state_label(s), found.get(s, 0)) for s in STATES if s != HEALTHY], "rows": rows},
        request=view.request,
    )


def map_panel(view, obj=None):
    found = counts(view.cluster_ids)
    return render_to_string(
        "health/_map_legend.html",
        {"counts": [(s, state_label(s), found.get(s, 0)) for s in STATES if s != HEALTHY]},
        request=view.request,
    )


def mark_devices(devices):
    """Set `health` and `health_label` on fleet-map device dicts that are not healthy."""
    if not devices:
        return
    # One query for the page, whatever its clusters: the few rows of troubled devices with these names.
    rows = DeviceHealth.objects.filter(
        cluster_id__in={d["cluster_id"] for d in devices}, device__in={d["name"] for d in devices}
    ).values_list("cluster_id", "driver", "pool", "device", "state")
    found = {tuple(r[:4]): r[4] for r in rows}
    if not found:
        return
    for d in devices:
        state = found.get((d["cluster_id"], d["driver"], d["pool"], d["name"]))
        if state:
            d["health"] = state
            d["health_label"] = MARK_TITLES.get(state, state)


def register():
    from mirror.api.serializers import register_annotations
    from mirror.views import register_page_parts

    register_annotations("devices", health=device_health_expression)
    register_page_parts(
        panels={
            "device": device_panel,
            "node": node_panel,
            "claim": claim_panel,
            "pod": pod_panel,
            "overview": overview_panel,
            "map": map_panel,
        },
        device_marks=(mark_devices,),
    )


def device_health_expression():
    """The device list's `health` column: the stored state, "healthy" without a row."""
    from django.db.models import OuterRef, Subquery, Value
    from django.db.models.functions import Coalesce

    state = DeviceHealth.objects.filter(
        cluster_id=OuterRef("cluster_id"), driver=OuterRef("driver"), pool=OuterRef("pool"), device=OuterRef("name")
    ).values("state")[:1]
    return Coalesce(Subquery(state), Value(HEALTHY))
