"""The workload side of DRA: claims, claim templates, pods, and what the watcher saw happen to claims."""

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from mirror import accelerators
from mirror.messages import render
from mirror.models import KubeObject, parse_k8s_time, text_indexes
from mirror.sync.hooks import hooks

from .devicestatus import device_of_cdi_id, device_status_fields, pod_health_fields

__all__ = (
    "ResourceClaimTemplate",
    "ResourceClaim",
    "AllocationResult",
    "ClaimConsumer",
    "ClaimDeviceStatus",
    "Pod",
    "PodClaimRef",
    "PodResourceHealth",
    "ClaimStateChange",
    "Finding",
    "AuditEntry",
    "StuckObservation",
)

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"


def _requested_classes(spec):
    names = []
    for req in (spec.get("devices") or {}).get("requests") or []:
        if req.get("exactly"):
            names.append(req["exactly"].get("deviceClassName") or "")
        for sub in req.get("firstAvailable") or []:
            names.append(sub.get("deviceClassName") or "")
    return sorted({n for n in names if n})


def _owner_pod(meta):
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Pod" and ref.get("controller"):
            return ref
    return None


class ResourceClaimTemplate(KubeObject):
    device_classes = models.JSONField(default=list, blank=True)

    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="claims_template_unique_name")
        ]
        indexes = text_indexes("claims_template", "uid", "namespace")

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        fields["device_classes"] = _requested_classes(((raw.get("spec") or {}).get("spec")) or {})
        return fields


class ResourceClaimQuerySet(models.QuerySet):
    def allocated(self):
        return self.filter(allocated=True)

    def pending(self):
        return self.filter(state=ResourceClaim.State.PENDING)

    def newest_first(self):
        """Newest first, ties by name: with a cluster and a state, read in the order of claims_claim_state_new_idx."""
        return self.order_by("-creation_timestamp", "namespace", "name")


