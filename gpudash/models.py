"""The abstract base shared by every mirrored Kubernetes object."""

from functools import lru_cache

from django.db import models
from django.utils.dateparse import parse_datetime


@lru_cache(maxsize=65536)  # the same timestamps recur on every update of an object (sync hot path)
def parse_k8s_time(value):
    """RFC 3339 timestamp from the API server, or None."""
    return parse_datetime(value) if value else None


def resource_version_number(rv):
    # resourceVersions are opaque strings, but every conformant API server (etcd revision)
    # hands out increasing integers, and Kubernetes 1.35 documents them as comparable.
    try:
        return int(rv)
    except (TypeError, ValueError):
        return 0


class KubeObject(models.Model):
    """A Kubernetes object mirrored from one cluster; `raw` is exactly what the API server sent."""

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    uid = models.CharField(max_length=64, db_index=True)
    namespace = models.CharField(max_length=253, blank=True, default="", db_index=True)
    name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64)
    resource_version_num = models.BigIntegerField(default=0)
    creation_timestamp = models.DateTimeField(null=True, blank=True)
    deletion_timestamp = models.DateTimeField(null=True, blank=True, db_index=True)
    labels = models.JSONField(default=dict, blank=True)
    raw = models.JSONField(default=dict)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ("cluster_id", "namespace", "name")

    def __str__(self):
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def spec(self):
        return self.raw.get("spec") or {}

    @property
    def status(self):
        return self.raw.get("status") or {}

    @classmethod
    def base_fields_from_raw(cls, raw):
        meta = raw.get("metadata") or {}
        rv = meta.get("resourceVersion") or ""
        return {
            "uid": meta.get("uid") or "",
            "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "",
            "resource_version": rv,
            "resource_version_num": resource_version_number(rv),
            "creation_timestamp": parse_k8s_time(meta.get("creationTimestamp")),
            "deletion_timestamp": parse_k8s_time(meta.get("deletionTimestamp")),
            "labels": meta.get("labels") or {},
            "raw": raw,
        }

    @classmethod
    def fields_from_raw(cls, raw):
        """Column values for one object; subclasses add their own indexed columns."""
        return cls.base_fields_from_raw(raw)

    def sync_children(self):
        """Rebuild rows derived from `raw` (devices of a slice, results of a claim). Override."""


class AccessProfile(models.Model):
    """Per-user namespace scope; no profile or an empty list means every namespace."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="access_profile")
    namespaces = models.JSONField(default=list, blank=True, help_text="Namespaces this user may see; empty = all.")

    def __str__(self):
        return f"{self.user}: {', '.join(self.namespaces) or 'all namespaces'}"


class ChangeCursor(models.Model):
    """Per (cluster, kind): the number of committed transactions that changed mirrored rows.

    Bumped as the last statement of each such transaction (its row lock orders them), so every
    log entry numbered up to a committed `seq` is visible: readers in other processes (the live
    preview inventory) follow the changes from the position they saw, never missing one.
    """

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40)
    seq = models.BigIntegerField(default=0)
    pruned_through = models.BigIntegerField(default=0, help_text="Log entries up to this seq were deleted.")
    epoch = models.CharField(max_length=32, help_text="Random; a re-created row never passes for the old one.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "kind"], name="changecursor_cluster_kind")]


class MirrorChange(models.Model):
    """The keys of the mirrored objects one transaction wrote or deleted (gpudash/sync/changelog.py)."""

    cluster = models.ForeignKey("inventory.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40)
    seq = models.BigIntegerField()
    keys = models.JSONField(default=list, help_text="[[namespace, name], ...]")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "kind", "seq"], name="mirrorchange_cursor")]
