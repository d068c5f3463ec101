"""Device queries the API and the UI share: state (inventory/devicestate.py), attribute and capacity filters.

Everything is expressed as annotations and filters so a page of devices costs a fixed number of
queries whatever its size.
"""

from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from mirror.normalize import normalize_name

DEVICE_STATES = ("free", "allocated", "shared", "admin", "tainted")  # the API's v1 values: devicestate.API_STATES

CAPACITY_LOOKUPS = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def _key_candidates(name):
    """(driver or None, JSON key) pairs that spell a filter name in the normalised copies.

    A bare name means the device's own driver domain, which the copies store bare; `d/x` is
    stored bare on devices of driver d and qualified on all others.
    """
    domain, sep, ident = name.rpartition("/")
    if not sep:
        return [(None, name)]
    return [(domain, ident), (None, name)]


def _json_key_q(column, name, lookup, value, alias_prefix, qs):
    """Q over every spelling of `name`, plus the queryset carrying the aliases it uses."""
    q = Q()
    for i, (driver, key) in enumerate(_key_candidates(name)):
        alias = f"{alias_prefix}_{i}"
        # An alias instead of `column__key` lookups: keys may contain "__".
        qs = qs.alias(**{alias: KeyTransform(key, column)})
        term = Q(**{f"{alias}__{lookup}": value})
        if driver is not None:
            term &= Q(driver=driver)
        q |= term
    return qs, q


class DeviceQuerySet(models.QuerySet):
    # The NotReady nodes (devicestate.not_ready_nodes) a state annotation or filter of this queryset
    # read, carried to its clones: a request that filters on a state and shows the state reads them once.
    _not_ready = None

    def _clone(self):
        clone = super()._clone()
        clone._not_ready = self._not_ready
        return clone

    def _read_not_ready(self):
        from . import devicestate

        return self._not_ready if self._not_ready is not None else devicestate.not_ready_nodes()

    def _keeping(self, qs, not_ready):
        qs._not_ready = not_ready  # on the new clone only: a view's class-level queryset stays unread
        return qs

    def with_state(self):
        """Annotate `state` (the API's v1 value) and `fleet_state` (the full vocabulary), both from
        the stored columns and the one implementation in inventory/devicestate.py."""
        from . import devicestate

        not_ready = self._read_not_ready()
        return self._keeping(
            self.annotate(
                fleet_state=devicestate.state_expression(not_ready), state=devicestate.api_state_expression(not_ready)
            ),
            not_ready,
        )

    def in_state(self, state):
        """Filter on an API v1 state (free, allocated, shared, admin, tainted)."""
        from . import devicestate

        if state not in devicestate.API_STATES:
            raise ValueError(f"unknown device state {state!r}")
        not_ready = self._read_not_ready()
        return self._keeping(self.filter(devicestate.api_state_q(state, not_ready)), not_ready)

    def in_fleet_state(self, state):
        """Filter on one of devicestate.STATES (the UI's vocabulary)."""
        from . import devicestate

        not_ready = self._read_not_ready()
        return self._keeping(self.filter(devicestate.state_q(state, not_ready)), not_ready)

    def with_flag(self, flag):
        """Devices carrying a secondary flag (tainted, unhealthy, admin), whatever their state."""
        from . import devicestate

        not_ready = self._read_not_ready()
        return self._keeping(self.filter(devicestate.flag_q(flag, not_ready)), not_ready)

    def knowing_not_ready(self, not_ready):
        """This queryset with the NotReady nodes a caller already read (devicestate.not_ready_nodes,
        perhaps for one cluster): its state filters and annotations use them instead of reading again."""
        return self._keeping(self._chain(), not_ready)

    def with_attribute_containing(self, name, text, n=0):
        """Devices whose attribute `name`, as text, contains `text` (case-insensitive)."""
        qs, q = _json_key_q("attribute_values", name, "icontains", text, f"_attrc{n}", self)
        return qs.filter(q)

    def with_attribute(self, name, values, n=0):
        """Devices whose attribute `name` equals one of `values` (already typed candidates)."""
        qs, q = self, Q()
        for j, value in enumerate(values):
            qs, term = _json_key_q("attribute_values", name, "exact", value, f"_attr{n}_{j}", qs)
            q |= term
        return qs.filter(q)

    def with_capacity(self, name, op, number, n=0):
        """Devices with capacity `name` compared to `number` (base units); `!=` needs the capacity present."""
        if op == "!=":
            qs, has = _json_key_q("capacity_values", name, "isnull", False, f"_cap{n}h", self)
            qs, eq = _json_key_q("capacity_values", name, "exact", number, f"_cap{n}e", qs)
            return qs.filter(has).exclude(eq)
        qs, q = _json_key_q("capacity_values", name, CAPACITY_LOOKUPS[op], number, f"_cap{n}", self)
        return qs.filter(q)

    def attribute_known(self, name):
        q = Q()
        for driver, key in _key_candidates(name):
            q |= Q(attribute_values__has_key=key, **({"driver": driver} if driver else {}))
        return self.filter(q).exists()

    def capacity_known(self, name):
        q = Q()
        for driver, key in _key_candidates(name):
            q |= Q(capacity_values__has_key=key, **({"driver": driver} if driver else {}))
        return self.filter(q).exists()


__all__ = ("DeviceQuerySet", "DEVICE_STATES", "CAPACITY_LOOKUPS", "normalize_name")