class ResourceClaim(KubeObject):
    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        ALLOCATED = "allocated", "Allocated"
        RESERVED = "reserved", "Reserved"
        DELETING = "deleting", "Deleting"

    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    allocated = models.BooleanField(default=False, db_index=True)
    # Single node the allocation is bound to (from status.allocation.nodeSelector), if any.
    node_name = models.CharField(max_length=253, blank=True)
    allocation_timestamp = models.DateTimeField(null=True, blank=True)
    device_classes = models.JSONField(default=list, blank=True)
    finalizers = models.JSONField(default=list, blank=True)
    owner_pod_uid = models.CharField(max_length=64, blank=True)
    owner_pod_name = models.CharField(max_length=253, blank=True)
    pod_claim_name = models.CharField(max_length=253, blank=True)

    objects = ResourceClaimQuerySet.as_manager()

    class Meta(KubeObject.Meta):
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="claims_claim_unique_name")
        ]
        # Namespace-scoped users and ?namespace= filter every cluster's claims of some namespaces.
        indexes = [
            *text_indexes("claims_rc", "uid", "namespace", "state", "node_name", "owner_pod_uid"),
            models.Index(fields=("namespace", "cluster", "name"), name="claims_claim_namespace_idx"),
            # Claims per state (overview) and per namespace and state (the allocation aggregate): index-only counts.
            models.Index(fields=("cluster", "state", "namespace"), name="claims_claim_state_idx"),
            # The preview page's pending claims, newest first: read in order and stop at a page,
            # instead of sorting every pending claim for every preview.
            models.Index(
                fields=("cluster", "state", "-creation_timestamp", "namespace", "name"),
                name="claims_claim_state_new_idx",
            ),
        ]

    @staticmethod
    def node_from_selector(node_selector):
        """The one node an allocation's nodeSelector pins (metadata.name In [x]), else ''."""
        for term in (node_selector or {}).get("nodeSelectorTerms") or []:
            for expr in (term.get("matchFields") or []) + (term.get("matchExpressions") or []):
                key = expr.get("key")
                if (
                    key in ("metadata.name", "kubernetes.io/hostname")
                    and expr.get("operator") == "In"
                    and len(expr.get("values") or []) == 1
                ):
                    return expr["values"][0]
        return ""

    @classmethod
    def state_from_raw(cls, raw):
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        if meta.get("deletionTimestamp"):
            return cls.State.DELETING
        if status.get("reservedFor"):
            return cls.State.RESERVED
        if status.get("allocation"):
            return cls.State.ALLOCATED
        return cls.State.PENDING

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        allocation = status.get("allocation") or {}
        owner = _owner_pod(meta) or {}
        fields.update(
            state=cls.state_from_raw(raw),
            allocated=bool(allocation),
            node_name=cls.node_from_selector(allocation.get("nodeSelector")),
            allocation_timestamp=parse_k8s_time(allocation.get("allocationTimestamp")),
            device_classes=_requested_classes(raw.get("spec") or {}),
            finalizers=meta.get("finalizers") or [],
            owner_pod_uid=owner.get("uid") or "",
            owner_pod_name=owner.get("name") or "",
            pod_claim_name=(meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) or "",
        )
        return fields

    # Child rows rebuilt from `raw` on every change: {model: foreign key to this row} (bulk sync uses it).
    child_models = {
        "claims.AllocationResult": "claim",
        "claims.ClaimConsumer": "claim",
        "claims.ClaimDeviceStatus": "claim",
    }

    def sync_children(self):
        # The stored state of the devices the old and new results name is inventory's: it registers
        # which pools a claim's results touch and their refresh as sync hooks (mirror/sync/hooks.py).
        pools_of = hooks.pools_of.get("ResourceClaim")
        touched = pools_of([self.pk]) if pools_of else set()
        self.results.all().delete()
        self.consumers.all().delete()
        self.device_statuses.all().delete()
        rows = self.child_rows()
        for model in (AllocationResult, ClaimConsumer, ClaimDeviceStatus):
            model.objects.bulk_create([r for r in rows if isinstance(r, model)])
        if pools_of:
            hooks.refresh_pools(touched | pools_of([self.pk]))

    def child_rows(self, labels=None):
        """Unsaved allocation-result and consumer rows for what `raw` now says; `labels`: only these
        child models (a reservation change rebuilds the consumers alone)."""
        status = self.status
        results = (
            []
            if labels is not None and "claims.AllocationResult" not in labels
            else [
                AllocationResult(
                    cluster_id=self.cluster_id,
                    claim=self,
                    namespace=self.namespace,
                    request=r.get("request") or "",
                    driver=r.get("driver") or "",
                    pool=r.get("pool") or "",
                    device=r.get("device") or "",
                    admin_access=bool(r.get("adminAccess")),
                    share_id=r.get("shareID") or "",
                    consumed_capacity=r.get("consumedCapacity") or {},
                    binding_conditions=r.get("bindingConditions") or [],
                    binding_failure_conditions=r.get("bindingFailureConditions") or [],
                )
                for r in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            ]
        )
        consumers = (
            []
            if labels is not None and "claims.ClaimConsumer" not in labels
            else [
                ClaimConsumer(
                    cluster_id=self.cluster_id,
                    claim=self,
                    api_group=c.get("apiGroup") or "",
                    resource=c.get("resource") or "",
                    name=c.get("name") or "",
                    uid=c.get("uid") or "",
                )
                for c in status.get("reservedFor") or []
            ]
        )
        statuses = (
            []
            if labels is not None and "claims.ClaimDeviceStatus" not in labels
            else ClaimDeviceStatus.rows_for_claim(self)
        )
        return results + consumers + statuses


