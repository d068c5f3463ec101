"""The per-node device summary (NodeDeviceSummary): written with the stored device state, read by fleet.py.

`rebuild` runs inside `devicestate.refresh_pools` for the pools it has just refreshed, so the summary
always sums exactly the device rows of the same transaction: one GROUP BY over those pools' devices,
then the pools' summary rows replaced.
"""

import re
from collections import defaultdict

from django.apps import apps as django_apps
from django.db.models import Case, Count, F, Max, Q, TextField, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Concat
from django.utils import timezone

from . import devicekinds

# The model the overview groups by: productName, else the model attribute.
MODEL = Coalesce(
    KT("attribute_values__productName"), KT("attribute_values__model"), Value(""), output_field=TextField()
)
# The device kind (inventory/devicekinds.py): stored on the device row when its slice is written.
KINDS = devicekinds.KINDS
# A fleet-map row: the node, or the pool for devices without one (no node name contains ":").
MAP_KEY = Case(
    When(node_name="", then=Concat(Value("pool:"), F("pool"))), default=F("node_name"), output_field=TextField()
)

# A summary row's key, and what it counts (see NodeDeviceSummary).
KEY = ("cluster_id", "driver", "pool", "node_name", "model", "kind")
COUNTS = (
    "n_total",
    "n_free",
    "n_tainted_unheld",
    "n_allocated",
    "n_admin",
    "n_partial",
    "n_tainted",
    "n_admin_watched",
    "n_gpus",
    "n_gpus_free",
)
_DEVICE_COUNTS = COUNTS[:-2]
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
    """Replace the summary rows of the pools `scope` (a Q on cluster_id/driver/pool) selects.

    A node-local pool that published devices and publishes none now (its driver stopped, or restarts)
    keeps its rows as placeholders: every count 0, `n_unpublished` the devices it last published and
    `unpublished_since` when it stopped, so the node keeps its place on the map and the totals can say
    what is not published now. They go when the pool publishes again."""
    device_model = device_model or django_apps.get_model("inventory", "Device")
    summary_model = summary_model or django_apps.get_model("inventory", "NodeDeviceSummary")
    unheld = Q(allocation_state="free")
    rows = (
        device_model.objects.filter(scope)
        .order_by()
        .annotate(model=MODEL)
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
    fields = KEY + _DEVICE_COUNTS
    new = {}
    for values in rows:
        row = summary_model(**dict(zip(fields, values)))
        row.map_key = row.node_name or f"pool:{row.pool}"
        row.sort_key = natural_sort_key(row.map_key)
        new[values[: len(KEY)]] = row
    _count_gpus(device_model.objects.filter(scope), new)
    if _has_field(summary_model, "partition_free"):  # migrations before 0023 rebuild without it
        _count_partitions(device_model, scope, new)
    # Upsert by key and delete only what is gone, rather than delete-all-then-insert: the slice and
    # the claim watchers may refresh the same pool at once, and a DELETE does not see rows another
    # transaction inserts meanwhile, so two rebuilds would leave both sets of rows. Sorted, so two
    # writers take the key locks in the same order.
    old = list(
        summary_model.objects.filter(scope).values_list("id", *KEY, "n_total", "n_unpublished", "unpublished_since")
    )
    publishing = {key[:3] for key in new}
    now = timezone.now()
    for _pk, *key, total, unpublished, since in old:
        key = tuple(key)
        if key[:3] in publishing or not key[3] or not (total or unpublished):
            continue  # still publishing, or no node to keep a place for
        row = summary_model(**dict(zip(KEY, key)), n_unpublished=total or unpublished, unpublished_since=since or now)
        row.map_key = row.node_name
        row.sort_key = natural_sort_key(row.map_key)
        new[key] = row
    gone = [pk for pk, *key in (r[: len(KEY) + 1] for r in old) if tuple(key) not in new]
    for start in range(0, len(gone), _WRITE_BATCH):
        summary_model.objects.filter(id__in=gone[start : start + _WRITE_BATCH]).delete()
    summary_model.objects.bulk_create(
        [new[key] for key in sorted(new)],
        batch_size=_WRITE_BATCH,
        update_conflicts=True,
        unique_fields=KEY,
        update_fields=COUNTS
        + ("map_key", "sort_key", "n_unpublished", "unpublished_since")
        + (PARTITION_FIELDS if _has_field(summary_model, "partition_free") else ()),
    )


def _count_gpus(devices, new):
    """Add the physical GPUs (devicekinds) of these devices to their summary rows `new`: one per
    (pool, parent), on the row of its whole-GPU device, free when none of its devices is held (admin
    access excepted) or tainted."""
    busy = (Q(held_by_claim_id__isnull=False) & ~Q(allocation_state="admin")) | Q(tainted=True)
    groups = (
        devices.filter(kind__in=(devicekinds.GPU, devicekinds.PARTITION))
        .order_by()
        .values_list("cluster_id", "driver", "pool", "node_name", "parent")
        .annotate(
            whole=Count("id", filter=Q(kind=devicekinds.GPU)),
            busy=Count("id", filter=busy),
            gpu_model=Max(MODEL, filter=Q(kind=devicekinds.GPU)),
            any_model=Max(MODEL),
        )
    )
    by_node_kind = {}
    for key in new:
        by_node_kind.setdefault((key[:4], key[5]), key)
    for cluster_id, driver, pool, node, _parent, whole, n_busy, gpu_model, any_model in groups:
        kind = devicekinds.GPU if whole else devicekinds.PARTITION
        key = (cluster_id, driver, pool, node, (gpu_model if whole else any_model) or "", kind)
        row = new.get(key) or new.get(by_node_kind.get(((cluster_id, driver, pool, node), kind)))
        if row is None:
            continue
        row.n_gpus += 1
        row.n_gpus_free += 0 if n_busy else 1


PARTITION_FIELDS = ("partition_free", "n_gpus_stranded")


def _has_field(model, name):
    return any(f.name == name for f in model._meta.get_fields())


def _count_partitions(device_model, scope, new):
    """Add the partition-aware figures of the engine (dra/partitions.py) to the summary rows `new`:
    per profile how many more partitions one claim could get ({profile: [free, total]}, on the
    node's partition row of that model) and the whole GPUs stranded by partitions in use (on its
    GPU row). Only pools that publish partitions are read, each from its stored slices, with the
    devices held now (admin access aside) as one allocated claim."""
    devices = device_model.objects.filter(scope)
    pools = sorted(
        set(
            devices.filter(kind=devicekinds.PARTITION).values_list("cluster_id", "driver", "pool").distinct().order_by()
        )
    )
    for start in range(0, len(pools), _PARTITION_POOLS_PER_QUERY):
        _count_partition_pools(device_model, pools[start : start + _PARTITION_POOLS_PER_QUERY], new)


_PARTITION_POOLS_PER_QUERY = 200


def _count_partition_pools(device_model, pools, new):
    from dra import Features, InputError, Inventory, partitions

    apps = device_model._meta.apps
    slice_model = apps.get_model("inventory", "ResourceSlice")
    cluster_model = apps.get_model("mirror", "Cluster")
    by_driver = defaultdict(list)
    for cid, driver, pool in pools:
        by_driver[(cid, driver)].append(pool)
    pool_q = Q()
    for (cid, driver), names in sorted(by_driver.items()):
        pool_q |= Q(cluster_id=cid, driver=driver, pool__in=names)
    rows = device_model.objects.filter(pool_q).order_by().annotate(model=MODEL)
    info, held = {}, defaultdict(list)
    for cid, driver, pool, name, node, model, kind, holder, state in rows.values_list(
        "cluster_id", "driver", "pool", "name", "node_name", "model", "kind", "held_by_claim_id", "allocation_state"
    ):
        info[(cid, driver, pool, name)] = (node, model or "", kind)
        if holder is not None and state != "admin":
            held[cid].append({"driver": driver, "pool": pool, "device": name, "request": "held"})
    slices = defaultdict(list)
    for cid, raw in slice_model.objects.filter(pool_q).order_by("id").values_list("cluster_id", "raw"):
        slices[cid].append(raw)
    for cid in sorted({p[0] for p in pools}):
        try:
            features = Features.from_dict(
                cluster_model.objects.filter(id=cid).values_list("features", flat=True).first()
            )
        except ValueError:
            features = Features()  # a setting the previews refuse: count with the scheduler defaults
        claim = {
            "metadata": {"namespace": "", "name": "held"},
            "status": {"allocation": {"devices": {"results": held.get(cid, [])}}},
        }
        try:
            inv = Inventory(resource_slices=slices[cid], resource_claims=[claim], features=features)
        except InputError:
            continue  # slices the engine cannot read: the previews say why; no figures here

        def about(dev, cid=cid):
            return info.get((cid,) + dev.key) or ("", "", "")

        keys = [(d, p) for c, d, p in pools if c == cid]
        found = partitions.capacity(inv, keys, kind_of=lambda d: about(d)[2], group_of=lambda d: about(d)[:2])
        for (driver, pool), groups in found.items():
            for (node, model), cap in groups.items():
                row = new.get((cid, driver, pool, node, model, devicekinds.PARTITION))
                if row is not None and cap.profiles:
                    row.partition_free = {p: [c.free, c.total] for p, c in sorted(cap.profiles.items())}
                row = new.get((cid, driver, pool, node, model, devicekinds.GPU))
                if row is not None and cap.stranded:
                    row.n_gpus_stranded = cap.stranded
