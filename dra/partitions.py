"""Partition-aware capacity: what can still be created on devices that share counters (KEP-4815).

A MIG-capable GPU publishes one device per possible placement of every profile, and the whole GPU,
all drawing on the GPU's counter set. Summing those devices overstates capacity: two overlapping
placements can never both be allocated. This module answers the admin's questions from the
counters, with the allocator's own rules (brief 2.10, search.py):

profile count   For each profile (the device's `profile` attribute, else its consumption shape) in
                a group (by default: node and GPU model), the most devices of that profile that one
                more claim could get at once: the largest set of devices of the profile that are
                not allocated, carry no blocking taint (a request without tolerations) and whose
                consumption, summed, fits in what the pool's counters have left after every
                allocated device's consumption. The allocator itself backtracks over a count-N
                request, so this is the N at which a "N x profile" request stops fitting. Found by
                an exact branch-and-bound search per group of devices sharing counters (a GPU: a
                handful of placements); a search that exceeds its step budget keeps the best set
                found and marks the figure inexact. `total` is the same count with nothing allocated.
whole GPUs      Devices of kind "gpu"; free when not allocated, untainted and (with counters) all
                their counters still available: a whole-GPU request could get it now.
stranded        Whole GPUs that are partly used: not allocated themselves, but some of their
                counters are consumed by allocated partitions, and at least one partition of theirs
                could still be created. Their free capacity serves partition requests only.

Not counted, on purpose: the 1.36 counter leak (kubernetes#140436: a device turned away by a taint
inside one request keeps its counters; a tainted device is never a candidate here), further shares
of a device with allowMultipleAllocations (any allocation makes it used), and, for a pool spanning
several nodes, the interaction between groups (each group's count is exact on its own; a pool with
one node per pool, as GPU drivers publish them, has none). An incomplete or invalid pool serves
nothing, as in the allocator: its figures are 0 with the reason in `problem`.
"""

from dataclasses import dataclass, field

from .inventory import AllocatedState, PoolCounters
from .model import BLOCKING_TAINT_EFFECTS

GPU, PARTITION, OTHER = "gpu", "partition", "other"
# Search steps per (group, profile) before the best set found so far is taken as the answer.
SEARCH_BUDGET = 20_000


@dataclass
class ProfileCount:
    free: int = 0  # more devices of the profile one claim could get now
    total: int = 0  # the same with nothing allocated
    exact: bool = True

    def to_dict(self):
        out = {"free": self.free, "total": self.total}
        if not self.exact:
            out["exact"] = False
        return out


@dataclass
class GroupCapacity:
    profiles: dict = field(default_factory=dict)  # profile -> ProfileCount
    gpus: int = 0
    gpus_free: int = 0
    stranded: int = 0
    problem: str = ""

    def to_dict(self):
        return {
            "profiles": {p: c.to_dict() for p, c in sorted(self.profiles.items())},
            "gpus": self.gpus,
            "gpus_free": self.gpus_free,
            "stranded": self.stranded,
            **({"problem": self.problem} if self.problem else {}),
        }


# -- how devices are named and grouped -----------------------------------------------------------


def _plain(dev, name):
    value = dev.attribute(f"{dev.driver}/{name}")
    return value[1] if value and value[0] == "string" and value[1] else None


def default_kind(dev, set_totals):
    """gpu / partition / other: the `type` attribute ("gpu", "vfio", "mig") or `parentUUID`, else by
    counters: a device consuming every counter of each set it draws on in full is a whole GPU, one
    consuming part of a set is a partition."""
    kind = (_plain(dev, "type") or "").lower()
    if kind in ("gpu", "vfio"):
        return GPU
    if kind == "mig" or _plain(dev, "parentUUID"):
        return PARTITION
    if not dev.has_counters:
        return OTHER
    try:
        consumes = dev.consumes
    except Exception:
        return OTHER
    whole = bool(consumes) and all(set_totals.get(name) == counters for name, counters in consumes)
    return GPU if whole else PARTITION


