"""A device's state: the one vocabulary and the one implementation the UI and the API share.

What depends only on the claims' allocation results (and on sibling partitions sharing counters) is
stored on the Device row and kept current by the sync apply path (`refresh_pools`, called per applied
batch for the pools whose devices or allocation results changed):

  allocation_state   free | allocated | admin | partial
  held_by_claim_id, held_by_namespace, held_by_name   the claim that decides it (exclusive holder
                     first, then a share, then an admin-access watcher; lowest claim id on ties)
  admin_watched      some admin-access result names the device (whatever else holds it)

What changes without the device's own pool changing is derived in SQL at read time: a stuck claim
(an active Finding on the holding claim) and a NotReady node (a join on Node).

The states, first that applies wins (`STATES` order is the display order):
  stuck      held by a claim with an active stuck-claim finding
  allocated  held by an ordinary (exclusive) result
  partial    partially used: held only through capacity shares (allowMultipleAllocations), or not
             held itself but held partitions use up shared counters it needs (a GPU with a MIG slice
             in use); a sibling partition whose counters are still available stays free
  admin      held only by admin-access results (still allocatable to ordinary claims)
  tainted    a NoSchedule/NoExecute device taint keeps new claims off it
  unhealthy  its node is NotReady ("node not ready")
  free       a new claim could get it
Secondary flags, whatever the state: `tainted`, `unhealthy`, `admin` (watched with admin access).

The REST API's v1 `state` field keeps its five values as a projection (API_STATES).
"""

from collections import defaultdict
from fractions import Fraction

from django.apps import apps as django_apps
from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)

# The vocabulary is the mirror's (mirror/states.py: pages, the API and the shared template tags use it);
# this module decides which state a device is in.
from mirror.states import (  # noqa: F401  (read from here by the API and tests)
    ADMIN,
    ALLOCATED,
    API_STATE_OF,
    API_STATES,
    FLAGS,
    FREE,
    PARTIAL,
    STATES,
    STORED_STATES,
    STUCK,
    TAINTED,
    UNHEALTHY,
)

from . import summary

_QUERY_CHUNK = 500
# pg_advisory_xact_lock(class, cluster id) key class of the device-state refresh ("GDst").
_REFRESH_LOCK = 0x47447374


# --- reading: SQL expressions -----------------------------------------------------------------------


def stuck_claim_ids():
    """Ids of claims with an active stuck-claim finding (an uncorrelated subquery: hashed once)."""
    claim = django_apps.get_model("claims", "ResourceClaim")
    finding = django_apps.get_model("claims", "Finding")
    active = (
        finding.objects.stuck().exclude(claim_uid="").values("claim_uid")
    )  # report-only findings (idle GPUs) do not count
    return claim.objects.filter(uid__in=active).values("id")


def node_not_ready():
    """EXISTS: the device's node is NotReady (namespace '' keeps the lookup on the unique index)."""
    node = django_apps.get_model("inventory", "Node")
    return Exists(
        node.objects.filter(cluster_id=OuterRef("cluster_id"), namespace="", name=OuterRef("node_name"), ready=False)
    )


# Above this many NotReady nodes (an outage) the constant lists of not_ready_nodes() would outgrow
# the index probe per row they replace.
NOT_READY_LIST_LIMIT = 1000


def not_ready_nodes(cluster_ids=None):
    """True where a row's (cluster_id, node_name) is a NotReady node, for Device and summary rows:
    the NotReady nodes read once (one query; few in a healthy fleet) and tested as constant lists.
    The EXISTS probe of node_not_ready() runs once per row it is tested on: 224,000 probes for a
    count of free devices at 20,000 nodes, or four per summary row in the overview's sums, for a
    question whose answer is usually "none". Past NOT_READY_LIST_LIMIT nodes it is that probe again."""
    node = django_apps.get_model("inventory", "Node")
    nodes = node.objects.filter(namespace="", ready=False).order_by()
    if cluster_ids is not None:
        nodes = nodes.filter(cluster_id__in=cluster_ids)
    rows = list(nodes.values_list("cluster_id", "name")[: NOT_READY_LIST_LIMIT + 1])
    if len(rows) > NOT_READY_LIST_LIMIT:
        return node_not_ready()
    by_cluster = defaultdict(set)
    for cluster_id, name in rows:
        by_cluster[cluster_id].add(name)
    if not by_cluster:
        return Value(False, output_field=BooleanField())
    q = Q()
    for cluster_id, names in sorted(by_cluster.items()):
        q |= Q(cluster_id=cluster_id, node_name__in=sorted(names))
    return ExpressionWrapper(q, output_field=BooleanField())


def _or_probe(not_ready):
    """The `not_ready` expression a caller read once, else the EXISTS probe per row."""
    return node_not_ready() if not_ready is None else not_ready


