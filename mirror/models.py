"""The mirror's own records: the clusters, where each watcher stands, the abstract base of every mirrored
Kubernetes object, the change log, Events, sync workers and access profiles."""

from functools import lru_cache

from django.db import IntegrityError, models, transaction
from django.db.models import F
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


def text_indexes(prefix, *fields):
    """Plain b-tree indexes on text columns, to use instead of `db_index=True` on a CharField: on
    PostgreSQL Django pairs each such index with a `varchar_pattern_ops` twin for LIKE 'x%' lookups,
    which no gpudash query makes and which cost about a quarter of every mirrored claim's UPDATE and
    part of every COPY of the sync. `prefix` keeps the names within Django's 30 characters."""
    return [models.Index(fields=(field,), name=f"{prefix}_{field}_idx") for field in fields]


class Cluster(models.Model):
    """One Kubernetes cluster the dashboard mirrors (or an imported, read-only snapshot)."""

    name = models.SlugField(max_length=63, unique=True)
    kubeconfig = models.CharField(max_length=1024, blank=True, help_text="Path to a kubeconfig file.")
    context = models.CharField(max_length=253, blank=True, help_text="Context in the kubeconfig; empty = current.")
    in_cluster = models.BooleanField(default=False, help_text="Use the pod's service account instead of a kubeconfig.")
    is_snapshot = models.BooleanField(default=False, help_text="Imported from a dump; never watched or written to.")
    read_only = models.BooleanField(default=False, help_text="Never write to this cluster (release actions disabled).")
    enabled = models.BooleanField(default=True)
    # Which optional DRA features the scheduler of this cluster runs with (allocator feature gates).
    features = models.JSONField(default=dict, blank=True)
    server_version = models.CharField(max_length=64, blank=True)
    served_resource_versions = models.JSONField(default=list, blank=True)
    discovered_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "inventory_cluster"  # moved from inventory; the table keeps its name
        ordering = ("name",)

    def __str__(self):
        return self.name

    @property
    def writable(self):
        return self.enabled and not self.read_only and not self.is_snapshot


class SyncState(models.Model):
    """Where the watcher of one (cluster, kind) stands, and who holds its lease."""

    class Status(models.TextChoices):
        IDLE = "idle", "Idle"
        LISTING = "listing", "Listing"
        CONNECTED = "connected", "Connected"
        ERROR = "error", "Error"
        NOT_SERVED = "not_served", "Not served"
        SNAPSHOT = "snapshot", "Snapshot"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="sync_states")
    kind = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    api_version = models.CharField(max_length=64, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_list_at = models.DateTimeField(null=True, blank=True)
    connected_since = models.DateTimeField(null=True, blank=True)
    object_count = models.IntegerField(default=0)
    events_applied = models.BigIntegerField(default=0)
    malformed_count = models.IntegerField(default=0)
    # The newest object the watcher could not store, and why: shown on the readiness page, so a
    # skipped object (bad field, a name longer than Kubernetes allows) is never dropped silently.
    last_malformed = models.TextField(blank=True)
    last_malformed_at = models.DateTimeField(null=True, blank=True)
    relist_count = models.IntegerField(default=0)
    gone_count = models.IntegerField(default=0)  # 410 Gone answers (resourceVersion compacted away)
    watch_restarts = models.BigIntegerField(default=0)  # watch connections opened
    lease_holder = models.CharField(max_length=255, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "inventory_syncstate"  # moved from inventory; the table keeps its name
        ordering = ("cluster__name", "kind")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "kind"), name="inventory_syncstate_unique_cluster_kind")
        ]

    def __str__(self):
        return f"{self.cluster} {self.kind}: {self.status}"


class KubeObject(models.Model):
    """A Kubernetes object mirrored from one cluster; `raw` is exactly what the API server sent."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    # uid and namespace are indexed by every subclass's Meta (text_indexes).
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=253, blank=True, default="")
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
    # Driver pods run in the driver's own namespace (nvidia-dra-driver-gpu, …), outside a team's scope: an
    # admin may let a scoped user read those pods and their logs without opening the rest of the namespace.
    driver_namespaces = models.JSONField(
        default=list,
        blank=True,
        help_text="A namespace-scoped user may also see the DRA driver pods in these namespaces, and their logs (docs/auth.md).",
    )

    class Meta:
        db_table = "gpudash_accessprofile"  # the table keeps its name from the gpudash app

    def __str__(self):
        return f"{self.user}: {', '.join(self.namespaces) or 'all namespaces'}"


class ChangeCursor(models.Model):
    """Per (cluster, kind): the number of committed transactions that changed mirrored rows.

    Bumped as the last statement of each such transaction (its row lock orders them), so every
    log entry numbered up to a committed `seq` is visible: readers in other processes (the live
    preview inventory) follow the changes from the position they saw, never missing one.
    """

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40)
    seq = models.BigIntegerField(default=0)
    pruned_through = models.BigIntegerField(default=0, help_text="Log entries up to this seq were deleted.")
    epoch = models.CharField(max_length=32, help_text="Random; a re-created row never passes for the old one.")
    # The fence token: bumped each time a watcher takes the (cluster, kind) lease, in the same
    # transaction, and stored on every log entry that tenure writes (MirrorChange.lease_token).
    lease_token = models.BigIntegerField(default=0)

    class Meta:
        db_table = "gpudash_changecursor"  # the table keeps its name from the gpudash app
        constraints = [models.UniqueConstraint(fields=["cluster", "kind"], name="changecursor_cluster_kind")]


class MirrorChange(models.Model):
    """The keys of the mirrored objects one transaction wrote or deleted (mirror/sync/changelog.py)."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40)
    seq = models.BigIntegerField()
    keys = models.JSONField(default=list, help_text="[[namespace, name], ...]")
    at = models.DateTimeField(auto_now_add=True)
    # Who wrote it, under which lease tenure (empty / 0: written outside a lease, e.g. a snapshot import).
    holder = models.CharField(max_length=255, blank=True, default="")
    lease_token = models.BigIntegerField(default=0)

    class Meta:
        db_table = "gpudash_mirrorchange"  # the table keeps its name from the gpudash app
        indexes = [models.Index(fields=["cluster", "kind", "seq"], name="mirrorchange_cursor")]


