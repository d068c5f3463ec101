"""What the scheduler treats as taken: the allocated state of every device, built from the claims'
allocations (apart from inventory.py so the incremental updates in incremental.py can build one too)."""

import itertools
from collections import defaultdict

from .model import _q

# Tokens naming one version of one pool's allocated state (AllocatedState.token): unique in the
# process, so caches on views shared by several Inventory copies never mix their states.
_STATE_TOKENS = itertools.count(1)


def new_state_token():
    return next(_STATE_TOKENS)


class AllocatedState:
    """What the scheduler treats as taken: every claim with `status.allocation` (brief 2.1)."""

    def __init__(self, shares=True):
        # shares=False (DRAConsumableCapacity off): the scheduler gathers only dedicated devices,
        # so a persisted share (a result with shareID) blocks its device like any allocation.
        self.shares = shares
        self.base_token = new_state_token()
        self.pool_tokens = {}  # (driver, pool) -> token, for pools changed since this state was built
        self.dedicated = set()  # device keys allocated without shareID and without adminAccess
        self.shared = set()  # device keys with at least one share
        self.share_ids = set()
        self.capacity = defaultdict(lambda: defaultdict(int))  # key -> capacity name -> consumed
        self.owners = defaultdict(list)  # key -> ["ns/claim", ...] (for explanations)

    def add_claim(self, raw):
        meta = raw.get("metadata") or {}
        ref = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        allocation = (raw.get("status") or {}).get("allocation") or {}
        for res in (allocation.get("devices") or {}).get("results") or []:
            key = (res.get("driver") or "", res.get("pool") or "", res.get("device") or "")
            if res.get("adminAccess"):
                continue  # admin access never blocks anything
            self.owners[key].append(ref)
            share = res.get("shareID")
            if share and self.shares:
                self.shared.add(key)
                self.share_ids.add(key + (share,))
                for name, value in (res.get("consumedCapacity") or {}).items():
                    self.capacity[key][name] += _q(value)
            else:
                self.dedicated.add(key)

    def is_allocated(self, key):
        return key in self.dedicated or key in self.shared

    def token(self, pool_key):
        """Names the allocated state of the devices of `pool_key` ((driver, pool)) as it is now: equal
        tokens, equal state (incremental.py takes a fresh one for each pool it restates)."""
        return self.pool_tokens.get(pool_key, self.base_token)

    def changed(self, pool_keys):
        for key in pool_keys:
            self.pool_tokens[key] = new_state_token()

    def changed_all(self):
        self.base_token = new_state_token()
        self.pool_tokens = {}