def state_expression(not_ready=None):
    """CASE giving each device row its state (see the module docstring). `not_ready`: what "the
    device's node is NotReady" is tested with (not_ready_nodes(), read once per request, on the
    paths that read many rows); the EXISTS probe by default."""
    not_ready = _or_probe(not_ready)
    return Case(
        When(held_by_claim_id__in=stuck_claim_ids(), then=Value(STUCK)),
        When(~Q(allocation_state=FREE), then=F("allocation_state")),
        When(tainted=True, then=Value(TAINTED)),
        When(not_ready, then=Value(UNHEALTHY)),
        default=Value(FREE),
        output_field=CharField(),
    )


def api_state_expression(not_ready=None):
    """The v1 API's projection of `state_expression` (API_STATES)."""
    return Case(
        When(held_by_claim_id__in=stuck_claim_ids(), then=Value("allocated")),
        When(allocation_state=ALLOCATED, then=Value("allocated")),
        When(allocation_state=PARTIAL, then=Value("shared")),
        When(allocation_state=ADMIN, then=Value("admin")),
        When(tainted=True, then=Value("tainted")),
        When(_or_probe(not_ready), then=Value("tainted")),
        default=Value("free"),
        output_field=CharField(),
    )


def state_q(state, not_ready=None):
    """Q for devices in `state`, written as plain column tests the planner can use indexes for
    (`not_ready` as in state_expression)."""
    stuck = Q(held_by_claim_id__in=stuck_claim_ids())
    if state == STUCK:
        return stuck
    if state in (ALLOCATED, ADMIN, PARTIAL):
        # held_by is NULL for a sibling-blocked partition: "not stuck" must keep those rows.
        return Q(allocation_state=state) & (Q(held_by_claim_id__isnull=True) | ~stuck)
    unheld = Q(allocation_state=FREE)
    not_ready = _or_probe(not_ready)
    if state == TAINTED:
        return unheld & Q(tainted=True)
    if state == UNHEALTHY:
        return unheld & Q(tainted=False) & Q(not_ready)
    if state == FREE:
        return unheld & Q(tainted=False) & ~Q(not_ready)
    raise ValueError(f"unknown device state {state!r}; expected one of {', '.join(STATES)}")


def flag_q(flag, not_ready=None):
    """Devices carrying a secondary flag, whatever their state."""
    if flag == TAINTED:
        return Q(tainted=True)
    if flag == UNHEALTHY:
        return Q(_or_probe(not_ready))
    if flag == ADMIN:
        return Q(admin_watched=True)
    raise ValueError(f"unknown device flag {flag!r}")


def state_or_flag_q(state, not_ready=None):
    """What the UI's state filter means: in the state, or carrying it as a flag."""
    q = state_q(state, not_ready)
    if state in (TAINTED, UNHEALTHY, ADMIN):
        q |= flag_q(state, not_ready)
    return q


def api_state_q(api_state, not_ready=None):
    q = Q()
    for state in API_STATES[api_state]:
        q |= state_q(state, not_ready)
    return q


# --- writing: kept current by the sync apply path ---------------------------------------------------


def refresh_pools(pool_keys, models=None):
    """Recompute the stored state of every device in these (cluster_id, driver, pool) pools.

    Two bulk UPDATEs per chunk of pools (reset, then the held devices from their allocation results),
    then the shared-counter check for pools with partitions in use, then the pools' rows of the
    per-node summary (inventory/summary.py). `pool_keys=None` refreshes all devices (the migrations'
    backfill). `models` lets a migration pass its historical models: (device, allocation result,
    counter set[, node summary]); without a summary model the summary is left alone.
    """
    device_model, result_model, counter_model, *summary_model = models or (
        django_apps.get_model("inventory", "Device"),
        django_apps.get_model("claims", "AllocationResult"),
        django_apps.get_model("inventory", "SharedCounterSet"),
        django_apps.get_model("inventory", "NodeDeviceSummary"),
    )
    if pool_keys is None:
        scopes = [Q()]
    else:
        grouped = defaultdict(set)
        for cluster_id, driver, pool in pool_keys:
            grouped[(cluster_id, driver)].add(pool)
        scopes = [
            Q(cluster_id=cluster_id, driver=driver, pool__in=sorted(pools)[i : i + _QUERY_CHUNK])
            for (cluster_id, driver), pools in grouped.items()
            for i in range(0, len(pools), _QUERY_CHUNK)
        ]
    if pool_keys is not None and connection.vendor == "postgresql":
        # Watchers of different kinds refresh the same pools' device rows (slices at a list's end, claims on
        # allocation changes); one refresh per cluster at a time keeps their row locks from deadlocking.
        with connection.cursor() as cursor:
            for cluster_id in sorted({key[0] for key in pool_keys}):
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_REFRESH_LOCK, cluster_id])
    for scope in scopes:
        devices = device_model.objects.filter(scope)
        _write_held(devices, result_model)
        _write_counter_blocked(devices, counter_model)
        if summary_model:
            summary.rebuild(scope, device_model, *summary_model)