class KubeEventQuerySet(models.QuerySet):
    def about(self, cluster_id, kind, name, namespace="", uid=""):
        """Events whose involvedObject is this object (and this incarnation, when its uid is known), newest first."""
        qs = self.filter(
            cluster_id=cluster_id, involved_kind=kind, involved_name=name, involved_namespace=namespace or ""
        )
        if uid:
            qs = qs.filter(models.Q(involved_uid=uid) | models.Q(involved_uid=""))
        return qs.order_by("-last_seen", "-id")


class KubeEvent(KubeObject):
    """A core/v1 Event about an object gpudash mirrors (a DRA object, a mirrored pod, a node).

    Bounded: the sync keeps at most GPUDASH_SYNC["EVENTS_MAX_PER_CLUSTER"] per cluster, none older than
    ["EVENTS_MAX_AGE_SECONDS"] (mirror/sync/events.py); the API server itself expires events (1 h by default).
    """

    involved_kind = models.CharField(max_length=63)
    involved_namespace = models.CharField(max_length=253, blank=True)
    involved_name = models.CharField(max_length=253)
    involved_uid = models.CharField(max_length=64, blank=True)
    type = models.CharField(max_length=32, blank=True)  # Normal / Warning
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    count = models.IntegerField(default=1)
    last_seen = models.DateTimeField(null=True, blank=True)
    reporter = models.CharField(max_length=253, blank=True)

    objects = KubeEventQuerySet.as_manager()

    class Meta(KubeObject.Meta):
        db_table = "gpudash_kubeevent"  # the table keeps its name from the gpudash app
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="gpudash_kubeevent_unique_name")
        ]
        indexes = [
            *text_indexes("gpudash_event", "uid", "namespace"),
            models.Index(
                fields=("cluster", "involved_kind", "involved_namespace", "involved_name"),
                name="gpudash_event_involved_idx",
            ),
            models.Index(fields=("cluster", "last_seen"), name="gpudash_event_age_idx"),
        ]

    @staticmethod
    def seen_at(raw):
        """When the event last happened: lastTimestamp (core/v1), series.lastObservedTime, eventTime, creation."""
        series = raw.get("series") if isinstance(raw.get("series"), dict) else {}
        meta = raw.get("metadata") or {}
        for value in (
            raw.get("lastTimestamp"),
            series.get("lastObservedTime"),
            raw.get("eventTime"),
            meta.get("creationTimestamp"),
        ):
            if isinstance(value, str) and value:
                parsed = parse_datetime(value)
                if parsed is not None:
                    return parsed
        return None

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        involved = raw.get("involvedObject") if isinstance(raw.get("involvedObject"), dict) else {}
        source = raw.get("source") if isinstance(raw.get("source"), dict) else {}
        series = raw.get("series") if isinstance(raw.get("series"), dict) else {}
        count = raw.get("count") or series.get("count") or 1
        fields.update(
            involved_kind=str(involved.get("kind") or ""),
            involved_namespace=str(involved.get("namespace") or ""),
            involved_name=str(involved.get("name") or ""),
            involved_uid=str(involved.get("uid") or ""),
            type=str(raw.get("type") or ""),
            reason=str(raw.get("reason") or "")[:128],
            message=str(raw.get("message") or ""),
            count=int(count) if isinstance(count, int) else 1,
            last_seen=cls.seen_at(raw),
            reporter=str(
                source.get("component") or raw.get("reportingComponent") or raw.get("reportingController") or ""
            )[:253],
        )
        return fields


class SyncWorker(models.Model):
    """A process running watchers (`manage.py watch`, a Celery worker, the embedded web process).

    Alive while it heartbeats: the live workers share the (cluster, kind) leases between them by
    rendezvous hashing (mirror/sync/spread.py), each taking only its share.
    """

    name = models.CharField(max_length=255, unique=True, help_text="host:pid:random, the prefix of its lease holders")
    hostname = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(default=0)
    clusters = models.JSONField(default=list, blank=True, help_text="Names of the clusters it watches; empty = all.")
    started = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(db_index=True)
    leases = models.IntegerField(default=0, help_text="Leases it held at its last heartbeat.")

    class Meta:
        db_table = "gpudash_syncworker"  # the table keeps its name from the gpudash app
        ordering = ("name",)

    def __str__(self):
        return self.name


class OpsCounter(models.Model):
    """A monotonically increasing count kept in the database (exported as a Prometheus counter)."""

    name = models.CharField(max_length=64)
    cluster_name = models.CharField(max_length=63, blank=True)
    label = models.CharField(max_length=128, blank=True)  # one extra label value, e.g. a finding rule
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "monitoring_opscounter"  # moved from monitoring; the table keeps its name
        constraints = [
            models.UniqueConstraint(fields=("name", "cluster_name", "label"), name="monitoring_counter_unique")
        ]

    @classmethod
    def add(cls, name, cluster_name="", label="", by=1):
        key = {"name": name, "cluster_name": cluster_name, "label": label}
        if cls.objects.filter(**key).update(value=F("value") + by):
            return
        try:
            with transaction.atomic():
                cls.objects.create(value=by, **key)
        except IntegrityError:  # created meanwhile by another process
            cls.objects.filter(**key).update(value=F("value") + by)
