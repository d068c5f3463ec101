"""The fleet-history charts on the pages (monitoring/_history_charts.html, drawn by history.js)."""

from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

register = template.Library()

RANGES = (
    (6, gettext_lazy("6 h")),
    (24, gettext_lazy("24 h")),
    (168, gettext_lazy("7 days")),
    (336, gettext_lazy("14 days")),
)


def _src(name, cluster, **params):
    if cluster is not None:
        params["cluster"] = cluster.name
    return f"{reverse(name)}?{urlencode(params)}"


def _context(title, charts):
    from ..history import retention_days

    longest = retention_days() * 24
    return {
        "history_title": title,
        "history_charts": charts,
        "history_hours": 24,
        "history_ranges": [(h, label) for h, label in RANGES if h <= longest]
        or [(int(longest), _("%(hours)s h") % {"hours": f"{longest:g}"})],
    }


def namespace_charts(namespace, cluster):
    return [
        {
            "title": _("Devices held by %(namespace)s") % {"namespace": namespace},
            "src": _src("api:history-namespaces", cluster, namespace=namespace, series="gpu,partition,other,idle"),
        },
        {
            "title": _("Claims of %(namespace)s by state") % {"namespace": namespace},
            "src": _src(
                "api:history-namespaces",
                cluster,
                namespace=namespace,
                series="claims_pending,claims_allocated,claims_reserved,claims_deleting",
            ),
        },
    ]


@register.inclusion_tag("monitoring/_history_charts.html", takes_context=True)
def fleet_history(context):
    """The overview's charts: whole GPUs by state, free whole GPUs per model, pending claims and held
    GPUs per namespace; plus the globally selected namespace's, when one is."""
    cluster = context.get("cluster")
    charts = [
        {"title": _("Whole-GPU devices by state"), "src": _src("api:history-devices", cluster, kind="gpu")},
        {
            "title": _("Free whole GPUs by model"),
            "src": _src("api:history-devices", cluster, series="gpus_free", group_by="model"),
        },
        {
            "title": _("Whole GPUs held, top namespaces"),
            "src": _src("api:history-namespaces", cluster, series="gpu", top=8),
        },
        {
            "title": _("Pending claims, top namespaces"),
            "src": _src("api:history-namespaces", cluster, series="claims_pending", top=8),
        },
    ]
    if (context.get("kinds") or {}).get("partitions"):  # MIG published: what can still be created, over time
        charts.insert(
            2,
            {
                "title": _("MIG: smallest partitions still creatable, GPUs stranded"),
                "src": _src("api:history-devices", cluster, series="partition_slots_free,gpus_stranded"),
            },
        )
    if context.get("global_namespace"):
        charts += namespace_charts(context["global_namespace"], cluster)
    return _context(_("Over time"), charts)


@register.inclusion_tag("monitoring/_history_charts.html", takes_context=True)
def namespace_history(context, namespace):
    return _context(
        _("%(namespace)s over time") % {"namespace": namespace}, namespace_charts(namespace, context.get("cluster"))
    )
