"""The allocation ledger: who held which device (or share of one), from when to when.

Written by the sync (usage/ledger.py, through mirror/sync/hooks.py) from the watch stream of
ResourceClaims, so an interval starts and ends at the moment the sync observed the watch event that
made or removed the allocation. Where the watcher could not observe (it was down, or its watch was cut
by a 410), the ledger says so with a LedgerGap and marks the bounds it could not see as inexact: time is
never invented. The reports (usage/reports) read these rows; units come from dra/units.py.
"""

from django.db import models
from django.db.models import Q


class AllocationInterval(models.Model):
    """One (claim, device or share) allocation over one interval with one set of consumers.

    A change of consumers (a pod moves) closes the row and opens another, so each row names the pod
    that used the device over its whole span.
    """

    class Rule(models.TextChoices):
        WHOLE = "whole", "Whole device"
        PARTITION = "partition", "Partition of shared counters"
        CAPACITY = "capacity", "Share of consumable capacity"
        ADMIN = "admin", "Admin access"

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    # The claim, by uid: the row outlives the claim (deleted claims keep their history).
    claim_uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253)
    claim_name = models.CharField(max_length=253)
    request = models.CharField(max_length=253)  # "req" or "req/subrequest", as in the allocation result
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=63)
    # gpu | partition | other (dra/partitions.py default_kind): reports of GPU-hours skip "other" (NICs).
    device_kind = models.CharField(max_length=16, blank=True, default="")
    share_id = models.CharField(max_length=64, blank=True, default="")  # "" when the device is not shared
    node = models.CharField(max_length=253, blank=True, default="")
    model = models.CharField(max_length=253, blank=True, default="")  # product/model name, "" unknown
    # Whole-GPU equivalents and the rule that gave them (dra/units.py).
    units = models.FloatField(default=1.0)
    unit_rule = models.CharField(max_length=16, choices=Rule.choices, default=Rule.WHOLE)
    unit_note = models.TextField(blank=True, default="")
    consumed_capacity = models.JSONField(default=dict, blank=True)
    admin_access = models.BooleanField(default=False)
    # The consumer: the first pod (by namespace/name) of status.reservedFor, its owner workload, its
    # chosen labels (setting USAGE_LABELS); `consumers` lists every pod when several share the claim.
    pod_namespace = models.CharField(max_length=253, blank=True, default="")
    pod_name = models.CharField(max_length=253, blank=True, default="")
    workload_kind = models.CharField(max_length=63, blank=True, default="")
    workload_name = models.CharField(max_length=253, blank=True, default="")
    labels = models.JSONField(default=dict, blank=True)
    consumers = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)  # null: still open
    # False when the bound is the edge of a gap (a relist found the allocation already there, or
    # already gone) rather than an observed event.
    start_exact = models.BooleanField(default=True)
    end_exact = models.BooleanField(default=True)

    class Meta:
        constraints = [
            # One open interval per allocation: replays and duplicate events cannot open a second one.
            models.UniqueConstraint(
                fields=("cluster", "claim_uid", "request", "driver", "pool", "device", "share_id"),
                condition=Q(ended_at__isnull=True),
                name="usage_interval_one_open",
            ),
        ]
        indexes = [
            # Period queries: started before the period's end, ended after its start (or open).
            models.Index(fields=("started_at",), name="usage_interval_start_idx"),
            models.Index(fields=("ended_at",), name="usage_interval_end_idx"),
            models.Index(fields=("namespace", "started_at"), name="usage_interval_ns_idx"),
        ]

    def __str__(self):
        share = f"#{self.share_id}" if self.share_id else ""
        return f"{self.namespace}/{self.claim_name} {self.driver}/{self.pool}/{self.device}{share}"


class LedgerEvent(models.Model):
    """A claim event the sync observed, queued to be folded into intervals (usage/ledger.py fold()).

    The sync appends one narrow row per claim event inside the batch's transaction, so the event is
    as durable as the mirror's write; a worker folds the queue into AllocationInterval rows in order
    and deletes what it folded in the same transaction. Only the primary key is indexed (and no
    foreign-key check): the ingest pays for one small insert per event, not for the wide interval
    rows and their indexes.
    """

    id = models.BigAutoField(primary_key=True)
    # No constraint and no index: checked on every insert otherwise. Deleting a cluster still removes
    # its queued events (Django's cascade).
    cluster = models.ForeignKey(
        "mirror.Cluster", on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    claim_uid = models.CharField(max_length=64)
    replaced_uid = models.CharField(max_length=64, blank=True, default="")  # a re-created name's earlier uid
    observed_at = models.DateTimeField()
    exact = models.BooleanField()
    # The claim as the ledger reads it (ledger.ledger_view), JSON text; "": the claim was deleted.
    # Text, not jsonb: the queue is only read back by the fold, and PostgreSQL need not parse it.
    claim = models.TextField(blank=True, default="")

    def __str__(self):
        return f"{self.cluster_id}: {self.claim_uid} at {self.observed_at}"


class LedgerGap(models.Model):
    """A span in which the sync could not observe a cluster's claims: from the last moment the watcher
    was known to be alive to the relist that resumed it. Intervals that started or ended inside it have
    inexact bounds at its edges."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    reason = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ("cluster_id", "started_at")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "started_at"), name="usage_gap_unique_start"),
        ]
        indexes = [models.Index(fields=("started_at",), name="usage_gap_start_idx")]

    def __str__(self):
        return f"{self.cluster_id}: {self.started_at:%Y-%m-%d %H:%M:%S} - {self.ended_at:%Y-%m-%d %H:%M:%S}"


class LedgerMark(models.Model):
    """Up to when the ledger of a cluster is known complete: the last moment the claims watch stream was
    observed connected (a batch applied, a quiet stream renewed, a clean stop). A later relist or
    resumed watch records the time since then as a LedgerGap."""

    cluster = models.OneToOneField("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    alive_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.cluster_id}: {self.alive_at}"


# The reports' rollup tables (usage/rollup.py).
from .models_reports import (  # noqa: E402, F401
    RollupState,
    UsageDay,
    UsageTotal,
    UsageUtilDay,
    UsageWorkloadDay,
    UsageWorkloadUtilDay,
)
