"""The inventory side of DRA: nodes, classes, slices, devices (clusters and sync state: mirror/models.py)."""

from django.db import models

from dra.errors import InputError
from dra.model import check_devices_shape
from mirror import normalize
from mirror.models import Cluster, KubeObject, parse_k8s_time, text_indexes

from . import devicekinds
from .querysets import DeviceQuerySet

__all__ = (
    "Node",
    "DeviceClass",
    "ResourceSlice",
    "SharedCounterSet",
    "Device",
    "DeviceTaintRule",
    "Namespace",
    "NodeDeviceSummary",
    "NodeAccelerator",
    "Vanished",
)


class Node(KubeObject):
    ready = models.BooleanField(null=True)
    ready_changed_at = models.DateTimeField(null=True, blank=True)
    unschedulable = models.BooleanField(default=False)
    taints = models.JSONField(default=list, blank=True)

    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="inventory_node_unique_name")
        ]
        # devicestate.not_ready_nodes() runs on every state read: with this it is an index scan of the
        # (usually few) NotReady nodes instead of a scan of every node.
        indexes = [
            *text_indexes("inventory_node", "uid", "namespace"),
            models.Index(
                fields=("cluster", "name"),
                condition=models.Q(namespace="", ready=False),
                name="inventory_node_not_ready_idx",
            ),
            models.Index(
                fields=("cluster", "ready"), name="inventory_node_ready_idx"
            ),  # the overview's node counts, index-only
        ]

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        ready, changed = None, None
        for cond in (raw.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                ready = cond.get("status") == "True"
                changed = parse_k8s_time(cond.get("lastTransitionTime"))
        spec = raw.get("spec") or {}
        fields.update(
            ready=ready,
            ready_changed_at=changed,
            unschedulable=bool(spec.get("unschedulable")),
            taints=spec.get("taints") or [],
        )
        return fields


class DeviceClass(KubeObject):
    extended_resource_name = models.CharField(max_length=253, blank=True)
    # How many devices of the cluster the selectors match, counted off the request path
    # (inventory/classmatch.py, run after class and slice changes) and read by the pages and the API.
    # Not read from `raw`: the sync's updates leave these columns alone.
    match_count = models.IntegerField(null=True, blank=True)
    match_error = models.TextField(blank=True)
    match_computed_at = models.DateTimeField(null=True, blank=True)
    # What the count was computed for: "<class resourceVersion>:<newest slice resourceVersion>".
    match_version = models.CharField(max_length=64, blank=True)

    class Meta(KubeObject.Meta):
        verbose_name_plural = "device classes"
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="inventory_deviceclass_unique_name")
        ]
        indexes = text_indexes("inventory_class", "uid", "namespace")

    @property
    def selectors(self):
        return self.spec.get("selectors") or []

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        fields["extended_resource_name"] = (raw.get("spec") or {}).get("extendedResourceName") or ""
        return fields


