"""Device matching for the search (search.py): which devices a request's selectors accept, and
whether one device can join the picks (brief 2.5: in use, selectors, capacity, counters, taints,
constraints), with the exact undo the search's backtracking needs.

DeviceMatcher holds those steps as methods; NodeAllocator (search.py) inherits them and owns the state
they read and change: plan, f, state, extra, view, picks, picked_dedicated, allocating,
picked_by_claim, share_capacity, share_recorded, counters_used, constraint_states, and _tick().
"""

from fractions import Fraction

from .errors import AllocationError
from .projection import projector_for

# Share CEL results between devices a selector cannot tell apart (projection.py); tests switch it off
# to compare against per-device evaluation.
SHARE_RESULTS = True


def result_dict(ref, variant, device):
    """A dedicated pick's entry of the preview's `results` (Pick.to_dict adds what a share has)."""
    driver, pool, name = device.key  # one read of the device for all three (a fleet preview makes ~100,000)
    out = {
        "claim": ref,
        "request": variant.label,
        "driver": driver,
        "pool": pool,
        "device": name,
        "adminAccess": variant.admin,
    }
    if device.binding_conditions:
        out["bindingConditions"] = list(device.binding_conditions)
        out["bindingFailureConditions"] = list(device.binding_failure_conditions)
    return out


class Pick:
    __slots__ = ("claim", "variant", "device", "pool", "share", "consumed")

    def __init__(self, claim, variant, device, pool, share, consumed):
        self.claim, self.variant, self.device, self.pool = claim, variant, device, pool
        self.share, self.consumed = share, consumed

    def to_dict(self):
        d = self.device
        v = self.variant
        out = result_dict(self.claim.ref, v, d)
        if self.share:
            out["shared"] = True
            if self.consumed:
                from .quantity import format_quantity

                out["consumedCapacity"] = {
                    k: format_quantity(Fraction(amount), consumed_spelling(v, d, k))
                    for k, amount in self.consumed.items()
                }
        return out


class MatchState:
    """matchAttribute: the first device fixes the value (brief 2.6)."""

    __slots__ = ("c", "values")

    def __init__(self, constraint):
        self.c, self.values = constraint, []

    def add(self, label, device):
        value = device.attribute(self.c.match)
        if value is None or value[0] == "unknown":
            return False
        if self.values and self.values[0] != value:
            return False
        self.values.append(value)
        return True

    def remove(self, label, device):
        self.values.pop()


class DistinctState:
    __slots__ = ("c", "per_request", "values")

    def __init__(self, constraint, per_request):
        self.c, self.per_request = constraint, per_request
        self.values = {} if per_request else []

    def add(self, label, device):
        value = device.attribute(self.c.distinct)
        if value is None or value[0] == "unknown":
            return False
        if self.per_request:
            # QUIRK (1.36): one stored value per request name, so only the latest device of a request counts.
            if value in self.values.values():
                return False
            self.values[label] = value
        else:
            if value in self.values:
                return False
            self.values.append(value)
        return True

    def remove(self, label, device):
        if self.per_request:
            self.values.pop(label, None)
        else:
            self.values.pop()