def profile_of(dev):
    """The device's `profile` attribute (NVIDIA MIG: "1g.10gb"), else its consumption shape with
    per-placement counter names folded ("memory-slice-3" -> "memory-slice-*"), so placements of one
    profile share a name."""
    profile = _plain(dev, "profile")
    if profile:
        return str(profile)
    shape = {}
    for _set, counters in dev.consumes:
        for name, amount in counters.items():
            base = name.rstrip("0123456789")
            key = f"{base}*" if base != name else name
            shape[key] = shape.get(key, 0) + amount
    return ", ".join(f"{k}={v}" for k, v in sorted(shape.items())) or dev.display_model()


def default_group(dev):
    """(node, model): the node the device runs on and its productName (else model) attribute."""
    node = dev.slice.node_name or dev.node_name or ""
    return (node, _plain(dev, "productName") or _plain(dev, "model") or "")


# -- counting ----------------------------------------------------------------------------------


def capacity(inventory, pools=None, *, kind_of=None, group_of=default_group):
    """{(driver, pool): {group: GroupCapacity}} for the pools of `inventory` (all, or the given
    (driver, pool) keys) that publish whole GPUs or partitions."""
    out = {}
    for key in pools if pools is not None else list(inventory.by_pool):
        slices = inventory.by_pool.get(key)
        if not slices:
            continue
        groups = pool_capacity(inventory, key, kind_of=kind_of, group_of=group_of)
        if groups:
            out[key] = groups
    return out


def pool_capacity(inventory, key, *, kind_of=None, group_of=default_group):
    """{group: GroupCapacity} of one pool (see the module docstring)."""
    view = inventory._pool_view(key, list(inventory.by_pool[key]), None, {})
    if view is None:
        return {}
    f = inventory.features
    sets = [cs for s in inventory.by_pool[key] if s.generation == view.generation for cs in s.counter_sets]
    totals = {}
    for name, counters in sets:
        totals.setdefault(name, counters)
    kinds = {}
    for dev in view.devices:
        kind = kind_of(dev) if kind_of is not None else default_kind(dev, totals)
        if kind in (GPU, PARTITION):
            kinds[dev.key] = kind
    if not kinds:
        return {}
    groups = {}
    by_profile = {}  # (group, profile) -> [devices]
    for dev in view.devices:
        kind = kinds.get(dev.key)
        if kind is None:
            continue
        g = group_of(dev)
        cap = groups.get(g)
        if cap is None:
            cap = groups[g] = GroupCapacity()
        if kind == GPU:
            cap.gpus += 1
        else:
            by_profile.setdefault((g, profile_of(dev)), []).append(dev)
    if not view.usable:
        problem = view.invalid or "incomplete pool (not every slice of its newest generation is published)"
        for (g, profile), _devs in by_profile.items():
            groups[g].profiles[profile] = ProfileCount()
        for cap in groups.values():
            cap.problem = problem
        return groups
    state = inventory.state
    now = _Counters(view.counters)
    empty = _Counters(PoolCounters(view.label, sets, (), AllocatedState()))
    taints_on = f.device_taints

    def untainted(dev):
        """No taint that keeps a request without tolerations off it."""
        return not (taints_on and any(t.get("effect") in BLOCKING_TAINT_EFFECTS for t in dev.taints))

    def usable(dev):
        """Not allocated and untainted (the counters are checked by the caller)."""
        return not state.is_allocated(dev.key) and untainted(dev)

    counters_on = f.partitionable_devices
    # What each device consumes, read once: both views have the same sets and counters.
    needs = {dev.key: empty.need(dev) for dev in view.devices if dev.key in kinds and dev.has_counters}
    for (g, profile), devs in by_profile.items():
        free, exact = _most(devs, now, usable, counters_on, needs)
        total, exact_total = _most(devs, empty, untainted, counters_on, needs)
        groups[g].profiles[profile] = ProfileCount(free, total, exact and exact_total)
    # Whole GPUs: free, or stranded by partitions in use.
    creatable_sets = set()  # counter sets on which some partition could be created now
    for devs in by_profile.values():
        for dev in devs:
            if usable(dev) and (not dev.has_counters or (counters_on and now.fits(needs[dev.key]))):
                creatable_sets.update(name for name, _c in dev.consumes)
    for dev in view.devices:
        if kinds.get(dev.key) != GPU or not usable(dev):
            continue
        cap = groups[group_of(dev)]
        if not dev.has_counters:
            cap.gpus_free += 1
        elif counters_on and now.fits(needs[dev.key]):
            cap.gpus_free += 1
        elif counters_on and empty.fits(needs[dev.key]) and any(name in creatable_sets for name, _c in dev.consumes):
            cap.stranded += 1
    return groups