class ResourceSlice(KubeObject):
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    pool_generation = models.BigIntegerField(default=0)
    resource_slice_count = models.IntegerField(default=1)
    node_name = models.CharField(max_length=253, blank=True)
    all_nodes = models.BooleanField(default=False)
    per_device_node_selection = models.BooleanField(default=False)
    node_selector = models.JSONField(null=True, blank=True)
    # How many devices the slice publishes (its Device rows, one per spec.devices entry), written
    # with the slice so the pools page and the API count without reading the device table.
    device_count = models.IntegerField(default=0)

    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="inventory_resourceslice_unique_name")
        ]
        indexes = [
            *text_indexes("inventory_rs", "uid", "namespace", "driver", "pool", "node_name"),
            models.Index(fields=("cluster", "driver", "pool"), name="inventory_slice_pool_idx"),
        ]

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        try:  # the engine's own check: a slice it could not read is malformed here too
            check_devices_shape(spec.get("devices") or [])
        except InputError as exc:
            raise ValueError(str(exc)) from None
        fields.update(
            driver=spec.get("driver") or "",
            pool=pool.get("name") or "",
            pool_generation=int(pool.get("generation") or 0),
            resource_slice_count=int(pool.get("resourceSliceCount") or 1),
            node_name=spec.get("nodeName") or "",
            all_nodes=bool(spec.get("allNodes")),
            per_device_node_selection=bool(spec.get("perDeviceNodeSelection")),
            node_selector=spec.get("nodeSelector"),
            device_count=len(spec.get("devices") or []),
        )
        return fields

    # Child rows rebuilt from `raw` on every change: {model: foreign key to this row} (bulk sync uses it).
    child_models = {"inventory.Device": "slice", "inventory.SharedCounterSet": "slice"}

    def child_rows(self, labels=None):
        """Unsaved device and counter-set rows for what `raw` now says (both from `spec`: `labels`,
        the child models asked for, are always both)."""
        spec = self.spec
        rows = list(Device.rows_for_slice(self, spec))
        rows += [
            SharedCounterSet(
                slice=self, cluster_id=self.cluster_id, name=cs.get("name") or "", counters=cs.get("counters") or {}
            )
            for cs in spec.get("sharedCounters") or []
        ]
        return rows

    def sync_children(self):
        """Replace this slice's device and counter-set rows with what `raw` now says."""
        self.devices.all().delete()
        self.counter_sets.all().delete()
        rows = self.child_rows()
        Device.objects.bulk_create([r for r in rows if isinstance(r, Device)])
        SharedCounterSet.objects.bulk_create([r for r in rows if isinstance(r, SharedCounterSet)])
        from .devicestate import refresh_pools

        refresh_pools({(self.cluster_id, self.driver, self.pool)})


class SharedCounterSet(models.Model):
    """A `sharedCounters` entry of a slice (e.g. the memory slices of one physical GPU)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    slice = models.ForeignKey(ResourceSlice, on_delete=models.CASCADE, related_name="counter_sets")
    name = models.CharField(max_length=63)
    counters = models.JSONField(default=dict)

    class Meta:
        ordering = ("slice_id", "name")


class Device(models.Model):
    """One device published in a ResourceSlice; identity is (driver, pool, name) within a cluster."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    slice = models.ForeignKey(ResourceSlice, on_delete=models.CASCADE, related_name="devices")
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    name = models.CharField(max_length=63)
    # The node the device lives on: the slice's nodeName, or the device's own with perDeviceNodeSelection.
    node_name = models.CharField(max_length=253, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    consumes_counters = models.JSONField(default=list, blank=True)
    taints = models.JSONField(default=list, blank=True)
    binds_to_node = models.BooleanField(default=False)
    binding_conditions = models.JSONField(default=list, blank=True)
    binding_failure_conditions = models.JSONField(default=list, blank=True)
    allow_multiple_allocations = models.BooleanField(default=False)
    raw = models.JSONField(default=dict)
    # Searchable copies for the API filters (see mirror/normalize.py): plain attribute values and
    # capacities in base units, keyed bare for the device's own driver domain; and whether a
    # NoSchedule/NoExecute taint keeps new allocations off the device.
    attribute_values = models.JSONField(default=dict, blank=True)
    capacity_values = models.JSONField(default=dict, blank=True)
    tainted = models.BooleanField(default=False)
    # Who holds the device, kept current by the sync apply path (inventory/devicestate.py: the
    # states derived from these; no foreign key, so deleting claims never cascades into devices).
    allocation_state = models.CharField(max_length=16, default="free")
    held_by_claim_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    held_by_namespace = models.CharField(max_length=253, blank=True)
    held_by_name = models.CharField(max_length=253, blank=True)
    admin_watched = models.BooleanField(default=False)
    # gpu | partition | other, and the physical GPU (within the pool) a gpu or partition belongs to:
    # decided once per slice write by inventory/devicekinds.py.
    kind = models.CharField(max_length=16, default=devicekinds.OTHER)
    parent = models.CharField(max_length=253, blank=True)

    objects = DeviceQuerySet.as_manager()

    class Meta:
        ordering = ("cluster_id", "node_name", "driver", "pool", "name")
        indexes = [
            *text_indexes("inventory_device", "node_name"),
            models.Index(fields=("allocation_state",), name="inventory_device_state_idx"),
            models.Index(fields=("cluster", "driver", "pool", "name"), name="inventory_device_identity_idx"),
            # The default order of the device lists (API and page) with the id tiebreak: a page, or a
            # keyset page (?cursor=), is an index range scan that stops after the page's rows.
            models.Index(
                fields=("cluster", "node_name", "driver", "pool", "name", "id"), name="inventory_device_order_idx"
            ),
        ]

    def __str__(self):
        return f"{self.driver}/{self.pool}/{self.name}"

    @classmethod
    def rows_for_slice(cls, slice_obj, spec):
        devices = spec.get("devices") or []
        kinds = devicekinds.classify(slice_obj.driver, devices)
        for dev, (kind, parent) in zip(devices, kinds):
            yield cls(
                kind=kind,
                parent=parent,
                cluster_id=slice_obj.cluster_id,
                slice=slice_obj,
                driver=slice_obj.driver,
                pool=slice_obj.pool,
                name=dev.get("name") or "",
                node_name=slice_obj.node_name or dev.get("nodeName") or "",
                attributes=dev.get("attributes") or {},
                capacity=dev.get("capacity") or {},
                consumes_counters=dev.get("consumesCounters") or [],
                taints=dev.get("taints") or [],
                binds_to_node=bool(dev.get("bindsToNode")),
                binding_conditions=dev.get("bindingConditions") or [],
                binding_failure_conditions=dev.get("bindingFailureConditions") or [],
                allow_multiple_allocations=bool(dev.get("allowMultipleAllocations")),
                raw=dev,
                attribute_values=normalize.plain_attributes(dev.get("attributes"), slice_obj.driver),
                capacity_values=normalize.capacity_values(dev.get("capacity"), slice_obj.driver),
                tainted=any(
                    isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")
                    for t in dev.get("taints") or []
                ),
            )

    def attribute_value(self, qualified_name):
        """The attribute's plain value, looking up `domain/id` or, in the driver's domain, bare `id`."""
        attr = self.attributes.get(qualified_name)
        if attr is None and "/" in qualified_name:
            domain, _, ident = qualified_name.partition("/")
            if domain == self.driver:
                attr = self.attributes.get(ident)
        if not isinstance(attr, dict):
            return None
        for key in ("string", "int", "bool", "version"):
            if key in attr:
                return attr[key]
        return None


class DeviceTaintRule(KubeObject):
    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "namespace", "name"), name="inventory_devicetaintrule_unique_name"
            )
        ]
        indexes = text_indexes("inventory_dtr", "uid", "namespace")


