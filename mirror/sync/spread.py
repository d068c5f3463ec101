"""Which live worker owns which (cluster, kind): rendezvous hashing with bounded loads.

Pure functions (no Django): every worker computes the same answer from the same inputs (the live
workers read from their heartbeats, the keys from the Cluster and SyncState rows), so no
coordinator is needed and nothing but the leases decides who may write.

Plain rendezvous (highest-random-weight) hashing moves only the keys of a worker that joins or
leaves, but its shares are random: with 72 keys over 3 workers one worker gets 30 and another 19
about as often as not. So each worker also gets a capacity (the key count divided evenly, the
remainder to the workers ranked first) and a key goes to the highest-ranked worker that still has
room; a per-kind cap keeps each kind (heavy ResourceClaims, light DeviceClasses) spread too.
Written here because no maintained library does bounded-load rendezvous over named workers.
"""

import hashlib
import math


def weight(worker, key):
    """The rendezvous weight of `worker` for `key` (a tuple): a stable 64-bit hash."""
    text = "\0".join((worker, *map(str, key))).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def assign(keys, workers, eligible=None):
    """{key: worker} for every key some worker may take.

    keys: (cluster, kind) tuples; workers: worker names; eligible(worker, key) -> bool limits a
    worker to its clusters (`manage.py watch --cluster`). Every worker's total is the even share
    (floor or ceil) when all workers are eligible for all keys.
    """
    workers = sorted(set(workers))
    keys = sorted(set(keys))
    if not workers or not keys:
        return {}
    base, extra = divmod(len(keys), len(workers))
    # Which workers get the one extra key: ranked by a hash of the key count, so it rotates.
    ranked = sorted(workers, key=lambda w: weight(w, ("capacity", len(keys))), reverse=True)
    capacity = {w: base + (1 if i < extra else 0) for i, w in enumerate(ranked)}
    kinds = {}
    for key in keys:
        kinds.setdefault(key[1], []).append(key)
    kind_cap = {kind: math.ceil(len(members) / len(workers)) for kind, members in kinds.items()}
    total = dict.fromkeys(workers, 0)
    per_kind = {}
    owners = {}
    for key in keys:
        candidates = [w for w in workers if eligible is None or eligible(w, key)]
        if not candidates:
            continue
        candidates.sort(key=lambda w: weight(w, key), reverse=True)
        kind = key[1]
        choice = next(
            (w for w in candidates if total[w] < capacity[w] and per_kind.get((w, kind), 0) < kind_cap[kind]), None
        )
        if choice is None:
            choice = next((w for w in candidates if total[w] < capacity[w]), candidates[0])
        owners[key] = choice
        total[choice] += 1
        per_kind[(choice, kind)] = per_kind.get((choice, kind), 0) + 1
    return owners