class AllocationResult(models.Model):
    """One `status.allocation.devices.results[]` entry: claim request -> device."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    claim = models.ForeignKey(ResourceClaim, on_delete=models.CASCADE, related_name="results")
    # The claim's namespace (part of its identity, so never stale): counts per namespace read the
    # results alone instead of joining every result to its claim's wide row.
    namespace = models.CharField(max_length=253, blank=True, default="")
    request = models.CharField(max_length=127)
    driver = models.CharField(max_length=63)
    pool = models.CharField(max_length=253)
    device = models.CharField(max_length=63)
    admin_access = models.BooleanField(default=False)
    share_id = models.CharField(max_length=64, blank=True)
    consumed_capacity = models.JSONField(default=dict, blank=True)
    binding_conditions = models.JSONField(default=list, blank=True)
    binding_failure_conditions = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("claim_id", "id")
        indexes = [models.Index(fields=("cluster", "driver", "pool", "device"), name="claims_result_device_idx")]

    def __str__(self):
        return f"{self.request} -> {self.driver}/{self.pool}/{self.device}"


class ClaimConsumer(models.Model):
    """One `status.reservedFor[]` entry."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    claim = models.ForeignKey(ResourceClaim, on_delete=models.CASCADE, related_name="consumers")
    api_group = models.CharField(max_length=253, blank=True)
    resource = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)

    class Meta:
        ordering = ("claim_id", "id")
        indexes = text_indexes("claims_consumer", "uid")


