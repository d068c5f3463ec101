"""The allocation engine: previews where DRA claims would land, as the kube-scheduler (v1.36) decides.

Plain Python, no Django: feed it raw Kubernetes JSON (a database snapshot or a kubectl dump).

    inv = Inventory.from_objects(objects, features=Features())
    claims, bound = resolve_claims(inv, load_documents(yaml_text))
    result = preview(inv, claims, bound=bound)      # {"nodes": [...], "summary": {...}}
    room = headroom(inv, claims)                     # greedy copies per node pool / device model
    answer = verdict(inv, claims, result)            # never / blocked now per request; headline(answer)
    fixes = remedies(inv, claims, pod, result, answer)  # changes the engine verified make it fit
"""

from .documents import load_documents, resolve_claims, snapshot_inventory
from .errors import AllocationError, AllocatorError, InputError, SnapshotError
from .features import Features
from .fleet import allocate, headroom, prepare, preview
from .inventory import Inventory
from .model import ClaimSpec
from .remedies import remedies
from .verdict import headline, verdict

__all__ = [
    "AllocationError",
    "allocate",
    "AllocatorError",
    "ClaimSpec",
    "Features",
    "InputError",
    "Inventory",
    "SnapshotError",
    "headline",
    "headroom",
    "load_documents",
    "prepare",
    "preview",
    "remedies",
    "resolve_claims",
    "snapshot_inventory",
    "verdict",
]
