"""The reports' daily rollup of the ledger (usage/rollup.py keeps it), so a month's report reads a few
hundred thousand pre-summed rows instead of millions of intervals.

Days are local dates in the zone recorded on RollupState (USAGE_TIME_ZONE when it was built): a
report in another zone reads the ledger itself. Only PostgreSQL keeps a rollup; on SQLite the
reports always read the ledger.
"""

from django.db import models


class ReportDayKeys(models.Model):
    """One local day and one combination of the report keys: UsageDay's GPU-seconds and UsageUtilDay's
    utilization are kept by the same keys, so that a report reads both alike."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    namespace = models.CharField(max_length=253)
    team = models.CharField(max_length=253, blank=True, default="")  # the pod label USAGE_TEAM_LABEL
    model = models.CharField(max_length=253, blank=True, default="")
    node_pool = models.CharField(max_length=253, blank=True, default="")  # the node's pool when rolled up
    unit_rule = models.CharField(max_length=16)

    class Meta:
        abstract = True


class WorkloadDayKeys(models.Model):
    """One local day and workload (namespace, kind, name) per team, model and unit rule: the keys of
    UsageWorkloadDay and UsageWorkloadUtilDay. No node pool, so that the tables have as few rows as
    workloads allow: a workload's pods share their team label (the team adds next to no rows) but
    spread over node pools (which would multiply them). A workload report by or filtered on node pool
    reads the ledger."""

    # The report keys (reports.GROUPS columns and FILTERS) these tables can answer.
    KEYS = ("cluster", "namespace", "workload_kind", "workload_name", "team", "model", "unit_rule")

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    namespace = models.CharField(max_length=253)
    workload_kind = models.CharField(max_length=63, blank=True, default="")
    workload_name = models.CharField(max_length=253, blank=True, default="")
    team = models.CharField(max_length=253, blank=True, default="")  # the pod label USAGE_TEAM_LABEL
    model = models.CharField(max_length=253, blank=True, default="")
    unit_rule = models.CharField(max_length=16)

    class Meta:
        abstract = True


class UsageDay(ReportDayKeys):
    """GPU-seconds (whole-GPU equivalents x seconds) of one day and one combination of the report keys.

    Workloads are not a key: a fleet runs thousands a day, and keyed by them as well as by team and node
    pool this table would have more rows than the ledger; reports by workload read UsageWorkloadDay."""

    admin_access = models.BooleanField(default=False)
    gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        indexes = [
            # A period by namespace reads this index alone (an index-only scan of the period's days).
            models.Index(
                fields=("day", "namespace"),
                include=("cluster", "unit_rule", "model", "admin_access", "gpu_seconds"),
                name="usage_day_ns_idx",
            ),
        ]

    def __str__(self):
        return f"{self.day} {self.namespace} {self.unit_rule}: {self.gpu_seconds / 3600:.2f} GPU-h"


class UsageWorkloadDay(WorkloadDayKeys):
    """GPU-seconds of one day and workload per team, model, unit rule and admin access: what reports
    grouped or filtered by workload read (with the team, not the node pool: WorkloadDayKeys)."""

    admin_access = models.BooleanField(default=False)
    gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        indexes = [
            # A period by workload (or one workload's) reads this index alone, like usage_day_ns_idx.
            models.Index(
                fields=("day", "namespace", "workload_name"),
                include=("cluster", "workload_kind", "team", "model", "unit_rule", "admin_access", "gpu_seconds"),
                name="usage_wlday_team_idx",
            ),
        ]

    def __str__(self):
        return f"{self.day} {self.namespace}/{self.workload_name}: {self.gpu_seconds / 3600:.2f} GPU-h"


class UsageUtilDay(ReportDayKeys):
    """Utilization of the allocations of one day and key: GPU-seconds with a DCGM sample (`known`) and
    of those the ones under the idle threshold. Added to as samples arrive (samples are pruned after
    GPUDASH_UTILIZATION_HISTORY_HOURS; these sums stay)."""

    known_seconds = models.FloatField(default=0.0)
    idle_seconds = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("day", "cluster", "namespace", "team", "model", "node_pool", "unit_rule"),
                name="usage_utilday_unique",
            )
        ]

    def __str__(self):
        return (
            f"{self.day} {self.namespace}: idle {self.idle_seconds / 3600:.2f} of {self.known_seconds / 3600:.2f} GPU-h"
        )


class UsageWorkloadUtilDay(WorkloadDayKeys):
    """UsageUtilDay by workload (admin access is never counted): the used and idle GPU-seconds of
    reports grouped or filtered by workload. Summed from the samples stored since it exists (samples
    are pruned after a day): earlier days have no figures, and their known seconds say so."""

    known_seconds = models.FloatField(default=0.0)
    idle_seconds = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("day", "cluster", "namespace", "workload_kind", "workload_name", "team", "model", "unit_rule"),
                name="usage_wlutilday_unique",
            )
        ]

    def __str__(self):
        return (
            f"{self.day} {self.namespace}/{self.workload_name}: idle {self.idle_seconds / 3600:.2f} "
            f"of {self.known_seconds / 3600:.2f} GPU-h"
        )


class UsageTotal(models.Model):
    """GPU-seconds of every rolled-up day, per (cluster, namespace, model, unit rule): what /metrics
    reports as gpudash_gpu_seconds_total, plus the ledger after the rollup's last day."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=253)
    model = models.CharField(max_length=253, blank=True, default="")
    unit_rule = models.CharField(max_length=16)
    gpu_seconds = models.FloatField(default=0.0)

    def __str__(self):
        return f"{self.namespace} {self.model} {self.unit_rule}: {self.gpu_seconds:.0f} s"


class RollupState(models.Model):
    """The one row saying how far the rollup goes: days before `complete_before` are in UsageDay and
    UsageWorkloadDay (in `zone`), ledger gaps up to `gap_seen` are accounted for, samples before
    `util_through` are counted."""

    zone = models.CharField(max_length=64)
    complete_before = models.DateField(null=True)
    gap_seen = models.BigIntegerField(default=0)
    util_through = models.DateTimeField(null=True)
    updated_at = models.DateTimeField(null=True)

    def __str__(self):
        return f"rollup ({self.zone}) complete before {self.complete_before}"