class Namespace(KubeObject):
    """Namespaces, mirrored for their labels: admin access needs `resource.kubernetes.io/admin-access`."""

    ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"

    admin_access = models.BooleanField(default=False)

    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="inventory_namespace_unique_name")
        ]
        indexes = text_indexes("inventory_ns", "uid", "namespace")

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        fields["admin_access"] = fields["labels"].get(cls.ADMIN_ACCESS_LABEL) == "true"
        return fields


class NodeDeviceSummary(models.Model):
    """Device counts per (cluster, driver, pool, node, model) by stored allocation state: what the
    overview and the fleet map aggregate (one row per node and driver instead of every device).

    Rebuilt with the device state it sums, by `devicestate.refresh_pools` (inventory/summary.py);
    stuck claims and NotReady nodes change without the pool changing, so inventory/fleet.py applies
    them when reading (a join on Node, a short list of devices held by stuck claims).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    node_name = models.CharField(max_length=253, blank=True)
    model = models.TextField(blank=True)  # productName, else the model attribute
    kind = models.CharField(max_length=16, default="other")  # gpu, partition or other (summary.KIND)
    map_key = models.CharField(max_length=260)  # the fleet-map row: the node, or "pool:<pool>" without one
    sort_key = models.TextField()  # map_key in natural order, comparable as plain text (summary.natural_sort_key)
    n_total = models.IntegerField(default=0)
    n_free = models.IntegerField(default=0)  # unheld, untainted: free, or "node not ready" on a NotReady node
    n_tainted_unheld = models.IntegerField(default=0)  # unheld but tainted: the tainted state
    n_allocated = models.IntegerField(default=0)  # by stored allocation_state (stuck ones included)
    n_admin = models.IntegerField(default=0)
    n_partial = models.IntegerField(default=0)
    n_tainted = models.IntegerField(default=0)  # flag, whatever the state
    n_admin_watched = models.IntegerField(default=0)  # flag, whatever the state
    # Physical GPUs (devicekinds: a whole GPU and its partitions are one), counted on the row of their
    # whole-GPU device (the "partition" row where only partitions are published), and how many of them
    # have no device held or tainted (free on a Ready node: NotReady applied when reading).
    n_gpus = models.IntegerField(default=0)
    n_gpus_free = models.IntegerField(default=0)
    # Partition-aware capacity (dra/partitions.py), written with the counts above: on a partition row,
    # per MIG profile [how many more one claim could get now, how many with nothing allocated]; on a
    # GPU row, its whole GPUs that partitions in use leave partly free ("stranded").
    partition_free = models.JSONField(default=dict, blank=True)
    n_gpus_stranded = models.IntegerField(default=0)
    # A placeholder row of a node-local pool that publishes nothing now (a driver outage): every count
    # above 0, these say what it last published and since when (summary.rebuild).
    n_unpublished = models.IntegerField(default=0)
    unpublished_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The key also serves the refresh's lookups by (cluster, driver, pool).
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "driver", "pool", "node_name", "model", "kind"), name="inventory_summary_unique_key"
            ),
        ]
        indexes = [
            models.Index(fields=("cluster", "sort_key"), name="inventory_summary_order_idx"),
            # The nodes list's page of counts and the node page (FleetSnapshot(nodes=...)).
            models.Index(fields=("cluster", "node_name"), name="inventory_summary_node_idx"),
        ]

    def __str__(self):
        return f"{self.map_key} {self.driver}/{self.pool}: {self.n_total} devices"


class NodeAccelerator(models.Model):
    """GPUs a node serves outside DRA: one row per (node, source, resource, model), kept by the sync from
    the Node and its pods' footprints (inventory/accelerators.py). `allocatable` is what the node offers,
    `requested` what its bound, non-terminal pods ask for, `gpus` the physical GPUs behind it (HAMi's
    registered GPUs; for a device plugin's whole-GPU resource the allocatable count)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    node_name = models.CharField(max_length=253)
    source = models.CharField(max_length=16)  # device-plugin | hami
    resource = models.CharField(max_length=253)  # nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/gpumem ...
    kind = models.CharField(max_length=16)  # gpu | partition | share | memory | cores
    model = models.TextField(blank=True)
    allocatable = models.BigIntegerField(default=0)
    requested = models.BigIntegerField(default=0)
    gpus = models.IntegerField(default=0)
    # On a node's first HAMi row: {"devices": [registered GPU with what HAMi assigned and to which pods],
    # "problems": [{"pod", "text"}] (assignment annotations that could not be read)}; else {}.
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=("cluster", "node_name"), name="inventory_accel_node_idx")]

    def __str__(self):
        return f"{self.node_name} {self.source} {self.resource}: {self.requested}/{self.allocatable}"


class Vanished(models.Model):
    """What gpudash last mirrored of a device or ResourceSlice that is gone: its "last seen" page.
    Device rows are rebuilt on every slice write, so the sync's apply path writes one of these where a
    device key or a slice name disappears (inventory/vanished.py); the hourly history prune drops them
    after the history retention."""

    DEVICE, SLICE = "Device", "ResourceSlice"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=((DEVICE, DEVICE), (SLICE, SLICE)))
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    name = models.CharField(max_length=253)  # the device's, or the slice's
    slice_name = models.CharField(max_length=253, blank=True)  # a device's slice
    node_name = models.CharField(max_length=253, blank=True)
    device_kind = models.CharField(max_length=16, blank=True)  # gpu | partition | other
    attributes = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    devices = models.JSONField(default=list, blank=True)  # a slice's device names
    held_by_namespace = models.CharField(max_length=253, blank=True)
    held_by_name = models.CharField(max_length=253, blank=True)
    vanished_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "kind", "driver", "pool", "name"), name="inventory_vanished_unique_key"
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.driver}/{self.pool}/{self.name}"
