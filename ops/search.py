"""The global search box: nodes, claims, pods, devices, classes and slices by name, any of them by uid.

Each kind is one bounded query (LIMIT + 1 rows, so "more" is known without counting); claims and
pods are cut to the namespaces the user may see, and to the global namespace selection when one is
made. A hit links to the object's page, a group with more hits to its list with the same filter.
"""

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _

from claims.models import Pod, ResourceClaim
from inventory.models import Device, DeviceClass, Node, ResourceSlice
from mirror import roles
from mirror.models import Cluster

LIMIT = 20


@dataclass
class Hit:
    title: str
    detail: str
    url: str


@dataclass
class Group:
    kind: str
    label: str
    hits: list = field(default_factory=list)
    more: bool = False
    more_url: str = ""


def _url(name, *args):
    try:
        return reverse(name, args=args)
    except NoReverseMatch:  # an object whose name no page URL can carry: listed without a link
        return ""


def _bounded(qs):
    rows = list(qs[: LIMIT + 1])
    return rows[:LIMIT], len(rows) > LIMIT


def search(text, user, cluster=None, namespace=""):
    """[Group] of what `text` finds (empty groups left out); `cluster` None = every cluster."""
    text = text.strip()
    if not text:
        return []
    names = dict(Cluster.objects.values_list("id", "name"))

    def scoped(qs, namespaced=False):
        if cluster is not None:
            qs = qs.filter(cluster=cluster)
        if namespaced:
            qs = roles.scope_queryset(qs, user)
            if namespace:
                qs = qs.filter(namespace=namespace)
        return qs

    groups = []

    def add(kind, label, rows, more, hit, list_url=""):
        if rows:
            groups.append(Group(kind, label, [hit(r) for r in rows], more, list_url))

    by_name_or_uid = Q(name__icontains=text) | Q(uid=text)
    rows, more = _bounded(
        scoped(Node.objects.filter(by_name_or_uid)).order_by("name", "cluster_id").only("cluster_id", "name", "ready")
    )
    add(
        "node",
        _("Nodes"),
        rows,
        more,
        lambda n: Hit(
            n.name,
            f"{names.get(n.cluster_id)} · {'Ready' if n.ready else 'NotReady' if n.ready is False else _('unknown')}",
            _url("inventory:node-detail", names.get(n.cluster_id), n.name),
        ),
        f"{reverse('inventory:node-list')}?{urlencode({'q': text})}",
    )

    claims = scoped(ResourceClaim.objects.filter(by_name_or_uid | Q(owner_pod_name__icontains=text)), namespaced=True)
    rows, more = _bounded(
        claims.order_by("namespace", "name", "cluster_id").only(
            "cluster_id", "namespace", "name", "state", "owner_pod_name"
        )
    )
    add(
        "claim",
        _("Claims"),
        rows,
        more,
        lambda c: Hit(
            f"{c.namespace}/{c.name}",
            f"{names.get(c.cluster_id)} · {c.state}" + (f" · pod {c.owner_pod_name}" if c.owner_pod_name else ""),
            _url("claims:claim-detail", names.get(c.cluster_id), c.namespace, c.name),
        ),
        f"{reverse('claims:claim-list')}?{urlencode({'q': text, **({'namespace': namespace} if namespace else {})})}",
    )

    pods = scoped(Pod.objects.filter(by_name_or_uid), namespaced=True)
    rows, more = _bounded(
        pods.order_by("namespace", "name", "cluster_id").only("cluster_id", "namespace", "name", "phase", "node_name")
    )
    add(
        "pod",
        _("Pods"),
        rows,
        more,
        lambda p: Hit(
            f"{p.namespace}/{p.name}",
            f"{names.get(p.cluster_id)} · {p.phase or '?'}" + (f" · {p.node_name}" if p.node_name else ""),
            _url("claims:pod-detail", names.get(p.cluster_id), p.namespace, p.name),
        ),
        f"{reverse('claims:pod-list')}?{urlencode({'q': text, **({'namespace': namespace} if namespace else {})})}",
    )

    # Devices: by name, or by the uuid attribute a GPU publishes (what nvidia-smi and the logs show).
    devices = scoped(Device.objects.filter(Q(name__icontains=text) | Q(attribute_values__uuid=text)))
    rows, more = _bounded(
        devices.order_by("node_name", "driver", "pool", "name").only(
            "cluster_id", "driver", "pool", "name", "node_name"
        )
    )
    add(
        "device",
        _("Devices"),
        rows,
        more,
        lambda d: Hit(
            d.name,
            f"{names.get(d.cluster_id)} · {d.node_name or d.pool} · {d.driver}",
            _url("inventory:device-detail", names.get(d.cluster_id), d.driver, d.pool, d.name),
        ),
        f"{reverse('inventory:device-list')}?{urlencode({'q': f'device ~ {text}'})}",
    )

    rows, more = _bounded(
        scoped(DeviceClass.objects.filter(by_name_or_uid)).order_by("name", "cluster_id").only("cluster_id", "name")
    )
    add(
        "class",
        _("Device classes"),
        rows,
        more,
        lambda c: Hit(c.name, names.get(c.cluster_id), _url("inventory:class-detail", names.get(c.cluster_id), c.name)),
    )

    rows, more = _bounded(
        scoped(ResourceSlice.objects.filter(by_name_or_uid))
        .order_by("name", "cluster_id")
        .only("cluster_id", "name", "driver", "node_name")
    )
    add(
        "slice",
        "ResourceSlices",
        rows,
        more,
        lambda s: Hit(
            s.name,
            f"{names.get(s.cluster_id)} · {s.driver}" + (f" · {s.node_name}" if s.node_name else ""),
            _url("inventory:slice-detail", names.get(s.cluster_id), s.name),
        ),
    )
    return groups
