"""Device queries the API and the UI share: state from allocation results, attribute and capacity filters.

Everything is expressed as annotations and EXISTS subqueries so a page of devices costs a fixed
number of queries whatever its size.
"""

from django.apps import apps
from django.db import models
from django.db.models import Case, Exists, OuterRef, Q, Value, When
from django.db.models.fields.json import KeyTransform

from .normalize import normalize_name

DEVICE_STATES = ("free", "allocated", "shared", "admin", "tainted")

CAPACITY_LOOKUPS = {"=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def _results_on_device():
    """AllocationResult rows naming the outer device (claims app, looked up late: it depends on us)."""
    result_model = apps.get_model("claims", "AllocationResult")
    return result_model.objects.filter(
        cluster_id=OuterRef("cluster_id"), driver=OuterRef("driver"), pool=OuterRef("pool"), device=OuterRef("name")
    )


def _exclusive():
    # What the scheduler treats as taken: results without shareID and without adminAccess.
    return Exists(_results_on_device().filter(admin_access=False, share_id=""))


def _shared():
    return Exists(_results_on_device().filter(admin_access=False).exclude(share_id=""))


def _held():
    # Allocated or shared: any result that is not admin access.
    return Exists(_results_on_device().filter(admin_access=False))


def _admin():
    return Exists(_results_on_device().filter(admin_access=True))


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
    def with_state(self):
        """Annotate `state`: allocated > shared > tainted > admin (admin-access only) > free."""
        return self.annotate(
            is_allocated=_exclusive(),
            is_shared=_shared(),
            has_admin_access=_admin(),
        ).annotate(
            state=Case(
                When(is_allocated=True, then=Value("allocated")),
                When(is_shared=True, then=Value("shared")),
                When(tainted=True, then=Value("tainted")),
                When(has_admin_access=True, then=Value("admin")),
                default=Value("free"),
                output_field=models.CharField(),
            )
        )

    def in_state(self, state):
        """Filter on the state with few plain EXISTS terms (cheaper for the planner than the CASE).

        "free" needs a single anti-join: a device without any result and without a blocking taint.
        """
        if state == "allocated":
            return self.filter(_exclusive())
        if state == "shared":
            return self.filter(~_exclusive(), _shared())
        if state == "tainted":
            return self.filter(~_held(), tainted=True)
        if state == "admin":
            return self.filter(~_held(), _admin(), tainted=False)
        if state == "free":
            return self.filter(~Exists(_results_on_device()), tainted=False)
        raise ValueError(f"unknown device state {state!r}")

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
