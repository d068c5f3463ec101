"""Which claims hold which devices: the claims side knows it (its allocation results and stuck findings),
inventory's pages and API show it.

inventory and claims sit side by side and neither imports the other, so claims registers its readers
here from its AppConfig.ready() (claims/holdings.py) and inventory asks through this module. Unregistered
(claims not installed), no device has holders.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Holding:
    """One allocation result naming a device, with what inventory shows of its claim."""

    cluster_id: int
    driver: str
    pool: str
    device: str
    namespace: str
    name: str
    uid: str
    admin_access: bool
    shared: bool  # a capacity share (shareID set), not exclusive
    stuck: bool  # the claim has an active stuck-claim finding


def _no_holdings(keys):
    return []


def _no_allocations(cluster_id, driver, pool, device, user):
    return []


_readers = {"holdings": _no_holdings, "allocations": _no_allocations}


def register(holdings=None, allocations=None):
    """holdings(keys) -> [Holding] of the devices with these (cluster_id, driver, pool, device) keys;
    allocations(cluster_id, driver, pool, device, user) -> the allocation results naming one device, of
    claims `user` may see (for the API: claim.namespace, claim.name, request, admin_access, share_id,
    consumed_capacity)."""
    if holdings is not None:
        _readers["holdings"] = holdings
    if allocations is not None:
        _readers["allocations"] = allocations


def holdings(keys):
    return _readers["holdings"](keys)


def allocations(cluster_id, driver, pool, device, user):
    return _readers["allocations"](cluster_id, driver, pool, device, user)
