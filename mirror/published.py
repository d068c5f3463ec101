"""What the fleet publishes, for the claims side: which devices the ResourceSlices list now and which
nodes exist, with their readiness.

inventory stores them (Device and Node rows) and claims reads them (the claim and pod pages link the
allocated devices that are still published; the stuck-claim detector looks for vanished devices and
gone or NotReady nodes). The two apps sit side by side and neither imports the other, so inventory
registers its readers here from its AppConfig.ready() (inventory/published.py). The apps are always
installed together; unregistered, nothing is published.
"""


def _no_devices(cluster_id, pools=None):
    return {}


def _no_nodes(cluster_id):
    return {}


_readers = {"devices": _no_devices, "nodes": _no_nodes}


def register(devices=None, nodes=None):
    """devices(cluster_id, pools=None) -> {(driver, pool, name): [allow_multiple_allocations of each
    published copy]} (only these pools when given); nodes(cluster_id) -> {name: node row}, a row
    with at least `ready` (True, False or None: unknown) and `ready_changed_at`."""
    if devices is not None:
        _readers["devices"] = devices
    if nodes is not None:
        _readers["nodes"] = nodes


def devices(cluster_id, pools=None):
    return _readers["devices"](cluster_id, pools)


def nodes(cluster_id):
    return _readers["nodes"](cluster_id)
