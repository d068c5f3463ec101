"""A per-(cluster, kind) log of which mirrored objects each committed transaction changed.

Why a log (and not the channel layer's change messages): readers in other processes (the web
process's live preview inventory) must never miss a change, across restarts, and deletes leave no
row behind to find. Each transaction that writes mirrored rows ends with `record`: it bumps the
(cluster, kind) cursor and stores the written keys under the new number. The cursor's row lock is
held until commit, so numbers commit in order: once a reader sees `seq = N` committed, every entry
up to N is visible. A reader keeps the numbers it has seen and asks for the entries past them.

Entries only name objects; readers re-read their current rows (absent = deleted), which makes
applying an entry twice harmless.
"""

import threading
import uuid

from django.db import connection

from mirror.models import ChangeCursor, MirrorChange

# Entries kept per (cluster, kind); a reader further behind than this rebuilds from the rows.
KEEP = 20000
_PRUNE_EVERY = 1000
# The lease tenure of the watcher in this thread (set by Lease.fence before its writes).
_writer = threading.local()


def writing_as(holder, token):
    _writer.holder, _writer.token = holder, token


def next_lease_token(cluster_id, kind):
    """The next fence token of (cluster, kind); call it in the transaction that takes the lease."""
    table = connection.ops.quote_name(ChangeCursor._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (cluster_id, kind, seq, pruned_through, epoch, lease_token) VALUES (%s, %s, 0, 0, %s, 1) "
            f"ON CONFLICT (cluster_id, kind) DO UPDATE SET lease_token = {table}.lease_token + 1 RETURNING lease_token",
            [cluster_id, kind, uuid.uuid4().hex],
        )
        return cursor.fetchone()[0]


def record(cluster_id, kind, keys):
    """Log that this transaction changed `keys` ([(namespace, name), ...]) of `kind`. Call it as the
    last write of the transaction: from here to the commit the cursor row stays locked."""
    keys = sorted({(ns or "", name) for ns, name in keys})
    if not keys:
        return None
    table = connection.ops.quote_name(ChangeCursor._meta.db_table)
    with connection.cursor() as cursor:
        # One statement on PostgreSQL and SQLite (>= 3.35): creates the cursor or bumps it, locked.
        cursor.execute(
            f"INSERT INTO {table} (cluster_id, kind, seq, pruned_through, epoch, lease_token) VALUES (%s, %s, 1, 0, %s, 0) "
            f"ON CONFLICT (cluster_id, kind) DO UPDATE SET seq = {table}.seq + 1 RETURNING seq",
            [cluster_id, kind, uuid.uuid4().hex],
        )
        seq = cursor.fetchone()[0]
    MirrorChange.objects.create(
        cluster_id=cluster_id,
        kind=kind,
        seq=seq,
        keys=[list(k) for k in keys],
        holder=getattr(_writer, "holder", ""),
        lease_token=getattr(_writer, "token", 0),
    )
    if seq % _PRUNE_EVERY == 0 and seq > KEEP:
        MirrorChange.objects.filter(cluster_id=cluster_id, kind=kind, seq__lte=seq - KEEP).delete()
        ChangeCursor.objects.filter(cluster_id=cluster_id, kind=kind).update(pruned_through=seq - KEEP)
    return seq


def cursors(cluster_id):
    """{kind: (seq, pruned_through, epoch)} as committed now."""
    return {
        kind: (seq, pruned, epoch)
        for kind, seq, pruned, epoch in ChangeCursor.objects.filter(cluster_id=cluster_id).values_list(
            "kind", "seq", "pruned_through", "epoch"
        )
    }


def changed_keys(cluster_id, since, until):
    """{kind: {(namespace, name), ...}} changed in the transactions numbered (since[kind], until[kind]]."""
    from django.db.models import Q

    ranges = [
        Q(kind=kind, seq__gt=since.get(kind, 0), seq__lte=seq)
        for kind, seq in until.items()
        if seq > since.get(kind, 0)
    ]
    out = {}
    if not ranges:
        return out
    query = ranges[0]
    for extra in ranges[1:]:
        query |= extra
    for kind, keys in MirrorChange.objects.filter(query, cluster_id=cluster_id).values_list("kind", "keys"):
        out.setdefault(kind, set()).update((ns, name) for ns, name in keys)
    return out
