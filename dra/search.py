"""One `Allocate(node, claims)` call: the depth-first search of the v1.36 incubating allocator.

Order and checks follow brief sections 2.3-2.12 (and dra-cases.md): requests in order, devices in
pool -> slice -> device order, device #i+1 only after device #i of the same request, first
solution wins, exact undo on backtrack (apart from the switchable 1.36 counter leak).

Here: the search and its state (requests, combinations, firstAvailable, `All` lists, the direct
answer and the answers kept per node). The per-device steps (selectors, in use, capacity, counters,
taints, constraints, undo) are in matching.py.
"""

import time

from .deadline import FILTER_TIMEOUT_SECONDS, TimedOut, timed_out_message
from .errors import AllocationError
from .matching import (
    DeviceMatcher,
    DistinctState,
    MatchState,
    Pick,
    counters_fit_alone,
    format_cel_error,
    own_counter_sets,
    result_dict,
)
from .model import MAX_DEVICES_PER_CLAIM

# Answer single-request plans without the search where that is exact (NodeAllocator._simple_run);
# tests switch it off to compare with the search.
SIMPLE_PATH = True

SUCCESS, UNSCHEDULABLE, NODE_FAILURE, ERROR = "success", "unschedulable", "node-failure", "error"
# Not decided: the whole request's deadline (deadline.py) passed first. Never upstream's verdict.
DEADLINE = "deadline"
INVALID_POOLS_MESSAGE = "invalid resource pools were encountered"


class _MaxSize(Exception):
    """Internal signal: this path would exceed 32 results; a firstAvailable parent tries its next entry."""


# Kept direct answers per node view: past this many different requests the view starts over.
MAX_KEPT_PER_VIEW = 8


class KeptAnswer:
    """A direct answer (NodeAllocator._simple_run) kept with a node's view for one request shape.

    Valid while the allocated-state tokens of the candidates' pools are unchanged: they change
    whenever an allocation or a device taint in one of them does (AllocatedState.token), so a kept
    answer is never stale; the view itself goes when a slice of the node or a DeviceClass changes.
    A failure's explanation is kept with the claim/request names it names. About 0.3 KB per node and
    request shape (the candidate tuples are the view's own), hence the bound per view."""

    __slots__ = ("tokens", "pools", "chosen", "explained", "keys")

    def __init__(self, tokens, pools, chosen):
        # chosen: the picked candidates' own (device, pool, error) tuples, or None: no solution
        self.tokens, self.pools, self.chosen = tokens, pools, chosen
        self.explained = None  # (claim/request shape, (code, text))
        self.keys = (
            None  # the picked devices' keys (frozenset), made by the first NodeAllocator._outcome that reads them
        )


class Outcome:
    """What Allocate returned for one node."""

    __slots__ = ("node", "status", "picks", "message")

    def __init__(self, node, status, picks=None, message=None):
        self.node, self.status, self.picks, self.message = node, status, picks or [], message

    @property
    def fits(self):
        return self.status == SUCCESS

    def result_dicts(self):
        """The picks as the preview's `results` entries (fresh dicts: callers may change them)."""
        return [p.to_dict() for picks in self.picks for p in picks]


class KeptOutcome(Outcome):
    """SUCCESS from a kept direct answer: a fleet preview reads only its result dicts, made straight
    from the kept devices under the current claim and request names, so its Picks are made only when
    something asks for them (allocate()'s allocation result, a test). 4 GPUs on 20,000 nodes: 80,000
    Picks saved. Nothing here depends on the names being those of an earlier preview: a preview of a
    newly named claim (what users paste) costs what a repeated one does."""

    __slots__ = ("_claim", "_variant", "_chosen")

    def __init__(self, node, claim, variant, chosen):
        self.node, self.status, self.message = node, SUCCESS, None
        self._claim, self._variant, self._chosen = claim, variant, chosen

    @property
    def picks(self):  # the current plan's claim and variant, the kept answer's devices
        claim, v = self._claim, self._variant
        return [[Pick(claim, v, c[0], c[1], False, None) for c in self._chosen]]

    def result_dicts(self):
        ref, v = self._claim.ref, self._variant
        return [result_dict(ref, v, c[0]) for c in self._chosen]