class ClaimDeviceStatus(models.Model):
    """One `status.devices[]` entry (AllocatedDeviceStatus): what the driver says about a device it
    prepared for the claim: conditions, opaque data, network data. An entry gpudash cannot read is
    kept with `error` set (and whatever could be read), never dropped with its claim."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    claim = models.ForeignKey(ResourceClaim, on_delete=models.CASCADE, related_name="device_statuses")
    namespace = models.CharField(max_length=253, blank=True, default="")
    driver = models.CharField(max_length=253, blank=True)
    pool = models.CharField(max_length=253, blank=True)
    device = models.CharField(max_length=253, blank=True)
    share_id = models.CharField(max_length=64, blank=True)  # "" when none
    conditions = models.JSONField(default=list, blank=True)  # as served: type, status, reason, message, ...
    data = models.JSONField(null=True, blank=True)
    interface_name = models.CharField(max_length=256, blank=True)
    ips = models.JSONField(default=list, blank=True)
    hardware_address = models.CharField(max_length=128, blank=True)
    # The "Ready" condition's status; null when the driver reports no such condition.
    ready = models.BooleanField(null=True, blank=True)
    # Why the entry could not be read as served ("" when it could); shown where the entry is.
    error = models.TextField(blank=True)

    class Meta:
        ordering = ("claim_id", "id")
        indexes = [models.Index(fields=("cluster", "driver", "pool", "device"), name="claims_devstatus_device_idx")]

    def __str__(self):
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def has_network_data(self):
        return bool(self.interface_name or self.ips or self.hardware_address)

    @classmethod
    def rows_for_claim(cls, claim):
        entries = claim.status.get("devices")
        if entries is None:
            return []
        if not isinstance(entries, list):
            entries = [entries]  # kept as one entry in error rather than lost
        return [
            cls(cluster_id=claim.cluster_id, claim=claim, namespace=claim.namespace, **device_status_fields(entry))
            for entry in entries
        ]


class Pod(KubeObject):
    """Pods that use claims (or DRA-backed extended resources), DRA driver pods, and pods HAMi assigned
    vGPUs to (its allocation annotation: what the node page and the API show of their GPUs)."""

    phase = models.CharField(max_length=16, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    # PodScheduled condition: False with reason Unschedulable is the usual "why Pending".
    scheduled_status = models.CharField(max_length=8, blank=True)
    scheduled_reason = models.CharField(max_length=128, blank=True)
    scheduled_message = models.TextField(blank=True)
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    # What HAMi's scheduler assigned (mirror.accelerators.pod_assignment of its annotation): which
    # GPU, how much memory and compute per container; {} for a pod HAMi did not schedule.
    hami = models.JSONField(default=dict, blank=True)

    class Meta(KubeObject.Meta):
        constraints = [models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="claims_pod_unique_name")]
        indexes = text_indexes("claims_pod", "uid", "namespace", "phase", "node_name")

    @property
    def is_terminal(self):
        return self.phase in ("Succeeded", "Failed")

    @staticmethod
    def uses_dra(raw):
        spec, status = raw.get("spec") or {}, raw.get("status") or {}
        return bool(spec.get("resourceClaims") or status.get("extendedResourceClaimStatus"))

    @classmethod
    def fields_from_raw(cls, raw):
        fields = super().fields_from_raw(raw)
        spec, status, meta = raw.get("spec") or {}, raw.get("status") or {}, raw.get("metadata") or {}
        sched = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), {})
        fields.update(
            phase=status.get("phase") or "",
            node_name=spec.get("nodeName") or "",
            scheduled_status=sched.get("status") or "",
            scheduled_reason=sched.get("reason") or "",
            scheduled_message=sched.get("message") or "",
            owner_kind=owner.get("kind") or "",
            owner_name=owner.get("name") or "",
            hami=accelerators.pod_assignment(raw),
        )
        return fields

    # Child rows rebuilt from `raw` on every change: {model: foreign key to this row} (bulk sync uses it).
    child_models = {"claims.PodClaimRef": "pod", "claims.PodResourceHealth": "pod"}

    def child_rows(self, labels=None):
        refs = [] if labels is not None and "claims.PodClaimRef" not in labels else list(PodClaimRef.rows_for_pod(self))
        health = (
            []
            if labels is not None and "claims.PodResourceHealth" not in labels
            else PodResourceHealth.rows_for_pod(self)
        )
        return refs + health

    def sync_children(self):
        self.claim_refs.all().delete()
        self.resource_health.all().delete()
        rows = self.child_rows()
        for model in (PodClaimRef, PodResourceHealth):
            model.objects.bulk_create([r for r in rows if isinstance(r, model)])


class PodFootprintQuerySet(models.QuerySet):
    def on_nodes(self):
        """The pods the scheduler counts on their nodes: bound, not Succeeded/Failed."""
        return self.exclude(node_name="").exclude(phase__in=("Succeeded", "Failed"))


class PodFootprint(models.Model):
    """What one pod takes from its node (summed requests, host ports), for EVERY pod the pod watcher sees,
    DRA or not: the node filters of a preview (NodeResourcesFit, NodePorts) need each node's usage, and
    a full Pod row for every pod of a big cluster would cost far more. `raw` is the engine's footprint
    document (dra.nodefilters.pod_footprint), read as is into the preview Inventory."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=16, blank=True)
    resource_version_num = models.BigIntegerField(default=0)
    raw = models.JSONField(default=dict)
    synced_at = models.DateTimeField(auto_now=True)

    objects = PodFootprintQuerySet.as_manager()

    class Meta:
        ordering = ("cluster_id", "namespace", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "namespace", "name"), name="claims_podfootprint_unique_name")
        ]
        indexes = text_indexes("claims_footprint", "node_name")

    def __str__(self):
        return f"{self.namespace}/{self.name}"


