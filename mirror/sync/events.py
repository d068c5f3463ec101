"""Which core/v1 Events the mirror keeps, and how many.

The Event watcher lists and watches every namespace's events like any other kind; a field selector
cannot say "involvedObject.kind is one of these" (selectors only AND single values), so the kinds are
picked here: events about the DRA kinds, Nodes, and the pods the mirror stores (DRA pods and driver
pods). Bounded per cluster in count and age; the newest are kept.
"""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from mirror.models import KubeEvent

from .kinds import KINDS_BY_NAME

EVENT_KINDS = frozenset(
    {"Pod", "Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"}
)


def limits():
    sync = settings.GPUDASH_SYNC
    return int(sync.get("EVENTS_MAX_PER_CLUSTER", 5000)), float(sync.get("EVENTS_MAX_AGE_SECONDS", 86400))


def unwanted(cluster, ops):
    """Keys of the ops (event, key, fields, raw) whose Event the mirror does not keep: about a kind it
    does not mirror, a pod it does not store, or older than the age bound."""
    Pod = KINDS_BY_NAME["Pod"].model
    _, max_age = limits()
    oldest = timezone.now() - timedelta(seconds=max_age) if max_age > 0 else None
    pod_keys = {(f["involved_namespace"], f["involved_name"]) for _, _, f, _ in ops if f["involved_kind"] == "Pod"}
    stored_pods = set()
    if pod_keys:
        stored_pods = set(
            Pod.objects.filter(
                cluster=cluster, namespace__in={k[0] for k in pod_keys}, name__in={k[1] for k in pod_keys}
            ).values_list("namespace", "name")
        )
    out = set()
    for _, key, f, _ in ops:
        if f["involved_kind"] not in EVENT_KINDS:
            out.add(key)
        elif f["involved_kind"] == "Pod" and (f["involved_namespace"], f["involved_name"]) not in stored_pods:
            out.add(key)
        elif oldest is not None and f["last_seen"] is not None and f["last_seen"] < oldest:
            out.add(key)
    return out


def prune(cluster):
    """Drop the cluster's events past the age bound, then the oldest past the count bound. Returns how many."""
    max_count, max_age = limits()
    qs = KubeEvent.objects.filter(cluster=cluster)
    removed = 0
    if max_age > 0:
        removed += qs.filter(last_seen__lt=timezone.now() - timedelta(seconds=max_age))._raw_delete(qs.db)
    if max_count > 0:
        cutoff = list(qs.order_by("-last_seen", "-id").values_list("id", flat=True)[max_count : max_count + 10000])
        if cutoff:
            removed += KubeEvent.objects.filter(id__in=cutoff)._raw_delete(qs.db)
    return removed
