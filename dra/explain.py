"""Why a claim does not fit on a node: short, true reasons that name the request.

Only run for nodes where the search failed, so the fast path stays fast. Each reason comes with a
code so a fleet summary can count them ("most common reason").
"""

from .deadline import TimedOut
from .matching import counters_fit_alone
from .search import ERROR, SUCCESS, NodeAllocator

MAX_EXPR = 90
# Each extra search an explanation makes (constraints relaxed) gets this long: the verdict is known
# already, only the wording depends on it.
EXPLAIN_TIMEOUT_SECONDS = 1.0


def _plural(n, one, many):
    return one if n == 1 else many


def _short(expr):
    expr = " ".join(expr.split())
    return expr if len(expr) <= MAX_EXPR else expr[: MAX_EXPR - 1] + "…"


class Funnel:
    """Counts of candidate devices at each filter stage for one request (or subrequest) on one node."""

    def __init__(self, allocator, view, claim, variant):
        inv = allocator.inv
        self.v = variant
        self.cls = inv.classes.get(variant.class_name)
        class_key, class_chain, chain_key, shape = _request_shape(allocator.plan, variant)
        allocator.chain_candidates(view, class_key, class_chain)  # fills each pool's match lists
        allocator.candidates(view, variant)
        state = inv.state
        self.n_class = self.n_err = self.n_sel = 0
        self.n_alloc = self.n_taint = self.n_counter = self.n_cap = 0
        self.owner = self.taint = None
        self.owners = []  # every claim holding a matching device here, in device order (verdict.py names them)
        self.taints = []  # every distinct untolerated device taint
        self.free = []
        for pool in view.usable:
            key = (shape, state.token(pool.key))
            part = pool.funnel_cache.get(key)
            if part is None:
                if len(pool.funnel_cache) > 64:
                    pool.funnel_cache.clear()
                part = pool.funnel_cache[key] = _pool_part(allocator, inv, pool, class_key, chain_key, variant)
            n_class, n_err, n_sel, n_alloc, owner, n_taint, taint, n_counter, n_cap, free, owners, taints = part
            self.n_class += n_class
            self.n_err += n_err
            self.n_sel += n_sel
            self.n_alloc += n_alloc
            self.n_taint += n_taint
            self.n_counter += n_counter
            self.n_cap += n_cap
            self.owner = self.owner or owner
            self.taint = self.taint or taint
            for o in owners:
                if o not in self.owners:
                    self.owners.append(o)
            for t in taints:
                if t not in self.taints:
                    self.taints.append(t)
            if free:
                self.free.extend(free)
        self.need = variant.count if variant.mode != "All" else self.n_sel
        self.sample = None  # one matching device (its model names the request in verdict.py)
        for pool in view.usable:
            cands = pool.match_cache.get(chain_key) or pool.match_cache.get(class_key)
            if cands:
                self.sample = cands[0][0]
                break

    @property
    def enough(self):
        if self.v.mode == "All":
            return self.n_sel > 0 and len(self.free) == self.n_sel
        return len(self.free) >= self.need

    def text(self, view):
        v = self.v
        if self.n_class == 0:
            return self._no_devices(view)
        parts = [f"{self.n_class} {_plural(self.n_class, 'device matches', 'devices match')} class `{v.class_name}`"]
        if v.selectors:
            exprs = " && ".join(((s or {}).get("cel") or {}).get("expression") or "" for s in v.selectors)
            parts.append(
                f"{_plural(len(v.selectors), 'selector', 'selectors')} `{_short(exprs)}` {_plural(len(v.selectors), 'leaves', 'leave')} {self.n_sel}"
            )
        if self.n_err:
            parts.append(
                f"{self.n_err} more {_plural(self.n_err, 'raises a CEL error', 'raise a CEL error')} (not reached by the search)"
            )
        if self.n_alloc:
            who = f" (e.g. {self.owner})" if self.owner else ""
            parts.append(f"{self.n_alloc} {_plural(self.n_alloc, 'is', 'are')} already allocated to other claims{who}")
        if self.n_taint:
            t = self.taint
            parts.append(
                f"{self.n_taint} {_plural(self.n_taint, 'has', 'have')} an untolerated taint ({t.get('key')}={t.get('value') or ''}:{t.get('effect')})"
            )
        if self.n_counter:
            parts.append(
                f"{self.n_counter} {_plural(self.n_counter, 'needs', 'need')} shared counters already used by allocated devices"
            )
        if self.n_cap:
            parts.append(f"{self.n_cap} {_plural(self.n_cap, 'lacks', 'lack')} the requested capacity")
        free = len(self.free)
        if v.mode == "All":
            if self.n_sel == 0:
                parts.append("allocationMode All needs at least one")
            else:
                parts.append(f"allocationMode All needs all {self.n_sel}, {free} free")
        else:
            parts.append(f"{free} free < count {self.need}")
        return ", ".join(parts)

    def code(self):
        if self.n_class == 0:
            return "no-pool" if self.cls and self.cls.drivers else "class"
        stages = [
            (self.n_alloc, "allocated"),
            (self.n_taint, "tainted"),
            (self.n_counter, "counters"),
            (self.n_cap, "capacity"),
        ]
        n, code = max(stages, key=lambda s: s[0])
        if n == 0:
            return "selector" if self.v.selectors else "too-few-devices"
        return code

    def _no_devices(self, view):
        drivers = self.cls.drivers if self.cls else []
        if not drivers:
            return f"no device on this node matches class `{self.v.class_name}`"
        notes = []
        for p in view.incomplete:
            if p.driver in drivers:
                notes.append(f"pool {p.name} is incomplete ({p.slice_count} of {p.expected} slices)")
        for p in view.invalid:
            if p.driver in drivers:
                notes.append(f"pool {p.name} is invalid: {p.invalid}")
        has_pool = any(p.driver in drivers and p.devices for p in view.usable)
        drv = ", ".join(f"`{d}`" for d in drivers)
        if has_pool:
            return f"no device of driver {drv} on this node matches class `{self.v.class_name}`"
        text = f"no complete pool of driver {drv} on this node"
        return text + (f" ({'; '.join(notes)})" if notes else "")