class PodClaimRef(models.Model):
    """A pod's `spec.resourceClaims[]` entry, resolved to the claim name where known."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="claim_refs")
    namespace = models.CharField(max_length=253)
    pod_claim_name = models.CharField(max_length=253)
    template_name = models.CharField(max_length=253, blank=True)
    # Empty while the controller has not created the claim of a template entry yet.
    claim_name = models.CharField(max_length=253, blank=True)

    class Meta:
        ordering = ("pod_id", "id")
        indexes = [models.Index(fields=("cluster", "namespace", "claim_name"), name="claims_podref_claim_idx")]

    @classmethod
    def rows_for_pod(cls, pod):
        spec, status = pod.spec, pod.status
        generated = {s.get("name"): s.get("resourceClaimName") or "" for s in status.get("resourceClaimStatuses") or []}
        for ref in spec.get("resourceClaims") or []:
            name = ref.get("name") or ""
            yield cls(
                cluster_id=pod.cluster_id,
                pod=pod,
                namespace=pod.namespace,
                pod_claim_name=name,
                template_name=ref.get("resourceClaimTemplateName") or "",
                claim_name=ref.get("resourceClaimName") or generated.get(name, ""),
            )
        ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if ext:
            yield cls(cluster_id=pod.cluster_id, pod=pod, namespace=pod.namespace, pod_claim_name="", claim_name=ext)


class PodResourceHealthQuerySet(models.QuerySet):
    def with_devices(self):
        """The rows as a list, each with `device_key` (driver, pool, device) or None: what
        claims.models.resolve_devices makes of its resource ID and its claim's allocation."""
        return resolve_devices(list(self))

    def for_devices(self, cluster_id, keys):
        """The rows (with `device_key`) that report on these devices, {(driver, pool, device)}: by
        the device the resource ID names, or through the allocation of the claim a CDI ID came from."""
        keys = set(keys)
        if not keys:
            return []
        names = {k[2] for k in keys}
        direct = self.filter(cluster_id=cluster_id, device__in=names)
        holders = AllocationResult.objects.filter(cluster_id=cluster_id, device__in=names).values_list(
            "driver", "pool", "device", "claim__namespace", "claim__name"
        )
        claims = {(ns, name) for driver, pool, device, ns, name in holders if (driver, pool, device) in keys}
        by_claim = models.Q()
        for ns, name in claims:
            by_claim |= models.Q(namespace=ns, resource_claim_name=name)
        rows = list(direct)
        if claims:
            rows += list(self.filter(by_claim, cluster_id=cluster_id, device=""))
        return [r for r in resolve_devices(rows) if r.device_key in keys]


class PodResourceHealth(models.Model):
    """One resource of a container's `allocatedResourcesStatus[]` (KEP-4680): the kubelet's word on
    the health of a device a claim gave the container. `claim_name` is the pod-level name from the
    status entry ("claim:<claim>/<request>"); `resource_claim_name` the ResourceClaim it resolves to
    (status.resourceClaimStatuses or spec.resourceClaims; "" when not known yet). An entry gpudash
    cannot read is kept with `error` set."""

    class Health(models.TextChoices):
        HEALTHY = "Healthy", _("Healthy")
        UNHEALTHY = "Unhealthy", _("Unhealthy")
        UNKNOWN = "Unknown", _("Unknown")

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="resource_health")
    namespace = models.CharField(max_length=253, blank=True, default="")
    container = models.CharField(max_length=253, blank=True)
    init_container = models.BooleanField(default=False)
    # The entry's name as served: "claim:<claim>/<request>" for DRA ("nvidia.com/gpu" for a device
    # plugin's resource: claim_name and request are "" then).
    resource_name = models.CharField(max_length=512, blank=True)
    claim_name = models.CharField(max_length=253, blank=True)
    request = models.CharField(max_length=253, blank=True)
    resource_claim_name = models.CharField(max_length=253, blank=True)
    resource_id = models.CharField(max_length=1024, blank=True)
    health = models.CharField(max_length=16, blank=True)  # a Health value as served ("" when absent)
    message = models.TextField(blank=True)
    # The device the resource ID names, where the ID itself says it (the kubelet's fallback form
    # "<driver>/<pool>/<device>"); a CDI device ID is resolved through the claim's allocation instead
    # (claims.models.resolve_devices). Empty when not known.
    driver = models.CharField(max_length=253, blank=True)
    pool = models.CharField(max_length=253, blank=True)
    device = models.CharField(max_length=253, blank=True)
    error = models.TextField(blank=True)

    objects = PodResourceHealthQuerySet.as_manager()

    class Meta:
        ordering = ("pod_id", "id")
        indexes = [
            models.Index(fields=("cluster", "namespace", "resource_claim_name"), name="claims_podhealth_claim_idx"),
            models.Index(fields=("cluster", "driver", "pool", "device"), name="claims_podhealth_device_idx"),
        ]

    def __str__(self):
        return f"{self.container} {self.claim_name}/{self.request} {self.resource_id}: {self.health}"

    @classmethod
    def rows_for_pod(cls, pod):
        return [
            cls(cluster_id=pod.cluster_id, pod=pod, namespace=pod.namespace, **fields)
            for fields in pod_health_fields(pod.raw)
        ]