def _write_held(devices, result_model):
    results = result_model.objects.filter(
        cluster_id=OuterRef("cluster_id"), driver=OuterRef("driver"), pool=OuterRef("pool"), device=OuterRef("name")
    )
    # The result that decides the state: exclusive, then share, then admin access; lowest claim id.
    deciding = results.annotate(
        rank=Case(
            When(admin_access=False, share_id="", then=Value(0)),
            When(admin_access=False, then=Value(1)),
            default=Value(2),
        )
    ).order_by("rank", "claim_id")
    state = Case(
        When(rank=0, then=Value(ALLOCATED)),
        When(rank=1, then=Value(PARTIAL)),
        default=Value(ADMIN),
        output_field=CharField(),
    )
    devices.exclude(allocation_state=FREE, held_by_claim_id__isnull=True, admin_watched=False).update(
        allocation_state=FREE, held_by_claim_id=None, held_by_namespace="", held_by_name="", admin_watched=False
    )
    devices.filter(Exists(results)).update(
        allocation_state=Subquery(deciding.annotate(st=state).values("st")[:1]),
        held_by_claim_id=Subquery(deciding.values("claim_id")[:1]),
        held_by_namespace=Subquery(deciding.values("claim__namespace")[:1]),
        held_by_name=Subquery(deciding.values("claim__name")[:1]),
        admin_watched=Exists(results.filter(admin_access=True)),
    )


def _write_counter_blocked(devices, counter_model):
    """Mark unheld partitions whose shared counters held siblings use up (quantities parsed in Python:
    SQL cannot compare Kubernetes quantities); only pools with a held partition are read."""
    from dra.quantity import parse_quantity

    parsed = {}  # the same few counter values ("1", "42", "10Gi") repeat across every partition

    def amount(counter):
        value = (counter or {}).get("value", "0")
        if not isinstance(value, (str, int)):
            return Fraction(0)
        if value in parsed:
            return parsed[value]
        try:
            parsed[value] = parse_quantity(value)
            return parsed[value]
        except (ValueError, TypeError, ArithmeticError):
            return Fraction(0)

    with_counters = devices.exclude(consumes_counters=[])
    pools = set(
        with_counters.filter(held_by_claim_id__isnull=False)
        .exclude(allocation_state=ADMIN)
        .values_list("cluster_id", "driver", "pool")
        .distinct()
        .order_by()
    )
    if not pools:
        return
    rows = list(
        with_counters.filter(pool__in={p for _, _, p in pools}).values_list(
            "id", "cluster_id", "driver", "pool", "consumes_counters", "held_by_claim_id", "allocation_state"
        )
    )
    capacity = {}
    sets = counter_model.objects.filter(
        cluster_id__in={c for c, _, _ in pools}, slice__pool__in={p for _, _, p in pools}
    )
    for cid, driver, pool, name, counters in sets.values_list(
        "cluster_id", "slice__driver", "slice__pool", "name", "counters"
    ):
        for counter, value in (counters or {}).items():
            capacity[(cid, driver, pool, name, counter)] = amount(value)
    needs, used = {}, defaultdict(Fraction)
    for pk, cid, driver, pool, consumes, held, state in rows:
        if (cid, driver, pool) not in pools:
            continue
        need = [
            ((cid, driver, pool, e.get("counterSet"), c), amount(v))
            for e in consumes or ()
            if isinstance(e, dict)
            for c, v in (e.get("counters") or {}).items()
        ]
        if held is not None:
            if state == ADMIN:
                continue  # admin access never takes counters from others
            for key, value in need:
                used[key] += value
        else:
            needs[pk] = need
    blocked = [
        pk
        for pk, need in needs.items()
        if any(used.get(k) and capacity.get(k, Fraction(0)) - used[k] < v for k, v in need)
    ]
    for i in range(0, len(blocked), _QUERY_CHUNK):
        devices.filter(id__in=blocked[i : i + _QUERY_CHUNK]).update(allocation_state=PARTIAL)


def pools_of_slices(slice_ids):
    """(cluster_id, driver, pool) of these ResourceSlice rows (apply_batch hook)."""
    model = django_apps.get_model("inventory", "ResourceSlice")
    return _pools(model.objects, "id", slice_ids, ("cluster_id", "driver", "pool"))


def pools_of_claims(claim_ids):
    """(cluster_id, driver, pool) of the devices these claims' allocation results name."""
    model = django_apps.get_model("claims", "AllocationResult")
    return _pools(model.objects, "claim_id", claim_ids, ("cluster_id", "driver", "pool"))


def _pools(manager, column, ids, fields):
    ids = [i for i in ids if i is not None]
    return (
        set(manager.filter(**{f"{column}__any_of": ids}).values_list(*fields).distinct().order_by()) if ids else set()
    )
