"""Monitoring: where a cluster's Prometheus is, GPU utilization samples from it, fleet history (the operation
counters /metrics reports across processes are mirror.models.OpsCounter)."""

from django.db import models


class PrometheusSource(models.Model):
    """The Prometheus that scrapes a cluster's dcgm-exporter; gpudash polls it for utilization."""

    cluster = models.OneToOneField("mirror.Cluster", on_delete=models.CASCADE, related_name="prometheus")
    url = models.URLField(
        max_length=500, help_text="Base URL, e.g. http://prometheus.monitoring:9090 (the API is under /api/v1/)."
    )
    auth_header = models.CharField(
        max_length=2000, blank=True, help_text="Sent as the Authorization header, e.g. 'Bearer TOKEN'. Optional."
    )
    series_selector = models.CharField(
        max_length=500,
        blank=True,
        help_text='Label matchers added to every query, for a Prometheus that scrapes several clusters, e.g. cluster="prod".',
    )
    enabled = models.BooleanField(default=True)
    last_poll_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    # The minute the last successful poll stored: its samples are the devices' current values.
    last_minute = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    devices_matched = models.IntegerField(default=0)
    series_unmatched = models.IntegerField(default=0)

    def __str__(self):
        return f"{self.cluster}: {self.url}"


class UtilizationSample(models.Model):
    """One device's utilization in one minute (the latest poll of that minute wins), kept for
    GPUDASH_UTILIZATION_HISTORY_HOURS; the longer view is the fleet history (NamespaceSample.idle).

    Keyed by the device's identity (driver, pool, name) rather than a foreign key: device rows are
    replaced whenever their slice changes, the history must outlive that. The holder at sample time
    is kept so idle GPU-hours can be counted per namespace afterwards.
    """

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=63)
    minute = models.DateTimeField()
    gpu_util = models.FloatField(null=True)  # percent, DCGM_FI_DEV_GPU_UTIL
    fb_used_bytes = models.FloatField(null=True)  # DCGM_FI_DEV_FB_USED (MiB) in bytes
    power_watts = models.FloatField(null=True)  # DCGM_FI_DEV_POWER_USAGE
    gr_engine_active = models.FloatField(null=True)  # ratio 0-1, DCGM_FI_PROF_GR_ENGINE_ACTIVE (profiling, optional)
    allocated = models.BooleanField(default=False)
    held_by_namespace = models.CharField(max_length=253, blank=True)
    held_by_name = models.CharField(max_length=253, blank=True)

    class Meta:
        # One index only: a poll appends a minute's 40,000 rows in one COPY (utilization.store), and a
        # unique index over the device key would cost a random index page per row. One row per device
        # and minute holds because store() replaces the minute under a per-cluster lock.
        indexes = [
            models.Index(fields=("cluster", "minute"), name="monitoring_sample_minute_idx"),
        ]

    def __str__(self):
        return f"{self.driver}/{self.pool}/{self.device} @ {self.minute:%H:%M}: {self.gpu_util}%"


class FleetSample(models.Model):
    """Fleet history: one minute's device count of one (cluster, model, device kind) by state.

    Written by the history sampler (monitoring/history.py) once a minute from the per-node summary,
    kept for GPUDASH_HISTORY_DAYS. One row per model and kind (a handful per cluster) with a column
    per state, rather than a row per state: the 14-day chart reads a tenth of the rows.
    """

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField()
    model = models.TextField(blank=True)  # inventory.summary.MODEL
    kind = models.CharField(max_length=16)  # gpu, partition or other (inventory.summary.KINDS)
    # One column per device state (inventory.devicestate.STATES).
    free = models.IntegerField(default=0)
    allocated = models.IntegerField(default=0)
    admin = models.IntegerField(default=0)
    partial = models.IntegerField(default=0)
    tainted = models.IntegerField(default=0)
    unhealthy = models.IntegerField(default=0)
    stuck = models.IntegerField(default=0)
    # Physical GPUs (inventory/devicekinds.py: a whole GPU and its partitions are one) and the free
    # ones (none of their devices held or tainted, node Ready), as the per-node summary counts them.
    gpus = models.IntegerField(default=0)
    gpus_free = models.IntegerField(default=0)
    # Partition-aware capacity (dra/partitions.py via the summary): whole GPUs stranded by partitions
    # in use (GPU rows), and on partition rows how many partitions of the model's smallest profile
    # (the one with the most placements, e.g. 1g.10gb) can still be created, of how many with nothing
    # in use: a count that adds up across nodes, unlike the published placements.
    gpus_stranded = models.IntegerField(default=0)
    partition_slots_free = models.IntegerField(default=0)
    partition_slots = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("minute", "cluster", "model", "kind"), name="monitoring_fleetsample_unique")
        ]

    def __str__(self):
        return f"{self.minute:%Y-%m-%d %H:%M} {self.model} ({self.kind})"


class NamespaceSample(models.Model):
    """Fleet history per namespace: one minute's devices held (by kind) and claims (by state)."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField()
    namespace = models.CharField(max_length=253)
    # Devices whose holding claim is of this namespace (admin-access watchers not counted), by kind.
    gpu = models.IntegerField(default=0)
    partition = models.IntegerField(default=0)
    other = models.IntegerField(default=0)
    # Claims of this namespace by state (claims.models.ResourceClaim.State).
    pending = models.IntegerField(default=0)
    claims_allocated = models.IntegerField(default=0)
    reserved = models.IntegerField(default=0)
    deleting = models.IntegerField(default=0)
    # Held devices under the idle threshold in that minute's utilization poll (written by the poll,
    # not the sampler): idle GPU-hours per namespace are sums of this.
    idle = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("minute", "cluster", "namespace"), name="monitoring_nssample_unique")
        ]
        indexes = [models.Index(fields=("namespace", "minute"), name="monitoring_nssample_ns_idx")]

    def __str__(self):
        return f"{self.minute:%Y-%m-%d %H:%M} {self.namespace}"