class Plan:
    """Claims prepared for allocation: classes resolved, selectors compiled (the same on every node)."""

    def __init__(self, inventory, claims, chains):
        self.inventory = inventory
        self.claims = claims
        self.chains = chains  # id(variant) -> (chain_key, [(owner, index, compiled, expr)])
        self.only_constraints = None
        # ((claim, request, variant) position, AllocationError): an up-front check that failed after
        # an `All` request, raised by the search once it gets there (fleet.prepare).
        self.deferred = None


class NodeAllocator(DeviceMatcher):
    """Runs the search for one node at a time; reuse it across nodes of one preview."""

    def __init__(self, plan, extra=None, deadline=None, filter_timeout=FILTER_TIMEOUT_SECONDS):
        self.plan = plan
        self.inv = plan.inventory
        self.f = self.inv.features
        self.state = self.inv.state
        # `extra` carries allocations made by earlier copies in a headroom run (same shape as the
        # per-call state), so greedy placement sees them as allocated.
        self.extra = extra
        # Each run() gets `filter_timeout` seconds (the scheduler's per-node Filter timeout; None =
        # unlimited), cut short by `deadline` (a deadline.Deadline for the whole request).
        self.deadline = deadline
        self.filter_timeout = filter_timeout
        self._until = None
        self._until_is_request = False
        self._simple = None  # (plan state, _simple_request's answer)
        self._kept_keys = {}  # (id(variant), matchAttribute names) -> (key of its kept direct answers, claim/request shape)
        self.last_kept = None  # (KeptAnswer, claim/request shape) the last run read or made, or None

    def _start_clock(self):
        until = time.monotonic() + self.filter_timeout if self.filter_timeout else None
        at = self.deadline.at if self.deadline is not None else None
        self._until_is_request = at is not None and (until is None or at <= until)
        self._until = at if self._until_is_request else until

    def _tick(self):
        """Upstream checks its context at every step of the search; so does this (a cancelled
        request deadline included: a preview whose client went away)."""
        if self._until is not None and time.monotonic() >= self._until:
            raise TimedOut(self._until_is_request)
        if self.deadline is not None and self.deadline.cancelled:
            raise TimedOut(True)

    # -- the call ------------------------------------------------------------------------------

    def run(self, view, raise_timeout=False):
        """One Allocate call; a timeout is an ERROR outcome (the scheduler's Filter status), or a
        DEADLINE one when the whole request's deadline came first. `raise_timeout` lets it through."""
        self._start_clock()
        try:
            return self._run(view)
        except TimedOut as exc:
            if raise_timeout:
                raise
            if exc.whole_request:
                return Outcome(view.name, DEADLINE, message=deadline_message(self.deadline))
            return Outcome(view.name, ERROR, message=timed_out_message(view.name))
        finally:
            self._until = None

    def _run(self, view):
        self.last_kept = None
        simple = self._simple_request() if SIMPLE_PATH else None
        if simple is not None:
            outcome = self._simple_run(view, *simple)
            if outcome is not None:
                return outcome
        claims = self.plan.claims
        self.view = view
        self.picked_dedicated = set()  # non-admin dedicated picks: what a headroom copy uses up
        # Upstream's allocatingDevices: every dedicated pick, admin access included, blocks later
        # non-admin requests of any claim; an admin request is only kept off its own claim's picks.
        self.allocating = {}  # key -> number of claims it is being allocated for
        self.picked_by_claim = [set() for _ in claims]
        self.share_capacity = {}
        self.share_recorded = set()
        self.counters_used = {}
        self.picks = [[] for _ in claims]
        only = self.plan.only_constraints  # None = all (explanations try subsets)
        self.constraint_states = [
            [
                MatchState(c) if c.match else DistinctState(c, self.f.quirk_distinct_per_request)
                for i, c in enumerate(claim.constraints)
                if only is None or (ci, i) in only
            ]
            for ci, claim in enumerate(claims)
        ]
        deferred = self.plan.deferred
        try:
            self.all_lists = {}
            for ci, claim in enumerate(claims):
                total = 0
                for ri, req in enumerate(claim.requests):
                    needs = []
                    for vi, v in enumerate(req.variants):
                        if deferred is not None and deferred[0] <= (ci, ri, vi):
                            raise deferred[1]
                        if v.mode == "All":
                            lst = self._all_list(view, claim, v)
                            self.all_lists[id(v)] = lst
                            needs.append(len(lst))
                        else:
                            needs.append(v.count)
                    total += min(needs) if needs else 0
                if deferred is not None and deferred[0] <= (ci, len(claim.requests), 0):
                    raise deferred[1]
                if total > MAX_DEVICES_PER_CLAIM:
                    raise AllocationError(
                        f"claim {claim.ref}: number of requested devices {total} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}"
                    )
            if deferred is not None:
                raise deferred[1]
            ok = not self._hopeless(view) and self._claim(0)
        except AllocationError as exc:
            return Outcome(view.name, ERROR, message=str(exc))
        if ok:
            return Outcome(view.name, SUCCESS, picks=[list(p) for p in self.picks])
        if view.invalid:
            return Outcome(view.name, NODE_FAILURE, message=f"{INVALID_POOLS_MESSAGE} ({invalid_detail(view)})")
        return Outcome(view.name, UNSCHEDULABLE)

    # -- the common case without a search -----------------------------------------------------

    def _simple_request(self):
        """(variant, [covering matchAttribute names]) when the plan is one claim with one ExactCount
        request and at most matchAttribute constraints, else None (the general search runs)."""
        plan = self.plan
        only = plan.only_constraints
        key = (None if only is None else frozenset(only), plan.deferred is None)
        cached = self._simple
        if cached is not None and cached[0] == key:
            return cached[1]
        found = None
        claims = plan.claims
        if len(claims) == 1 and plan.deferred is None and len(claims[0].requests) == 1:
            claim = claims[0]
            req = claim.requests[0]
            v = req.variants[0]
            plain = (
                not req.prioritized
                and v.mode == "ExactCount"
                and 0 < v.count <= MAX_DEVICES_PER_CLAIM
                and not v.admin
                and not (v.capacity_requests and self.f.consumable_capacity)
            )
            only = plan.only_constraints
            matches = []
            for i, c in enumerate(claim.constraints):
                if only is not None and (0, i) not in only:
                    continue
                if not c.covers(v):
                    continue
                if not c.match:
                    plain = False
                    break
                matches.append(c.match)
            if plain:
                found = (v, tuple(matches))
        self._simple = (key, found)
        return found

    def _simple_run(self, view, v, matches):
        """The search's answer for a single ExactCount request, computed directly; None = run the search.

        Exact only while every device the search would try is "plain": no CEL error anywhere in the
        list, not shareable with consumable capacity, and counters only where no two candidates draw
        on the same counter set (a whole GPU with its own set, as MIG-capable nodes publish them).
        Then the search's per-device check is independent of the other picks (in use, counters,
        untolerated taint, matchAttribute value), and its depth-first order picks the first `count`
        acceptable devices; with matchAttribute, the first `count` acceptable devices of the value
        whose first acceptable device comes first. One exception: under the 1.36 counter leak a
        device that a constraint turns away keeps its counters, so a later first pick of it fails;
        with counters and several matchAttribute values the search runs instead.
        """
        self.view = view
        self.counters_used = {}
        if self.extra is None:
            key, shape = self._kept_key(v, matches)
            kept = self._kept_answer(view, key)
            if kept is not None:
                self.last_kept = (kept, shape)
                return self._outcome(view, v, kept.chosen, kept)
        cands = self.candidates(view, v)
        plain = self._plain_prefix(cands)  # candidates before the first one that is not plain
        if plain < 0:
            return None  # a selector raised somewhere in the list
        if not matches and v.count == 1 and plain < len(cands):
            outcome = self._first_pick(view, v, cands)
            if outcome.status == SUCCESS:
                pick = outcome.picks[0][0]
                if not pick.share:
                    self._keep_answer(view, v, matches, cands, [c for c in cands if c[0] is pick.device][:1])
            elif outcome.status in (UNSCHEDULABLE, NODE_FAILURE):
                self._keep_answer(view, v, matches, cands, None)
            return outcome
        fits = self._counter_verdicts(cands)
        chosen = self._choose(cands, plain, v, matches, fits)
        if chosen is False:
            return None
        chosen = [cands[i] for i in chosen] if chosen is not None else None  # the candidates' own tuples
        if fits is not None and self.extra is not None and chosen is not None:
            self._charge_like_the_search(cands, chosen, fits, v)
        kept = self._keep_answer(view, v, matches, cands, chosen) if self.extra is None else None
        return self._outcome(view, v, chosen, kept)

    def _outcome(self, view, v, chosen, kept=None):
        """The Outcome of the direct answer `chosen` ([(device, pool, _)] or None). With `kept` (its
        KeptAnswer), a KeptOutcome: no Picks, result dicts made only when read."""
        self.share_capacity = {}
        if chosen is None:
            self.picked_dedicated = set()
            self.picks = [[]]
            if view.invalid:
                return Outcome(view.name, NODE_FAILURE, message=f"{INVALID_POOLS_MESSAGE} ({invalid_detail(view)})")
            return Outcome(view.name, UNSCHEDULABLE)
        claim = self.plan.claims[0]
        if kept is None:
            picks = [Pick(claim, v, c[0], c[1], False, None) for c in chosen]
            self.picks = [picks]
            self.picked_dedicated = {c[0].key for c in chosen}
            return Outcome(view.name, SUCCESS, picks=[list(picks)])
        keys = kept.keys
        if keys is None:
            keys = kept.keys = frozenset(c[0].key for c in chosen)
        # Only the search reads self.picks, after resetting it; None makes any other read fail loudly.
        # Kept answers exist only without `extra` (never in headroom, whose Overlay reads picked_dedicated).
        self.picks = None
        self.picked_dedicated = keys
        return KeptOutcome(view.name, claim, v, chosen)

    def _kept_answer(self, view, key):
        """The direct answer kept with this node's view under `key` (_kept_key), if still true (KeptAnswer)."""
        kept = view.kept.get(key)
        if kept is None:
            return None
        token = self.state.token
        return kept if kept.tokens == tuple([token(k) for k in kept.pools]) else None

    def _keep_answer(self, view, v, matches, cands, chosen):
        # Device taints make the answer depend on the request's tolerations: not kept then.
        if self.f.device_taints and any(c[0].taints for c in cands):
            self.last_kept = None
            return None
        if len(view.kept) >= MAX_KEPT_PER_VIEW:
            view.kept.clear()  # many different requests previewed: start over rather than grow
        pools = tuple(dict.fromkeys(pool.key for _, pool, _ in cands))
        token = self.state.token
        key, shape = self._kept_key(v, matches)
        kept = view.kept[key] = KeptAnswer(tuple([token(k) for k in pools]), pools, chosen)
        self.last_kept = (kept, shape)
        return kept

    def kept_explanation(self, explain):
        """(code, text) of the failed direct answer of the last run: kept with it (the same inputs
        give the same explanation), else `explain()`'s, kept unless it ran out of time."""
        if self.last_kept is None:
            return explain()
        kept, shape = self.last_kept
        if kept.explained is not None and kept.explained[0] == shape:
            return kept.explained[1]
        found = explain()
        if found[0] not in ("unexplained", "deadline"):
            kept.explained = (shape, found)
        return found

    def _kept_key(self, v, matches):
        """(view cache key of the kept direct answers for `v`, its result dicts' claim/request shape)."""
        hit = self._kept_keys.get((id(v), matches))
        if hit is None:
            hit = self._kept_keys[(id(v), matches)] = (
                ("direct", self.plan.chains[id(v)][0], matches, v.count),
                (self.plan.claims[0].ref, v.label, v.admin),
            )
        return hit

    def _choose(self, cands, plain, v, matches, fits):
        """Indexes of the candidates the search would pick (None: no solution), or False where only
        the search itself can tell (see _simple_run)."""
        need = v.count
        dedicated = self.state.dedicated
        extra = self.extra.dedicated if self.extra is not None else ()
        taints_on = self.f.device_taints
        chosen = None
        if not matches:
            chosen = []
            for i, c in enumerate(cands):
                if i == plain:
                    return False
                dev = c[0]
                key = dev.key
                if key in dedicated or key in extra:
                    continue
                if fits is not None and fits[i] is False:
                    continue
                if taints_on and dev.taints and v.blocking_taint(dev) is not None:
                    continue
                chosen.append(i)
                if len(chosen) == need:
                    break
            else:
                chosen = None
        else:
            if plain < len(cands):
                return False  # the search would try all of them (failed first picks scan the rest)
            values = self._match_values(cands, matches)
            if values is None:
                return False
            if (
                fits is not None
                and self.f.quirk_counter_leak
                and len({value for value in values if value is not None}) > 1
            ):
                return False
            groups = {}
            for i, value in enumerate(values):
                if value is None:
                    continue
                dev = cands[i][0]
                key = dev.key
                if key in dedicated or key in extra:
                    continue
                if fits is not None and fits[i] is False:
                    continue
                if taints_on and dev.taints and v.blocking_taint(dev) is not None:
                    continue
                group = groups.get(value)
                if group is None:
                    group = groups[value] = []
                group.append(i)
            for group in groups.values():  # in order of first acceptable device
                if len(group) >= need:
                    chosen = group[:need]
                    break
        return chosen

    def _counter_verdicts(self, cands):
        """Per candidate whether its counters fit on their own (None for one without counters);
        None for a list without counters. Cached with the list unless a headroom overlay counts."""
        key = ("counter-fit", id(cands))
        cached = self.view.candidates.get(key, False) if self.extra is None else False
        if cached is False:
            cached = None
            for i, (dev, pool, _) in enumerate(cands):
                if dev.has_counters:
                    if cached is None:
                        cached = [None] * len(cands)
                    cached[i] = counters_fit_alone(dev, pool, self.f, self.extra)
            if self.extra is None:
                self.view.candidates[key] = cached
        return cached

    def _charge_like_the_search(self, cands, chosen, fits, v):
        """counters_used as the search leaves it on success (a headroom copy commits it): the picks'
        counters, plus, under the 1.36 leak, those of devices it charged and then turned away (an
        untolerated taint or a missing matchAttribute value) before its last pick."""
        picked = {id(c[0]) for c in chosen}
        leak = self.f.quirk_counter_leak
        dedicated = self.state.dedicated
        extra = self.extra.dedicated
        last = max(i for i, c in enumerate(cands) if id(c[0]) in picked)
        for i in range(last + 1):
            dev, pool, _ = cands[i]
            if not dev.has_counters:
                continue
            if id(dev) not in picked:
                if not leak or dev.key in dedicated or dev.key in extra or not fits[i]:
                    continue
            self._add_counters(pool, dev)

    def _first_pick(self, view, v, cands):
        """One device, no constraint: the search tries the candidates in order and the first that
        `_try` accepts is the answer (count 1: nothing to backtrack to). Devices with counters go
        through `_try` itself, so charging, releasing and the 1.36 counter leak are the search's own."""
        claim = self.plan.claims[0]
        self.picked_dedicated, self.allocating, self.picked_by_claim = set(), {}, [set()]
        self.share_capacity, self.share_recorded, self.counters_used = {}, set(), {}
        self.picks, self.constraint_states = [[]], [[]]
        for dev, pool, err in cands:
            self._tick()
            if self._try(0, claim, v, dev, pool, err, must=False) is not None:
                return Outcome(view.name, SUCCESS, picks=[list(self.picks[0])])
        if view.invalid:
            return Outcome(view.name, NODE_FAILURE, message=f"{INVALID_POOLS_MESSAGE} ({invalid_detail(view)})")
        return Outcome(view.name, UNSCHEDULABLE)

    def _plain_prefix(self, cands):
        """-1 when a candidate's selectors raised, else the index of the first candidate the direct
        answer cannot decide (counters shared with another candidate, or shareable with consumable
        capacity), len(cands) if none.
        Cached with the list (devices never change once parsed)."""
        key = ("plain", id(cands))
        cached = self.view.candidates.get(key)
        if cached is None:
            if self._last_error(cands) >= 0:
                cached = -1
            else:
                shares = self.f.consumable_capacity
                own_sets = own_counter_sets(cands)
                cached = next(
                    (
                        i
                        for i, (dev, _, _) in enumerate(cands)
                        if (dev.has_counters and not own_sets) or (shares and dev.multi)
                    ),
                    len(cands),
                )
            self.view.candidates[key] = cached
        return cached

    def _match_values(self, cands, matches):
        """Per candidate the tuple of its matchAttribute values, None where one is missing or
        unknown (the constraint rejects that device); None for the whole list if a value cannot be
        used as a key. Cached with the list."""
        key = ("match", id(cands), matches)
        cached = self.view.candidates.get(key, False)
        if cached is False:
            cached = []
            for dev, _, _ in cands:
                values = []
                for name in matches:
                    value = dev.attribute(name)
                    if value is None or value[0] == "unknown":
                        values = None
                        break
                    values.append(value)
                cached.append(tuple(values) if values is not None else None)
            try:
                set(cached)
            except TypeError:  # e.g. a list where a scalar belongs: the search compares those itself
                cached = None
            self.view.candidates[key] = cached
        return cached

    def _hopeless(self, view):
        """A request with fewer not-yet-allocated candidates than its count can never be served.

        Cheap exact shortcut for the common "node is full" case; skipped where the search could
        reach a selector error first (that must surface as a hard error, as upstream).
        """
        dedicated = self.state.dedicated
        extra = self.extra.dedicated if self.extra is not None else ()
        for claim in self.plan.claims:
            for req in claim.requests:
                # Requests are searched in order: past one that may raise (a selector error, or an
                # `All` request whose device a constraint rejects) there is no shortcut.
                if req.prioritized:
                    for v in req.variants:
                        if v.mode == "All" and claim.constraints:
                            return False
                        if v.mode != "All" and self._last_error(self.candidates(view, v)) >= 0:
                            return False
                    continue
                v = req.variants[0]
                if v.mode == "All":
                    if claim.constraints:
                        return False
                    continue
                cands = self.candidates(view, v)
                if self._last_error(cands) >= 0:
                    return False
                if v.admin:
                    continue
                free = 0
                for dev, _, _ in cands:
                    if dev.key not in dedicated and dev.key not in extra:
                        free += 1
                        if free >= v.count:
                            break
                if free < v.count:
                    return True
        return False

    def _all_list(self, view, claim, v):
        # Upstream walks the pools in order: a broken pool or a CEL error, whichever comes first.
        extra = [p for p in view.invalid + view.incomplete if p not in view.pools]
        pools = sorted([p for p in view.pools if not p.has_binding] + extra, key=lambda p: p.key)
        pools += [p for p in view.pools if p.has_binding]
        chain_key, chain = self.plan.chains[id(v)]
        by_pool = {}
        for dev, pool, err in self.candidates(view, v):
            by_pool.setdefault(id(pool), []).append((dev, pool, err))
        out = []
        for pool in pools:
            if not pool.complete:
                raise AllocationError(
                    f"claim {claim.ref}, request {v.error_name}: asks for all devices, but resource pool {pool.label} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {claim.ref}, request {v.error_name}: asks for all devices, but resource pool {pool.label} is currently invalid ({pool.invalid})"
                )
            for dev, _, err in by_pool.get(id(pool), ()):
                if err is not None:
                    raise AllocationError(format_cel_error(claim, err))
                # Upstream compares every candidate with its capacity when DRAConsumableCapacity is on,
                # requests or not: a shareable device whose persisted shares leave less than what this
                # request would consume (its default, else the whole value) is left out of the list.
                if (
                    self.f.consumable_capacity
                    and (v.capacity_requests or dev.multi)
                    and self._capacity(dev, v, persisted_only=True) is None
                ):
                    continue
                out.append((dev, pool, None))
        return out

    def _claim(self, ci):
        if ci == len(self.plan.claims):
            return True
        try:
            return self._request(ci, 0)
        except _MaxSize:
            return False  # at a claim boundary the signal is a plain "no solution"

    def _request(self, ci, ri):
        claim = self.plan.claims[ci]
        if ri == len(claim.requests):
            return self._claim(ci + 1)
        req = claim.requests[ri]
        if not req.prioritized:
            return self._device(ci, ri, req.variants[0], 0, 0)
        for v in req.variants:
            try:
                if self._device(ci, ri, v, 0, 0):
                    return True
            except _MaxSize:
                continue
        return False

    def _device(self, ci, ri, v, di, start):
        self._tick()
        all_mode = v.mode == "All"
        if all_mode:
            lst = self.all_lists[id(v)]
            need = len(lst)
            if need == 0:
                return False  # at least one device is required
        else:
            need = v.count
        if di == 0 and len(self.picks[ci]) + need > MAX_DEVICES_PER_CLAIM:
            raise _MaxSize()
        if di == need:
            return self._request(ci, ri + 1)
        claim = self.plan.claims[ci]
        if all_mode:
            dev, pool, _ = lst[di]
            token = self._try(ci, claim, v, dev, pool, None, must=True)
            if token is None:
                return False
            ok = False
            try:
                ok = self._device(ci, ri, v, di + 1, 0)
            finally:
                if not ok:
                    self._undo(ci, token)
            return ok
        cands = self.candidates(self.view, v)
        # Combinations need `need - di` more positions: stop when fewer are left. Safe only past the
        # last candidate whose selector raised (upstream would reach it and fail hard).
        stop = len(cands) - (need - di) + 1
        if self.f.quirk_counter_leak and any(c[0].has_counters for c in cands):
            # Under the 1.36 counter leak every device upstream tries and then turns away (taint,
            # constraint) keeps its counters charged, and upstream tries them all, however few are
            # left: skipping the hopeless tail would charge less and let later requests see counters
            # upstream no longer has (and reach errors upstream never gets to).
            stop = len(cands)
        last_err = self._last_error(cands)
        for idx in range(start, len(cands)):
            if idx >= stop and idx > last_err:
                break
            dev, pool, err = cands[idx]
            token = self._try(ci, claim, v, dev, pool, err, must=False)
            if token is None:
                continue
            ok = False
            try:
                ok = self._device(ci, ri, v, di + 1, idx + 1)
            finally:
                if not ok:
                    self._undo(ci, token)
            if ok:
                return True
        return False


