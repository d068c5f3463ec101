"""The per-node device summary (NodeDeviceSummary): written with the stored device state, read by fleet.py.

`rebuild` runs inside `devicestate.refresh_pools` for the pools it has just refreshed, so the summary
always sums exactly the device rows of the same transaction: one GROUP BY over those pools' devices,
then the pools' summary rows replaced.
"""

import re

from django.apps import apps as django_apps
from django.db.models import Case, Count, F, Q, TextField, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Concat

# The model the overview groups by: productName, else the model attribute.
MODEL = Coalesce(KT("attribute_values__productName"), KT("attribute_values__model"), Value(""), output_field=TextField())
# The device kind the metrics count by: a partition (MIG device: type "mig", or one naming its parent
# GPU), a whole GPU (type "gpu"), anything else (NICs, FPGAs, ...). Attribute copies are keyed bare.
KINDS = ("gpu", "partition", "other")
KIND = Case(
    When(Q(attribute_values__type="mig") | Q(attribute_values__has_key="parentUUID"), then=Value("partition")),
    When(attribute_values__type="gpu", then=Value("gpu")),
    default=Value("other"), output_field=TextField(),
)
# A fleet-map row: the node, or the pool for devices without one (no node name contains ":").
MAP_KEY = Case(When(node_name="", then=Concat(Value("pool:"), F("pool"))), default=F("node_name"), output_field=TextField())

# A summary row's key, and what it counts (see NodeDeviceSummary).
KEY = ("cluster_id", "driver", "pool", "node_name", "model", "kind")
COUNTS = ("n_total", "n_free", "n_tainted_unheld", "n_allocated", "n_admin", "n_partial", "n_tainted", "n_admin_watched")
_DIGITS = re.compile(r"(\d+)")
_WRITE_BATCH = 1000


def natural_key(text):
    """gpu-2 before gpu-10, node-9 before node-10 (for sorting in Python)."""
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(text)]


def natural_sort_key(text):
    """`natural_key` as a string that sorts the same as plain text, so SQL can ORDER BY it.

    Each run of digits becomes a \x01 mark (before any text, as natural_key's shorter string part
    is), its length (two digits) and the digits, so 9 < 10; the result is hex-encoded because
    databases may compare text by locale (ignoring "-", say), but every collation orders 0-9a-f alike.
    """
    parts = []
    for i, part in enumerate(_DIGITS.split(text)):
        if i % 2:
            digits = part.lstrip("0") or "0"
            part = f"\x01{len(digits):02d}{digits}"
        parts.append(part)
    return "".join(parts).encode().hex()


def rebuild(scope, device_model=None, summary_model=None):
    """Replace the summary rows of the pools `scope` (a Q on cluster_id/driver/pool) selects."""
    device_model = device_model or django_apps.get_model("inventory", "Device")
    summary_model = summary_model or django_apps.get_model("inventory", "NodeDeviceSummary")
    unheld = Q(allocation_state="free")
    rows = (
        device_model.objects.filter(scope)
        .order_by()
        .annotate(model=MODEL, kind=KIND)
        .values_list(*KEY)
        .annotate(
            n_total=Count("id"),
            n_free=Count("id", filter=unheld & Q(tainted=False)),
            n_tainted_unheld=Count("id", filter=unheld & Q(tainted=True)),
            n_allocated=Count("id", filter=Q(allocation_state="allocated")),
            n_admin=Count("id", filter=Q(allocation_state="admin")),
            n_partial=Count("id", filter=Q(allocation_state="partial")),
            n_tainted=Count("id", filter=Q(tainted=True)),
            n_admin_watched=Count("id", filter=Q(admin_watched=True)),
        )
    )
    fields = KEY + COUNTS
    new = {}
    for values in rows:
        row = summary_model(**dict(zip(fields, values)))
        row.map_key = row.node_name or f"pool:{row.pool}"
        row.sort_key = natural_sort_key(row.map_key)
        new[values[: len(KEY)]] = row
    # Upsert by key and delete only what is gone, rather than delete-all-then-insert: the slice and
    # the claim watchers may refresh the same pool at once, and a DELETE does not see rows another
    # transaction inserts meanwhile, so two rebuilds would leave both sets of rows. Sorted, so two
    # writers take the key locks in the same order.
    gone = [pk for pk, *key in summary_model.objects.filter(scope).values_list("id", *KEY) if tuple(key) not in new]
    for start in range(0, len(gone), _WRITE_BATCH):
        summary_model.objects.filter(id__in=gone[start : start + _WRITE_BATCH]).delete()
    summary_model.objects.bulk_create(
        [new[key] for key in sorted(new)], batch_size=_WRITE_BATCH,
        update_conflicts=True, unique_fields=KEY, update_fields=COUNTS + ("map_key", "sort_key"),
    )