# --- resource ID -> device (docs/device-health.md) ---


def _base_request(request):
    return request.split("/", 1)[0]


def resolve_devices(rows, always_query=False):
    """Set `device_key` on PodResourceHealth rows: (driver, pool, device) of the device the report is
    about, None when it cannot be told. One query for the allocation results of the rows whose
    resource ID is a CDI device ID (`always_query`: one even without such rows, so that an API page
    costs the same queries whatever its pods report)."""
    pending = [r for r in rows if not r.device and r.resource_claim_name and "=" in r.resource_id]
    results, waiting = {}, {id(r) for r in pending}
    if not pending and always_query:
        list(AllocationResult.objects.filter(claim__name__in=[""]).values_list("id")[:1])
    if pending:
        where = models.Q()
        for r in pending:
            where |= models.Q(cluster_id=r.cluster_id, claim__namespace=r.namespace, claim__name=r.resource_claim_name)
        for res in AllocationResult.objects.filter(where).select_related("claim").order_by("id"):
            results.setdefault((res.cluster_id, res.claim.namespace, res.claim.name), []).append(res)
    for r in rows:
        if r.device:
            r.device_key = (r.driver, r.pool, r.device)
            continue
        r.device_key = None
        if id(r) in waiting:
            candidates = [
                res
                for res in results.get((r.cluster_id, r.namespace, r.resource_claim_name), [])
                if not r.request or _base_request(res.request) == r.request
            ]
            found = device_of_cdi_id(r.resource_id, candidates)
            if found is not None:
                r.device_key = (found.driver, found.pool, found.device)
    return rows