def policy_consumption(requested, value, policy):
    """Amount a share consumes of one capacity, or None when the request violates the policy (brief 2.12)."""
    if not policy:
        return value if requested is None else requested
    default = policy.get("default")
    default = _quantity(default) if default is not None else None
    if requested is None:
        return default if default is not None else value
    vr, vv = policy.get("validRange"), policy.get("validValues")
    if vr:
        lo = _quantity(vr.get("min"))
        amount = max(requested, lo)
        step = vr.get("step")
        if step is not None:
            step = _quantity(step)
            # 1.36 works on whole numbers: Quantity.Value() rounds up.
            lo_i, st_i, am_i = _ceil(lo), _ceil(step), _ceil(amount)
            if st_i > 0:
                n = -(-(am_i - lo_i) // st_i)
                amount = lo_i + n * st_i
        hi = vr.get("max")
        if hi is not None and amount != default and amount > _quantity(hi):
            return None
        return amount
    if vv:
        values = sorted(_quantity(v) for v in vv)
        for v in values:
            if v >= requested:
                return v
        # Above every valid value: upstream keeps the request as it is, which then violates the
        # policy (it is none of the valid values), so the device cannot serve the request.
        return None
    return requested


def consumed_spelling(variant, device, name):
    """The quantity text whose format the consumed amount of capacity `name` is written in, as upstream's
    calculateConsumedCapacity leaves it: a copy of the request, the default, the capacity's value, the
    minimum or the chosen valid value keeps that quantity's format; a value rounded up to a step is a new
    BinarySI quantity (so 3G rounded on a 1G step is written 3000000000, 4Gi stays 4Gi)."""
    requested = (((variant.raw.get("capacity") or {}).get("requests")) or {}).get(name)
    capacity = (device.raw.get("capacity") or {}).get(name) or {}
    policy = capacity.get("requestPolicy") or {}
    if requested is None:
        return policy["default"] if policy.get("default") is not None else capacity.get("value")
    valid_range, valid_values = policy.get("validRange"), policy.get("validValues")
    if valid_range and valid_range.get("min") is not None:
        if _quantity(requested) < _quantity(valid_range["min"]):
            return valid_range["min"]
        return "0Ki" if valid_range.get("step") is not None else requested
    if valid_values:
        wanted = _quantity(requested)
        return next((v for v in sorted(valid_values, key=_quantity) if wanted <= _quantity(v)), requested)
    return requested


def _quantity(v):
    from .model import _q

    return _q(v)


def _ceil(f):
    return -(-f.numerator // f.denominator)


def counters_fit_alone(dev, pool, features, extra=None):
    """Whether `dev`'s counters fit in what its pool has left (less a headroom overlay's `extra`),
    with nothing else charged: what `_add_counters` decides for a run's first charge."""
    if not features.partitionable_devices:
        return False
    pc = pool.counters
    if pc is None or pc.overcommitted:
        return False  # brief 2.10: an over-committed pool serves no device with counters
    used = extra.counters.get(id(pc)) if extra is not None else None
    for set_name, counters in dev.consumes:
        avail = pc.available.get(set_name)
        if avail is None:
            return False
        eu = used.get(set_name) if used else None
        for cname, amount in counters.items():
            if amount + (eu.get(cname, 0) if eu else 0) > avail.get(cname, 0):
                return False
    return True


def own_counter_sets(cands):
    """True when no counter set is drawn on by two candidates (or twice by one): then whether one
    candidate's counters fit does not depend on which others were picked."""
    seen = set()
    for dev, pool, _ in cands:
        if dev.has_counters:
            pc = id(pool.counters)
            for set_name, _names in dev.counter_names():  # names only, as the pool check reads them
                if (pc, set_name) in seen:
                    return False
                seen.add((pc, set_name))
    return True


def evaluate_chain(device, chain):
    """True, False, or (owner, index, error) for the class selectors then the request's selectors."""
    cache = device.sel_cache
    for owner, index, compiled, expr in chain:
        res = cache.get(expr)
        if res is None:
            proj = projector_for(expr) if SHARE_RESULTS else None
            pkey = proj.key(device) if proj is not None else None
            if pkey is not None:
                res = proj.results.get(pkey)
            if res is None:
                res = _evaluate(compiled, expr, device)
                if pkey is not None:
                    proj.results[pkey] = res
            cache[expr] = res
        if res is True:
            continue
        if res is False:
            return False
        return (owner, index, res)
    return True


def _evaluate(compiled, expr, device):
    from .cel import CelRuntimeError

    try:
        return bool(compiled.evaluate(device.cel_device()))
    except CelRuntimeError as exc:
        return exc
    except ValueError as exc:  # a capacity that is not a quantity: the device cannot be evaluated
        return CelRuntimeError(expr, str(exc))


def format_cel_error(claim, err):
    owner, index, exc = err
    prefix = owner if owner.startswith("class ") else f"claim {claim.ref}"
    return f"{prefix}: selector #{index}: CEL runtime error: {getattr(exc, 'message', None) or exc}"


class DeviceMatcher:
    """The per-device steps of NodeAllocator's search (see the module docstring for the state they use)."""

    # -- candidates ----------------------------------------------------------------------------

    def candidates(self, view, variant):
        """Devices of usable pools on this node whose selectors are true or raise, in search order."""
        chain_key, chain = self.plan.chains[id(variant)]
        return self.chain_candidates(view, chain_key, chain)

    def chain_candidates(self, view, chain_key, chain):
        cached = view.candidates.get(chain_key)
        if cached is not None:
            return cached
        out = []
        binding_ok = self.f.binding_conditions
        for pool in view.usable:
            matches = pool.match_cache.get(chain_key)
            if matches is None:
                matches = []
                off_node = pool.off_node
                for dev in pool.devices:
                    if dev.binding_conditions and not binding_ok:
                        continue
                    self._tick()
                    res = evaluate_chain(dev, chain)
                    if res is True:
                        if dev.key not in off_node:
                            matches.append((dev, pool, None))
                    elif res is not False:  # a CEL error: raised where the search reaches it
                        matches.append((dev, pool, res))
                pool.match_cache[chain_key] = matches
            out.extend(matches)
        view.candidates[chain_key] = out
        return out

    def _last_error(self, cands):
        """Index of the last candidate whose selectors raised, -1 if none (cached with the list)."""
        key = ("last-error", id(cands))
        last = self.view.candidates.get(key)
        if last is None:
            last = self.view.candidates[key] = max((i for i, c in enumerate(cands) if c[2] is not None), default=-1)
        return last

    # -- one candidate (brief 2.5) -------------------------------------------------------------

    def _in_use(self, ci, v, key, shareable):
        if v.admin:
            return key in self.picked_by_claim[ci]
        if key in self.state.dedicated or key in self.allocating:
            return True
        extra = self.extra
        if extra is not None and key in extra.dedicated:
            return True
        return False

    def _capacity(self, dev, v, persisted_only=False):
        """Consumption per capacity if the device can serve the request, else None."""
        shareable = dev.multi and self.f.consumable_capacity
        reqs = v.capacity_requests
        if not reqs and not shareable:
            return {}
        caps = dev.capacity
        for name in reqs:
            if name not in caps:
                return None  # 1.36: exact key match only
        consumed = {}
        agg = self.state.capacity.get(dev.key) if shareable else None
        mine = None if persisted_only else self.share_capacity.get(dev.key)
        extra = self.extra.capacity.get(dev.key) if (self.extra is not None and shareable) else None
        for name, (value, policy) in caps.items():
            if not shareable and name not in reqs:
                continue
            amount = policy_consumption(reqs.get(name), value, policy if shareable else None)
            if amount is None:
                return None
            used = amount
            if agg:
                used += agg.get(name, 0)
            if mine:
                used += mine.get(name, 0)
            if extra:
                used += extra.get(name, 0)
            if used > value:
                return None
            if shareable:
                consumed[name] = amount
        return consumed

    def _try(self, ci, claim, v, dev, pool, err, must):
        """Check one device; on success mark it and return an undo token, else None."""
        key = dev.key
        f = self.f
        shareable = dev.multi and f.consumable_capacity
        if self._in_use(ci, v, key, shareable):
            return None
        if err is not None:
            raise AllocationError(format_cel_error(claim, err))
        consumed = {}
        if f.consumable_capacity and (v.capacity_requests or shareable):
            consumed = self._capacity(dev, v)
            if consumed is None:
                return None
        counted = None
        if dev.has_counters:
            if not f.partitionable_devices:
                return None
            paid = shareable and (
                key in self.state.capacity
                or key in self.share_recorded
                or (self.extra is not None and key in self.extra.capacity)
            )
            if not paid:
                counted = self._add_counters(pool, dev)
                if counted is False:
                    return None
        if f.device_taints and dev.taints and v.blocking_taint(dev) is not None:
            self._leak_or_release(pool, counted)
            return None
        accepted = []
        for cs in self.constraint_states[ci]:
            if cs.c.covers(v):
                if not cs.add(v.label, dev):
                    for prev in reversed(accepted):
                        prev.remove(v.label, dev)
                    self._leak_or_release(pool, counted)
                    if must:
                        raise AllocationError(
                            f"claim {claim.ref}, request {v.error_name}: cannot add device {dev.id} because a claim constraint would not be satisfied"
                        )
                    return None
                accepted.append(cs)
        if shareable:
            mine = self.share_capacity.setdefault(key, {})
            for name, amount in consumed.items():
                mine[name] = mine.get(name, 0) + amount
            # Upstream records every share of this call in allocatingCapacity, also one with nothing
            # to consume (a device without capacities): later shares of the device then skip the
            # counter check, so its counters are charged once, by the first share.
            newly_recorded = key not in self.share_recorded
            if newly_recorded:
                self.share_recorded.add(key)
        else:
            newly_recorded = False
            if not v.admin:
                self.picked_dedicated.add(key)
            self.allocating[key] = self.allocating.get(key, 0) + 1
            self.picked_by_claim[ci].add(key)
        self.picks[ci].append(Pick(claim, v, dev, pool, shareable, consumed if shareable else None))
        return (v, dev, pool, shareable, consumed, counted, accepted, newly_recorded)

    def _undo(self, ci, token):
        v, dev, pool, shareable, consumed, counted, accepted, newly_recorded = token
        self.picks[ci].pop()
        for cs in reversed(accepted):
            cs.remove(v.label, dev)
        if shareable:
            mine = self.share_capacity[dev.key]
            for name, amount in consumed.items():
                mine[name] -= amount
            if newly_recorded:
                self.share_recorded.discard(dev.key)
            # QUIRK (1.36): undoing a share does not give its counters back.
            if not self.f.quirk_counter_leak:
                self._release(pool, counted)
        else:
            if not v.admin:
                self.picked_dedicated.discard(dev.key)
            n = self.allocating[dev.key] - 1
            if n:
                self.allocating[dev.key] = n
            else:
                del self.allocating[dev.key]
            self.picked_by_claim[ci].discard(dev.key)
            self._release(pool, counted)

    # -- counters (brief 2.10) -----------------------------------------------------------------

    def _add_counters(self, pool, dev):
        pc = pool.counters
        if pc is None:
            return False
        used = self.counters_used.setdefault(id(pc), {})
        extra = self.extra.counters.get(id(pc)) if self.extra is not None else None
        added = []
        ok = not pc.overcommitted
        for set_name, counters in dev.consumes:
            avail = pc.available.get(set_name)
            if avail is None:
                ok = False
                continue
            u = used.setdefault(set_name, {})
            eu = extra.get(set_name) if extra else None
            for cname, amount in counters.items():
                total = u.get(cname, 0) + amount
                u[cname] = total
                added.append((set_name, cname, amount))
                if eu:
                    total += eu.get(cname, 0)
                if total > avail.get(cname, 0):
                    ok = False
        if not ok:
            self._release(pool, added)
            return False
        return added

    def _release(self, pool, counted):
        if not counted:
            return
        used = self.counters_used[id(pool.counters)]
        for set_name, cname, amount in counted:
            used[set_name][cname] -= amount

    def _leak_or_release(self, pool, counted):
        # QUIRK (1.36, kubernetes#140436): a device rejected after its counters were charged keeps them.
        if not self.f.quirk_counter_leak:
            self._release(pool, counted)