class Overlay:
    """Allocations made by earlier copies during a headroom run (counted as allocated)."""

    def __init__(self):
        self.dedicated = set()
        self.capacity = {}
        self.counters = {}

    def commit(self, allocator):
        self.dedicated |= allocator.picked_dedicated
        for key, caps in allocator.share_capacity.items():
            mine = self.capacity.setdefault(key, {})
            for name, amount in caps.items():
                mine[name] = mine.get(name, 0) + amount
        for pc_id, sets in allocator.counters_used.items():
            mine = self.counters.setdefault(pc_id, {})
            for set_name, counters in sets.items():
                m = mine.setdefault(set_name, {})
                for cname, amount in counters.items():
                    m[cname] = m.get(cname, 0) + amount


def deadline_message(deadline):
    return f"not decided: the request's deadline of {deadline.seconds:g} s passed first"


def invalid_detail(view, limit=3):
    """Which pools are invalid and why; this node's own pools first, at most `limit` named."""
    own = [p for p in view.invalid if p.devices]
    pools = own + [p for p in view.invalid if not p.devices]
    text = "; ".join(f"pool {p.label}: {p.invalid}" for p in pools[:limit])
    if len(pools) > limit:
        text += f"; and {len(pools) - limit} more invalid pools seen through their shared counters"
    return text