class ClaimStateChange(models.Model):
    """A claim's state as the watcher saw it change over time (kept after the claim is gone)."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    at = models.DateTimeField(db_index=True)
    old_state = models.CharField(max_length=16, blank=True)
    new_state = models.CharField(max_length=16)  # a ResourceClaim.State, or "deleted"
    resource_version = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)

    class Meta:
        ordering = ("at", "id")
        indexes = [
            *text_indexes("claims_statechange", "uid"),
            models.Index(fields=("cluster", "namespace", "name"), name="claims_statechange_claim_idx"),
        ]


# Findings that only report (monitoring/idle.py, the health findings): their claim is not stuck and
# nothing is released. Apps above add theirs through claims.stuck.register_rule.
REPORT_ONLY_RULES = ["idle_gpu"]


class FindingQuerySet(models.QuerySet):
    def active(self):
        return self.filter(cleared_at__isnull=True)

    def stuck(self):
        """Active findings that make their claim stuck (every rule but the report-only ones)."""
        return self.active().exclude(rule__in=REPORT_ONLY_RULES)


class Finding(models.Model):
    """A stuck-claim detector result; it clears itself (cleared_at) when the condition ends."""

    class Severity(models.TextChoices):
        INFO = "info", "Info"
        WARNING = "warning", "Warning"
        CRITICAL = "critical", "Critical"

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    rule = models.CharField(max_length=64)
    severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.WARNING)
    namespace = models.CharField(max_length=253, blank=True)
    claim_name = models.CharField(max_length=253, blank=True)
    claim_uid = models.CharField(max_length=64, blank=True)
    # Distinguishes several findings of one rule on one claim (e.g. one per stale consumer).
    subject = models.CharField(max_length=255, blank=True)
    summary = models.TextField()  # English, as the API has always served it
    # The same text as a message (mirror/messages.py), so a page shows it in the reader's language.
    summary_message = models.JSONField(default=dict, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    remedy = models.CharField(max_length=64, blank=True, help_text="Name of the release action that fixes it.")
    first_seen = models.DateTimeField(db_index=True)
    last_seen = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = FindingQuerySet.as_manager()

    class Meta:
        ordering = ("-first_seen", "id")
        indexes = [
            *text_indexes("claims_finding", "rule", "namespace", "claim_uid"),
            models.Index(fields=("cluster", "rule", "claim_uid", "subject"), name="claims_finding_key_idx"),
        ]


# What the pages call each release outcome, in the reader's language (`outcome` keeps the key the API,
# the filters and the badge's class use).
# The release actions by name (claims/release/plans.py plans them; audit entries and findings show them).
ACTION_TITLES = {
    "remove_reservations": _("Remove stale reservedFor entries"),
    "deallocate": _("Deallocate (clear status.allocation)"),
    "finish_deletion": _("Finish the blocked deletion (remove the finalizer)"),
    "delete_claim": _("Delete the template-generated claim"),
}

OUTCOME_TITLES = {
    "done": pgettext_lazy("release outcome", "done"),
    "refused": pgettext_lazy("release outcome", "refused"),
    "conflict": pgettext_lazy("release outcome", "conflict"),
    "error": pgettext_lazy("release outcome", "error"),
    "dry-run": pgettext_lazy("release outcome", "dry-run"),
}


class AuditEntry(models.Model):
    """Every attempted write to a cluster, successful or not (who, what, request, response)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey("auth.User", null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150)
    cluster = models.ForeignKey("mirror.Cluster", null=True, on_delete=models.SET_NULL, related_name="+")
    cluster_name = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253, blank=True)
    claim_name = models.CharField(max_length=253, blank=True)
    claim_uid = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=64)
    rule = models.CharField(max_length=64, blank=True)
    dry_run = models.BooleanField(default=False)
    outcome = models.CharField(max_length=32)  # done, refused, conflict, error, dry-run
    reason = models.TextField(blank=True)
    # The reason as a message (mirror/messages.py, issue 14): the audit pages show it in the reader's
    # language; `reason` keeps the English (the API). Empty for rows written before: they show `reason`.
    reason_message = models.JSONField(default=dict, blank=True)
    request = models.JSONField(default=dict, blank=True)
    response = models.JSONField(default=dict, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # Both identities of a write (issue 13): {"dashboard": the dashboard's own cluster identity, "user" and
    # "groups": whom it impersonated (null = none), "review": the SubjectAccessReview verdict}.
    kube_identity = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-at", "-id")
        verbose_name_plural = "audit entries"

    @property
    def shown_reason(self):
        return render(self.reason_message, self.reason)

    @property
    def outcome_title(self):
        return OUTCOME_TITLES.get(self.outcome, self.outcome)

    @property
    def action_title(self):
        """The action in words, in the reader's language (the stored key stays in filters and the API)."""

        return ACTION_TITLES.get(self.action, self.action)


class StuckObservation(models.Model):
    """When the detector first saw a condition whose start the objects themselves don't tell
    (a pod or node that vanished, a device no longer published); grace periods count from here."""

    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    rule = models.CharField(max_length=64)
    claim_uid = models.CharField(max_length=64)
    subject = models.CharField(max_length=255, blank=True)
    since = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "rule", "claim_uid", "subject"), name="claims_stuckobservation_unique_key"
            )
        ]


from .models_whatif import WhatIfScenario  # noqa: E402  (saved what-if scenarios; their own module)

__all__ = (*__all__, "WhatIfScenario")
