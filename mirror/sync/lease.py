"""One active watcher per (cluster, kind): a lease kept in the SyncState row.

Taken and renewed with compare-and-set UPDATEs (portable: PostgreSQL and SQLite), and checked in the
same transaction as every write the watcher makes, so a watcher that lost its lease can never apply
anything: its fenced UPDATE matches no row and the whole transaction rolls back.
"""

import os
import socket
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from mirror.models import SyncState

from . import changelog


class LeaseLost(Exception):
    """Another worker holds the lease now; stop applying."""


def new_holder_id(label=""):
    suffix = f":{label}" if label else ""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}{suffix}"[:255]


def lease_seconds():
    return float(settings.GPUDASH_SYNC.get("LEASE_SECONDS", 10))


class Lease:
    def __init__(self, state_id, holder, seconds=None):
        self.state_id = state_id
        self.holder = holder
        self.seconds = seconds if seconds is not None else lease_seconds()
        self.held = False
        self.token = 0  # the fence token of our current tenure (changelog.next_lease_token)

    @property
    def renew_interval(self):
        return max(self.seconds / 3.0, 0.2)

    def _expiry(self):
        return timezone.now() + timedelta(seconds=self.seconds)

    def acquire(self):
        """Take the lease if it is free, expired or already ours. Returns whether we hold it."""
        now = timezone.now()
        free = (
            Q(lease_holder="") | Q(lease_holder=self.holder) | Q(lease_expires__isnull=True) | Q(lease_expires__lt=now)
        )
        with transaction.atomic():
            # What the previous tenure left: its last renewal while its stream was connected is the last
            # moment it is known to have observed (previous_alive; the allocation ledger's gaps).
            before = (
                SyncState.objects.filter(pk=self.state_id).values("lease_holder", "lease_expires", "status").first()
            )
            taken = SyncState.objects.filter(free, pk=self.state_id).update(
                lease_holder=self.holder, lease_expires=self._expiry()
            )
            if taken:
                # A new tenure gets a new token, in the same transaction: tokens of one (cluster, kind) only grow.
                cluster_id, kind = SyncState.objects.values_list("cluster_id", "kind").get(pk=self.state_id)
                self.token = changelog.next_lease_token(cluster_id, kind)
        self.held = bool(taken)
        if self.held:
            self._previous = before
        return self.held

    def previous_alive(self):
        """When the tenure before ours last renewed while connected, or None (released, erring, none)."""
        before = getattr(self, "_previous", None)
        if not before or not before["lease_holder"] or before["lease_expires"] is None:
            return None
        if before["status"] != SyncState.Status.CONNECTED:
            return None
        return before["lease_expires"] - timedelta(seconds=self.seconds)

    def fence(self, **values):
        """Renew the lease and write `values` to the SyncState row, only if we still hold it.

        Call it first inside the transaction that applies changes: on PostgreSQL the row lock it
        takes makes a competing acquire wait for our commit and then see the renewed expiry.
        """
        values.setdefault("lease_expires", self._expiry())
        updated = SyncState.objects.filter(pk=self.state_id, lease_holder=self.holder).update(**values)
        if not updated:
            self.held = False
            raise LeaseLost(f"lease of sync state {self.state_id} is no longer held by {self.holder}")
        changelog.writing_as(self.holder, self.token)  # the log entries of this transaction name our tenure
        return updated

    def renew(self):
        try:
            self.fence()
            return True
        except LeaseLost:
            return False

    def release(self):
        SyncState.objects.filter(pk=self.state_id, lease_holder=self.holder).update(lease_holder="", lease_expires=None)
        self.held = False


def renew_parked(leases):
    """Renew the leases of parked watchers (quiet, no connection of their own) in one statement.

    PostgreSQL only. Rows locked by a transaction in flight are skipped (SKIP LOCKED): never wait
    behind a batch. A lease found held by someone else is marked lost, so its watcher stops.
    Returns the leases renewed.
    """
    leases = [lease for lease in leases if lease.held]
    if not leases:
        return []
    from django.db import connection

    table = connection.ops.quote_name(SyncState._meta.db_table)
    pairs = ", ".join(["(%s, %s)"] * len(leases))
    params = [timezone.now() + timedelta(seconds=leases[0].seconds)]
    for lease in leases:
        params += [lease.state_id, lease.holder]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET lease_expires = %s WHERE id IN (SELECT id FROM {table} "
            f"WHERE (id, lease_holder) IN ({pairs}) FOR UPDATE SKIP LOCKED) RETURNING id",
            params,
        )
        renewed = {row[0] for row in cursor.fetchall()}
    missing = {lease.state_id: lease for lease in leases if lease.state_id not in renewed}
    if missing:
        holders = dict(SyncState.objects.filter(pk__in=missing).values_list("pk", "lease_holder"))
        for state_id, lease in missing.items():
            if holders.get(state_id) != lease.holder:
                lease.held = False
    return [lease for lease in leases if lease.state_id in renewed]


def increment(field, by):
    """An F() expression adding `by` to a counter column (for fence())."""
    return F(field) + by
