"""Device health: the state each device is in now (only devices not healthy have a row) and the
timeline of its changes, kept for the history period (GPUDASH_HISTORY_DAYS)."""

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

HEALTHY, DEGRADED, UNKNOWN, UNHEALTHY = "healthy", "degraded", "unknown", "unhealthy"
# Worst first: the precedence of health.notion (the first that applies wins).
STATES = (UNHEALTHY, DEGRADED, UNKNOWN, HEALTHY)
STATE_LABELS = {  # in context: "unhealthy" is also the fleet's word for a device on a NotReady node
    HEALTHY: pgettext_lazy("device health", "healthy"),
    DEGRADED: pgettext_lazy("device health", "degraded"),
    UNKNOWN: pgettext_lazy("device health", "health unknown"),
    UNHEALTHY: pgettext_lazy("device health", "unhealthy"),
}

# A fleet-map cell's title beside its state.
MARK_TITLES = {
    UNHEALTHY: _("health: unhealthy"),
    DEGRADED: _("health: degraded"),
    UNKNOWN: _("health: unknown"),
}

# Where a reason comes from.
POD_REPORT, SLICE_TAINT, TAINT_RULE = "pod-report", "slice-taint", "taint-rule"
SOURCE_LABELS = {
    POD_REPORT: _("pod health report"),
    SLICE_TAINT: _("ResourceSlice taint"),
    TAINT_RULE: _("DeviceTaintRule"),
    "": _("no report of trouble"),
}


class DeviceHealthQuerySet(models.QuerySet):
    def of_device(self, cluster_id, driver, pool, name):
        return self.filter(cluster_id=cluster_id, driver=driver, pool=pool, device=name)


class DeviceHealth(models.Model):
    """A device whose health is not "healthy", as the last sync batch computed it (health.notion).

    A device without a row is healthy (nothing reports trouble). `reasons` lists every signal, worst
    first: {"state", "source", "text", ...}.
    """

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=63)
    node_name = models.CharField(max_length=253, blank=True)
    state = models.CharField(max_length=16)
    source = models.CharField(max_length=16, blank=True)
    reason = models.TextField(blank=True)
    reasons = models.JSONField(default=list, blank=True)
    since = models.DateTimeField()

    objects = DeviceHealthQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("cluster", "driver", "pool", "device"), name="health_devicehealth_key")
        ]
        indexes = [models.Index(fields=("cluster", "node_name"), name="health_devicehealth_node_idx")]


class HealthChangeQuerySet(models.QuerySet):
    def of_device(self, cluster_id, driver, pool, name):
        return self.filter(cluster_id=cluster_id, driver=driver, pool=pool, device=name)


class HealthChange(models.Model):
    """One change of a device's health: when, from what to what, why, and who sat on the device then."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=63)
    node_name = models.CharField(max_length=253, blank=True)
    at = models.DateTimeField(db_index=True)
    from_state = models.CharField(max_length=16)
    to_state = models.CharField(max_length=16)
    source = models.CharField(max_length=16, blank=True)  # of the new state's main reason; "" back to healthy
    reason = models.TextField(blank=True)  # English, as the API serves it
    reason_message = models.JSONField(default=dict, blank=True)  # the same as a message (mirror/messages.py)
    # "namespace/name" of the claims allocated the device and of their live pods, at that moment.
    claims = models.JSONField(default=list, blank=True)
    pods = models.JSONField(default=list, blank=True)

    objects = HealthChangeQuerySet.as_manager()

    class Meta:
        ordering = ("-at", "-id")
        indexes = [
            models.Index(fields=("cluster", "driver", "pool", "device", "at"), name="health_change_device_idx"),
        ]
