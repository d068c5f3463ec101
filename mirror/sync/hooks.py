"""What the apps above the mirror do when the sync writes.

The sync stores the rows of every mirrored kind (kinds.py names their models by label). The state
derived from those rows belongs to the apps: inventory's device state, vanished devices, class counts and
device-plugin/HAMi node rows, the stuck-claim detector of claims, the device health of health. Each app registers its part here from
its AppConfig.ready(); the sync calls them at the same points of a batch, so the mirror imports no app
above it. A part nobody registered does nothing.
"""

from dataclasses import dataclass, field


def _nothing(*args, **kwargs):
    return None


def _no_vanished_snapshot(slice_ids):
    return [], []


def _no_nodes(cluster_id, ops):
    return set()


@dataclass
class SyncHooks:
    # Per kind whose child rows decide the stored device state: the pools of the given row ids; and the
    # refresh of the stored state of pools (inventory/devicestate.py).
    pools_of: dict = field(default_factory=dict)
    refresh_pools: object = _nothing
    # What slices held before a write drops their device rows, and recording what is gone for good
    # (inventory/vanished.py).
    vanished_snapshot: object = _no_vanished_snapshot
    vanished_record: object = _nothing
    # The class-selector counts, asked for after a change of these kinds (inventory/tasks.py).
    class_count_kinds: frozenset = frozenset()
    request_class_counts: object = _nothing
    # Device-plugin and HAMi rows of the nodes (inventory/accelerators.py).
    nodes_of_pods: object = _no_nodes
    refresh_nodes: object = _nothing
    refresh_cluster: object = _nothing
    # The stuck-claim detector, asked to look at what a batch committed (claims/tasks.py).
    request_detection: object = _nothing
    # The allocation ledger (usage/ledger.py). Kinds whose watch stream it follows (the watcher then
    # times each event and reports the stream's liveness); the claim events a batch applied, in order,
    # as (uid, replaced uid or None, raw or None when deleted, observed at, exact?), inside the batch's
    # transaction, leaving out those that found and left a claim pending (no allocation either side);
    # the stream observed complete up to a moment; a relist's end and a new tenure's resumed watch,
    # with the last moment an earlier watcher was known to observe (or None).
    ledger_kinds: frozenset = frozenset()
    ledger_claims: object = _nothing
    ledger_alive: object = _nothing
    ledger_relist: object = _nothing
    ledger_resume: object = _nothing
    # Device health (health/timeline.py): recomputed after a batch or relist of these kinds changed
    # rows, refresh_health(cluster, kind) writing the health timeline.
    health_kinds: frozenset = frozenset()
    refresh_health: object = _nothing


hooks = SyncHooks()


def register(**parts):
    """Set hook parts by name: register(refresh_pools=..., pools_of={...})."""
    for name, value in parts.items():
        if not hasattr(hooks, name):
            raise TypeError(f"no sync hook named {name!r}")
        setattr(hooks, name, value)