class _Counters:
    """A pool's available counters as {(set, counter): amount}, None when the pool serves no device
    with counters (over-committed: brief 2.10)."""

    def __init__(self, pool_counters):
        if pool_counters is None or pool_counters.overcommitted:
            self.available = None
        else:
            self.available = {
                (s, c): amount for s, counters in pool_counters.available.items() for c, amount in counters.items()
            }

    def need(self, dev):
        """{(set, counter): amount} the device consumes, None when a set or counter is unknown (or the
        pool is over-committed)."""
        if self.available is None:
            return None
        out = {}
        for set_name, counters in dev.consumes:
            for cname, amount in counters.items():
                k = (set_name, cname)
                if k not in self.available:
                    return None
                out[k] = out.get(k, 0) + amount
        return out

    def fits(self, need):
        """Whether a device's `need` fits in what is left."""
        if self.available is None or need is None:
            return False
        return all(v <= self.available[k] for k, v in need.items())


def _most(devs, counters, usable, counters_on, needs):
    """(the most of `devs` allocatable together, exact?): devices without counters count one each;
    those with counters form groups linked by shared counters, each packed by an exact search.
    `needs`: what each device with counters consumes (_Counters.need)."""
    plain = 0
    fitting = []
    for dev in devs:
        if not usable(dev):
            continue
        if not dev.has_counters:
            plain += 1
            continue
        if not counters_on:
            continue
        need = needs[dev.key]
        if counters.fits(need):
            fitting.append(need)
    best, exact = plain, True
    for component in _components(fitting):
        n, ok = _pack(component, counters.available)
        best += n
        exact = exact and ok
    return best, exact


def _components(needs):
    """Lists of needs linked through a counter they both draw on (union-find over counters)."""
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, need in enumerate(needs):
        for k in need:
            parent[find(("c", k))] = find(("d", i))
    groups = {}
    for i in range(len(needs)):
        groups.setdefault(find(("d", i)), []).append(needs[i])
    return list(groups.values())


def _pack(needs, available):
    """(most needs whose sum fits in `available`, exact?): all when they fit together, else
    branch and bound over include/exclude, with the bound "picked + left <= best" and a step budget."""
    total = {}
    for need in needs:
        for k, v in need.items():
            total[k] = total.get(k, 0) + v
    if all(v <= available[k] for k, v in total.items()):
        return len(needs), True
    # Larger consumers first: conflicts show early, so the bound prunes more.
    order = sorted(needs, key=lambda n: -sum(float(v) for v in n.values()))
    n = len(order)
    best = 0
    steps = 0
    used = {}

    def dfs(i, picked):
        nonlocal best, steps
        steps += 1
        if picked > best:
            best = picked
        if i == n or picked + (n - i) <= best or steps > SEARCH_BUDGET:
            return
        need = order[i]
        if all(used.get(k, 0) + v <= available[k] for k, v in need.items()):
            for k, v in need.items():
                used[k] = used.get(k, 0) + v
            dfs(i + 1, picked + 1)
            for k, v in need.items():
                used[k] -= v
        dfs(i + 1, picked)

    dfs(0, 0)
    return best, steps <= SEARCH_BUDGET