def _request_shape(plan, variant):
    """(class-only key, class chain, chain key, shape) of a request, once per plan (the same on every
    node it explains). Per pool, the funnel counts depend only on the pool's devices, its allocated
    state and this shape: cached on the pool view under the state's token (a fleet-wide preview
    explains thousands of nodes, most of them sharing nothing but an unchanged state)."""
    shapes = plan.__dict__.setdefault("funnel_shapes", {})
    found = shapes.get(id(variant))
    if found is None:
        chain_key, chain = plan.chains[id(variant)]
        class_chain = [c for c in chain if c[0].startswith("class ")]
        shape = (
            chain_key,
            variant.admin,
            _tolerations_key(variant.tolerations),
            tuple(sorted(variant.capacity_requests.items())),
        )
        found = shapes[id(variant)] = (("class-only", variant.class_name), class_chain, chain_key, shape)
    return found


def _tolerations_key(tolerations):
    return tuple(
        tuple(sorted((k, str(v)) for k, v in t.items())) if isinstance(t, dict) else (str(t),) for t in tolerations
    )


def _pool_part(allocator, inv, pool, class_key, chain_key, variant):
    """One pool's share of a Funnel: (n_class, n_err, n_sel, n_alloc, first owner, n_taint, first
    taint, n_counter, n_cap, free devices, owners, taints), in the pool's device order."""
    n_class = len(pool.match_cache.get(class_key) or ())
    cands = pool.match_cache.get(chain_key) or ()
    # Devices whose selectors raise were not reached by the search (else it would have been an
    # error, not a failure): they are neither matches nor free.
    n_err = sum(1 for c in cands if c[2] is not None)
    n_alloc = n_taint = n_counter = n_cap = 0
    owner = taint = None
    free, owners, taints = [], [], []
    f = inv.features
    dedicated = inv.state.dedicated
    for dev, pool_, err in cands:
        if err is not None:
            continue
        if not variant.admin and (dev.key in dedicated):
            n_alloc += 1
            held_by = inv.state.owners.get(dev.key) or [None]
            owner = owner or held_by[0]
            owners.extend(o for o in held_by if o is not None and o not in owners)
            continue
        if f.device_taints and dev.taints:
            blocking = variant.blocking_taint(dev)
            if blocking is not None:
                n_taint += 1
                taint = taint or blocking
                if blocking not in taints:
                    taints.append(blocking)
                continue
        if dev.has_counters and not _counters_fit(dev, pool_, f):
            n_counter += 1
            continue
        if (variant.capacity_requests or (dev.multi and f.consumable_capacity)) and f.consumable_capacity:
            if allocator._capacity(dev, variant, persisted_only=True) is None:
                n_cap += 1
                continue
        free.append(dev)
    return (
        n_class,
        n_err,
        len(cands) - n_err,
        n_alloc,
        owner,
        n_taint,
        taint,
        n_counter,
        n_cap,
        tuple(free),
        tuple(owners),
        tuple(taints),
    )


def _counters_fit(dev, pool, features):
    if (
        dev.multi
        and features.consumable_capacity
        and features.partitionable_devices
        and pool.counters is not None
        and not pool.counters.overcommitted
    ):
        return True  # may have paid its counters with an earlier share
    return counters_fit_alone(dev, pool, features)


def request_funnels(plan, view):
    """[(claim, request, [Funnel per variant])] of every request on one node, whatever the node's
    verdict (verdict.py sorts nodes into "never" and "blocked now" with them)."""
    allocator = NodeAllocator(plan)
    return [
        (claim, req, [Funnel(allocator, view, claim, v) for v in req.variants])
        for claim in plan.claims
        for req in claim.requests
    ]


def explain(plan, view, deadline=None):
    """(code, text) for a node where Allocate found no solution.

    The extra searches (constraints relaxed) get the same time limits as the search itself; when
    they run out, the node still does not fit, only the explanation is cut short.
    """
    try:
        return _explain(plan, view, deadline)
    except TimedOut:
        return "unexplained", "cannot allocate all claims (the search for an explanation ran out of time)"


def _explain(plan, view, deadline):
    allocator = NodeAllocator(plan)

    def search():
        return (
            NodeAllocator(plan, deadline=deadline, filter_timeout=EXPLAIN_TIMEOUT_SECONDS)
            .run(view, raise_timeout=True)
            .status
        )

    claims = plan.claims
    multi = len(claims) > 1

    def prefix(claim):
        return f"claim {claim.ref}, " if multi else ""

    funnels = []
    for claim in claims:
        for req in claim.requests:
            fs = [Funnel(allocator, view, claim, v) for v in req.variants]
            if not any(f.enough for f in fs):
                if len(fs) == 1:
                    return fs[0].code(), f"{prefix(claim)}request `{req.name}`: {fs[0].text(view)}"
                inner = "; ".join(f"`{f.v.label}`: {f.text(view)}" for f in fs)
                return fs[0].code(), f"{prefix(claim)}request `{req.name}`: no subrequest fits ({inner})"
            funnels.append((claim, req, next(f for f in fs if f.enough)))

    # Every request could be served alone: the combination fails (constraints, shared devices, counters).
    saved = plan.only_constraints
    try:
        plan.only_constraints = set()
        if search() == SUCCESS:
            for ci, claim in enumerate(claims):
                for i, c in enumerate(claim.constraints):
                    plan.only_constraints = {(ci, i)}
                    if search() not in (SUCCESS, ERROR):
                        covered = [f for cl, _, f in funnels if cl is claim and c.covers(f.v)]
                        need = sum(f.need for f in covered)
                        free = len({d.key for f in covered for d in f.free})
                        return "constraint", (
                            f"{prefix(claim)}constraint {c.text} cannot be met by any {need} of the {free} free "
                            f"{_plural(free, 'device', 'devices')}"
                        )
            return (
                "constraint",
                f"{prefix(claims[0])}the claim's constraints cannot be met together by the free devices",
            )
    finally:
        plan.only_constraints = saved
    need = sum(f.need for _, _, f in funnels)
    free = len({d.key for _, _, f in funnels for d in f.free})
    names = ", ".join(f"`{r.name}`" for _, r, _ in funnels)
    if free < need:
        return "combination", f"requests {names} need {need} devices together but only {free} distinct devices are free"
    return (
        "combination",
        f"requests {names}: no combination of the {free} free devices fits together (shared counters or capacity)",
    )
