"""Stuck-claim detector: small rules over the database mirror, recorded as Finding rows.

Each rule yields `Candidate`s (a condition seen now, with the time it started when the objects tell it).
`detect(cluster)` turns candidates older than their rule's grace period into findings, refreshes the
findings still true, and clears the ones whose condition ended (cleared rows are kept as history).
Thresholds come from settings.GPUDASH_STUCK. Rules only read the mirror; the release actions
(claims/release/) re-check everything against the API server before writing.
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from mirror import published
from mirror.messages import message, render
from mirror.models import OpsCounter, SyncState, parse_k8s_time

from .models import (
    REPORT_ONLY_RULES,
    AllocationResult,
    ClaimConsumer,
    Finding,
    Pod,
    PodClaimRef,
    ResourceClaim,
    StuckObservation,
)

STALE_RESERVATION = "stale_reservation"
DELETION_BLOCKED = "deletion_blocked"
ORPHANED_ALLOCATION = "orphaned_allocation"
UNALLOCATABLE = "unallocatable"
NODE_GONE = "node_gone"
NOT_PREPARED = "not_prepared"
DEVICE_VANISHED = "device_vanished"
DOUBLE_ALLOCATION = "double_allocation"
# Report-only (monitoring/idle.py, added with register_rule): no release action, the device is not shown as stuck.
IDLE_GPU = "idle_gpu"  # listed in claims.models.REPORT_ONLY_RULES

# The kind finding changes are published as on the live-updates channel, and their events.
FINDING_KIND = "Finding"
ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

# Lazy: shown (and sorted by) in the page's language.
RULE_TITLES = {
    STALE_RESERVATION: _("Stale reservation"),
    DELETION_BLOCKED: _("Deletion blocked"),
    ORPHANED_ALLOCATION: _("Orphaned allocation"),
    UNALLOCATABLE: _("Unallocatable"),
    NODE_GONE: _("Node gone or NotReady"),
    NOT_PREPARED: _("Not prepared / binding failed"),
    DEVICE_VANISHED: _("Device vanished"),
    DOUBLE_ALLOCATION: _("Double allocation"),
    IDLE_GPU: _("Idle GPU"),
}

DEFAULTS = {
    "STALE_RESERVATION_GRACE": 120,
    "DELETION_GRACE": 300,
    "ORPHAN_GRACE": 300,
    "PENDING_GRACE": 300,
    "NODE_NOT_READY_GRACE": 300,
    "PREPARE_GRACE": 300,
    "BINDING_TIMEOUT": 600,
    "DEVICE_VANISHED_GRACE": 120,
    "DEBOUNCE_SECONDS": 5,
    "EXPLAIN_PER_RUN": 20,
}

# Which threshold delays each rule (double allocation is an alarm: no grace).
GRACE_KEY = {
    STALE_RESERVATION: "STALE_RESERVATION_GRACE",
    DELETION_BLOCKED: "DELETION_GRACE",
    ORPHANED_ALLOCATION: "ORPHAN_GRACE",
    UNALLOCATABLE: "PENDING_GRACE",
    NODE_GONE: "NODE_NOT_READY_GRACE",
    NOT_PREPARED: "PREPARE_GRACE",
    DEVICE_VANISHED: "DEVICE_VANISHED_GRACE",
    DOUBLE_ALLOCATION: None,
    IDLE_GPU: None,  # the rule's own period (GPUDASH_IDLE_PERIOD) is its grace
}

TERMINAL_PHASES = ("Succeeded", "Failed")


def thresholds():
    """GPUDASH_STUCK merged over the defaults, validated (a bad value names its key)."""
    merged = dict(DEFAULTS)
    for key, value in (getattr(settings, "GPUDASH_STUCK", None) or {}).items():
        try:
            merged[key] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"settings.GPUDASH_STUCK[{key!r}] must be a number of seconds, got {value!r}") from None
        # NaN compares false with every age, so a rule with a NaN grace would never fire: refused too.
        if not math.isfinite(merged[key]) or merged[key] < 0:
            raise ValueError(f"settings.GPUDASH_STUCK[{key!r}] must be 0 or more seconds, got {value!r}")
    return merged


@dataclass
class Candidate:
    rule: str
    claim: ResourceClaim
    subject: str
    # A message (mirror/messages.py), rendered in the reader's language when shown; `summary` keeps
    # its English text for the API. A plain string is taken as it is (no translation).
    summary: str | dict
    severity: str = Finding.Severity.WARNING
    remedy: str = ""
    evidence: dict = field(default_factory=dict)
    # When the condition began, if the objects say so; None = count from the detector's first sighting.
    since: datetime | None = None
    # Override of the rule's grace period (e.g. a binding failure reported by the driver needs none).
    grace: float | None = None

    message: dict = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.summary, dict):
            self.message, self.summary = self.summary, render(self.summary, translate=False)

    @property
    def key(self):
        return (self.rule, self.claim.uid, self.subject)


class Mirror:
    """The parts of one cluster's mirror the rules need, loaded once per run (no per-claim queries)."""

    def __init__(self, cluster):
        self.cluster = cluster
        # `raw` is deferred: parsing 20,000 claims' JSON dominates a run, and only rare cases read it
        # (device status conditions of claims with binding conditions, finish times of finished pods).
        self.claims = list(ResourceClaim.objects.filter(cluster=cluster).defer("raw", "labels"))
        self.claims_by_id = {c.id: c for c in self.claims}
        self.pods = {(p.namespace, p.name): p for p in Pod.objects.filter(cluster=cluster).defer("raw", "labels")}
        self.pods_by_id = {p.id: p for p in self.pods.values()}
        self.consumers = defaultdict(list)
        for c in ClaimConsumer.objects.filter(cluster=cluster):
            self.consumers[c.claim_id].append(c)
        self.results = defaultdict(list)
        for r in AllocationResult.objects.filter(cluster=cluster):
            self.results[r.claim_id].append(r)
        # (namespace, claim name) -> pods whose spec or status names that claim.
        self.referencing_pods = defaultdict(list)
        for ref in PodClaimRef.objects.filter(cluster=cluster).exclude(claim_name=""):
            pod = self.pods_by_id.get(ref.pod_id)
            if pod is not None:
                self.referencing_pods[(ref.namespace, ref.claim_name)].append(pod)
        # The published fleet is inventory's (mirror/published.py): nodes by name, and
        # (driver, pool, device) -> [allow_multiple_allocations of each published copy].
        self.nodes = published.nodes(cluster.pk)
        self.devices = published.devices(cluster.pk)
        self.sync_state = {
            kind: (status, listed)
            for kind, status, listed in SyncState.objects.filter(cluster=cluster).values_list(
                "kind", "status", "last_list_at"
            )
        }

    def kind_complete(self, kind):
        """Can the absence of an object of this kind be trusted? Only once one full list has been applied
        (a relist never drops rows before its final reconcile). No sync state = loaded some other way."""
        if kind not in self.sync_state:
            return True
        status, listed = self.sync_state[kind]
        return listed is not None and status != SyncState.Status.NOT_SERVED

    def live_referencing_pods(self, claim):
        return [
            p for p in self.referencing_pods.get((claim.namespace, claim.name), []) if p.phase not in TERMINAL_PHASES
        ]


def pod_finished_at(pod):
    """When a terminal pod finished: its latest container finish or condition transition."""
    status = pod.status
    times = []
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        times.append(parse_k8s_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")))
    for cond in status.get("conditions") or []:
        times.append(parse_k8s_time(cond.get("lastTransitionTime")))
    times = [t for t in times if t]
    return max(times) if times else None


def claim_ref(claim):
    return {
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "resourceVersion": claim.resource_version,
    }


# --- rules -------------------------------------------------------------------------------------------


def rule_stale_reservation(m, cfg, now):
    """1. reservedFor names a pod that no longer exists (or was replaced), or that has finished."""
    pods_complete = m.kind_complete("Pod")
    for claim in m.claims:
        for consumer in m.consumers.get(claim.id, []):
            if consumer.resource != "pods" or consumer.api_group:
                continue  # other consumer types are never released by the controller either
            pod = m.pods.get((claim.namespace, consumer.name))
            evidence = {"claim": claim_ref(claim), "consumer": {"name": consumer.name, "uid": consumer.uid}}
            if pod is None or pod.uid != consumer.uid:
                if pod is None and not pods_complete:
                    continue
                since = pod.creation_timestamp if pod is not None else None
                summary = (
                    message(
                        gettext_noop("reservedFor names pod %(pod)s (%(uid)s), which no longer exists."),
                        pod=consumer.name,
                        uid=consumer.uid,
                    )
                    if pod is None
                    else message(
                        gettext_noop(
                            "reservedFor names pod %(pod)s (%(uid)s), which was replaced by a new pod (uid %(new_uid)s)."
                        ),
                        pod=consumer.name,
                        uid=consumer.uid,
                        new_uid=pod.uid,
                    )
                )
                evidence["pod"] = None if pod is None else {"uid": pod.uid, "phase": pod.phase}
            elif pod.phase in TERMINAL_PHASES:
                since = pod_finished_at(pod) or pod.synced_at
                summary = message(
                    gettext_noop("reservedFor names pod %(pod)s (%(uid)s), which has finished (phase %(phase)s)."),
                    pod=consumer.name,
                    uid=consumer.uid,
                    phase=pod.phase,
                )
                evidence["pod"] = {"uid": pod.uid, "phase": pod.phase, "node": pod.node_name}
            else:
                continue
            yield Candidate(
                STALE_RESERVATION,
                claim,
                subject=consumer.uid,
                summary=summary,
                remedy="remove_reservations",
                evidence=evidence,
                since=since,
            )


def rule_deletion_blocked(m, cfg, now):
    """2. The claim is being deleted but still carries its finalizer or allocation."""
    for claim in m.claims:
        if not claim.deletion_timestamp or not (claim.finalizers or claim.allocated):
            continue
        reserved = [c.name for c in m.consumers.get(claim.id, [])]
        if reserved:
            remedy, next_step = (
                "",
                message(
                    gettext_noop("still reserved for %(consumers)s; release those first"), consumers=", ".join(reserved)
                ),
            )
        elif claim.allocated:
            remedy, next_step = "deallocate", message(gettext_noop("deallocate it, then the finalizer can go"))
        else:
            remedy, next_step = (
                "finish_deletion",
                message(gettext_noop("the allocation is gone; only the finalizer remains")),
            )
        since = f"{claim.deletion_timestamp:%Y-%m-%d %H:%M:%S}Z"
        yield Candidate(
            DELETION_BLOCKED,
            claim,
            subject="",
            summary=message(
                gettext_noop("Deleting since %(since)s but still allocated: %(next_step)s."),
                since=since,
                next_step=next_step,
            )
            if claim.allocated
            else message(
                gettext_noop("Deleting since %(since)s but still holding finalizers %(finalizers)s: %(next_step)s."),
                since=since,
                finalizers=", ".join(claim.finalizers),
                next_step=next_step,
            ),
            remedy=remedy,
            evidence={
                "claim": claim_ref(claim),
                "finalizers": claim.finalizers,
                "allocated": claim.allocated,
                "reservedFor": reserved,
            },
            since=claim.deletion_timestamp,
        )


def rule_orphaned_allocation(m, cfg, now):
    """3. Allocated, nobody reserved, no live pod references it: devices held for nobody."""
    for claim in m.claims:
        if not claim.allocated or claim.deletion_timestamp or m.consumers.get(claim.id):
            continue
        if m.live_referencing_pods(claim):
            continue
        if not m.kind_complete("Pod"):
            continue
        devices = [str(r) for r in m.results.get(claim.id, [])]
        yield Candidate(
            ORPHANED_ALLOCATION,
            claim,
            subject="",
            summary=message(
                gettext_noop(
                    "Allocated (%(devices)s) with an empty reservedFor and no live pod referencing it: the devices are "
                    "held for nobody."
                ),
                devices=", ".join(devices) or message(gettext_noop("no devices")),
            ),
            remedy="deallocate",
            evidence={"claim": claim_ref(claim), "devices": devices, "node": claim.node_name},
            # Not allocation_timestamp: the condition starts when reservedFor emptied, which only a sighting dates.
            since=None,
        )


def rule_unallocatable(m, cfg, now):
    """4. A pod has been Pending past the grace period and its claim is still unallocated."""
    for claim in m.claims:
        if claim.allocated or claim.deletion_timestamp:
            continue
        for pod in m.live_referencing_pods(claim):
            if pod.phase != "Pending" or pod.node_name:
                continue
            yield Candidate(
                UNALLOCATABLE,
                claim,
                subject=pod.uid,
                # The scheduler's own message stays as the scheduler wrote it.
                summary=message(
                    gettext_noop(
                        "Pod %(pod)s has been Pending since %(since)s and the claim is not allocated: %(scheduler)s."
                    ),
                    pod=pod.name,
                    since=f"{pod.creation_timestamp:%Y-%m-%d %H:%M:%S}Z",
                    scheduler=pod.scheduled_message.rstrip("."),
                )
                if pod.scheduled_message
                else message(
                    gettext_noop("Pod %(pod)s has been Pending since %(since)s and the claim is not allocated."),
                    pod=pod.name,
                    since=f"{pod.creation_timestamp:%Y-%m-%d %H:%M:%S}Z",
                ),
                evidence={
                    "claim": claim_ref(claim),
                    "pod": {
                        "name": pod.name,
                        "uid": pod.uid,
                        "reason": pod.scheduled_reason,
                        "message": pod.scheduled_message,
                    },
                },
                since=pod.creation_timestamp,
            )


def rule_node_gone(m, cfg, now):
    """5. Allocated on a node that no longer exists, or that has been NotReady too long."""
    nodes_complete = m.kind_complete("Node")
    for claim in m.claims:
        if not claim.allocated or not claim.node_name:
            continue
        node = m.nodes.get(claim.node_name)
        if node is None:
            if not nodes_complete:
                continue
            summary = message(gettext_noop("Allocated on node %(node)s, which no longer exists."), node=claim.node_name)
            since, severity = None, Finding.Severity.CRITICAL
        elif node.ready is False:
            summary = message(
                gettext_noop("Allocated on node %(node)s, NotReady since %(since)s."),
                node=claim.node_name,
                since=str(node.ready_changed_at) if node.ready_changed_at else message(gettext_noop("unknown")),
            )
            since, severity = node.ready_changed_at, Finding.Severity.WARNING
        else:
            continue
        reserved = [c.name for c in m.consumers.get(claim.id, [])]
        yield Candidate(
            NODE_GONE,
            claim,
            subject=claim.node_name,
            summary=message(
                gettext_noop("%(finding)s Release only once the pods on it are known to be gone."), finding=summary
            )
            if reserved
            else summary,
            severity=severity,
            remedy="" if reserved else "deallocate",
            evidence={
                "claim": claim_ref(claim),
                "node": claim.node_name,
                "node_exists": node is not None,
                "reservedFor": reserved,
            },
            since=since,
        )


def _conditions_by_device(claim):
    found = {}
    for dev in claim.status.get("devices") or []:
        key = (dev.get("driver"), dev.get("pool"), dev.get("device"))
        found[key] = {c.get("type"): c.get("status") for c in dev.get("conditions") or []}
    return found


def rule_not_prepared(m, cfg, now):
    """6. Binding conditions failed; or the pod never got its devices prepared."""
    for claim in m.claims:
        if not claim.allocated:
            continue
        results = m.results.get(claim.id, [])
        # Only claims whose devices have binding conditions need the (deferred) status JSON.
        needs_status = any(r.binding_conditions or r.binding_failure_conditions for r in results)
        conditions = _conditions_by_device(claim) if needs_status else {}
        allocated_at = claim.allocation_timestamp
        for result in results:
            seen = conditions.get((result.driver, result.pool, result.device), {})
            failed = [c for c in result.binding_failure_conditions if seen.get(c) == "True"]
            subject = f"{result.driver}/{result.pool}/{result.device}"
            evidence = {
                "claim": claim_ref(claim),
                "device": subject,
                "conditions": seen,
                "bindingConditions": result.binding_conditions,
                "bindingFailureConditions": result.binding_failure_conditions,
            }
            if failed:
                yield Candidate(
                    NOT_PREPARED,
                    claim,
                    subject,
                    message(
                        gettext_noop("Binding failed for %(device)s: %(conditions)s is True."),
                        device=subject,
                        conditions=", ".join(failed),
                    ),
                    severity=Finding.Severity.CRITICAL,
                    evidence=evidence,
                    since=allocated_at,
                    grace=0,
                )
            # Conditions still pending past the scheduler's binding timeout: health/findings.py (binding_timeout).
        # A scheduled pod that stays Pending while its claim is reserved: the kubelet cannot prepare the devices.
        for consumer in m.consumers.get(claim.id, []):
            pod = m.pods.get((claim.namespace, consumer.name))
            if pod is None or pod.uid != consumer.uid or pod.phase != "Pending" or not pod.node_name:
                continue
            yield Candidate(
                NOT_PREPARED,
                claim,
                subject=f"pod:{pod.uid}",
                summary=message(
                    gettext_noop(
                        "Pod %(pod)s is bound to %(node)s and reserved the claim, but is still Pending: the kubelet has not "
                        "prepared the devices (check the driver's kubelet plugin on that node)."
                    ),
                    pod=pod.name,
                    node=pod.node_name,
                ),
                evidence={"claim": claim_ref(claim), "pod": {"name": pod.name, "uid": pod.uid, "node": pod.node_name}},
                since=allocated_at or pod.creation_timestamp,
            )


def rule_device_vanished(m, cfg, now):
    """7. An allocation names a device that no slice publishes any more."""
    if not m.kind_complete("ResourceSlice"):
        return
    for claim in m.claims:
        if not claim.allocated:
            continue
        for result in m.results.get(claim.id, []):
            if (result.driver, result.pool, result.device) in m.devices:
                continue
            subject = f"{result.driver}/{result.pool}/{result.device}"
            yield Candidate(
                DEVICE_VANISHED,
                claim,
                subject=subject,
                summary=message(
                    gettext_noop(
                        "Allocated device %(device)s is no longer published in any ResourceSlice (driver removed it, or "
                        "its kubelet plugin went away)."
                    ),
                    device=subject,
                ),
                evidence={"claim": claim_ref(claim), "device": subject, "node": claim.node_name},
            )


def double_allocation_summary(device, claim_names):
    """A message (mirror/messages.py); also rebuilt when shown, with other namespaces' claims unnamed
    (claims/finding_scope.py)."""
    return message(
        gettext_noop(
            "Device %(device)s is allocated to %(count)s claims (%(claims)s) without admin access or shared capacity: "
            "data-integrity alarm."
        ),
        device=device,
        count=len(claim_names),
        claims=", ".join(claim_names),
    )


def rule_double_allocation(m, cfg, now):
    """8. Two claims hold the same device without admin access or shared capacity."""
    holders = defaultdict(list)
    for claim in m.claims:
        if not claim.allocated:
            continue
        for result in m.results.get(claim.id, []):
            if not result.admin_access:
                holders[(result.driver, result.pool, result.device)].append((claim, result))
    for key, held in holders.items():
        claims = {c.uid: c for c, _ in held}
        if len(claims) < 2:
            continue
        shareable = any(m.devices.get(key, []))
        if shareable and all(r.share_id for _, r in held):
            continue  # consumable capacity: distinct shares of one device are legitimate
        subject = "/".join(key)
        names = sorted(f"{c.namespace}/{c.name}" for c in claims.values())
        for claim in claims.values():
            yield Candidate(
                DOUBLE_ALLOCATION,
                claim,
                subject=subject,
                summary=double_allocation_summary(subject, names),
                severity=Finding.Severity.CRITICAL,
                evidence={"claim": claim_ref(claim), "device": subject, "claims": names},
                grace=0,
            )


# The rules each detector run applies, in order. Apps above this one add theirs with register_rule
# (the idle-GPU rule of monitoring/idle.py), so the detector never imports them.
RULES = [
    rule_stale_reservation,
    rule_deletion_blocked,
    rule_orphaned_allocation,
    rule_unallocatable,
    rule_node_gone,
    rule_not_prepared,
    rule_device_vanished,
    rule_double_allocation,
]


# {rule name: scope(summary message, evidence, visible namespaces) -> (message, evidence)}: how a
# registered rule's findings name other namespaces' objects, for claims/finding_scope.py to hide them.
EVIDENCE_SCOPES = {}


def register_rule(rule, titles=None, report_only=(), scope=None):
    """Run `rule(mirror, cfg, now)` -> Candidates after the rules above; registering it again keeps one.
    `titles`: {rule name: lazy title} of the findings it makes (their candidates carry their own grace);
    `report_only`: those of its rule names whose findings do not make a claim stuck;
    `scope`: see EVIDENCE_SCOPES (given copies, it may change them in place)."""
    if rule not in RULES:
        RULES.append(rule)
    for name, title in (titles or {}).items():
        RULE_TITLES[name] = title
        GRACE_KEY.setdefault(name, None)
        if scope is not None:
            EVIDENCE_SCOPES[name] = scope
    REPORT_ONLY_RULES.extend(name for name in report_only if name not in REPORT_ONLY_RULES)


class _Explainer:
    """Engine explanations for 'unallocatable' findings, at most `budget` engine runs per detector run
    (a preview over a big fleet costs real time); the rest are filled in by later runs."""

    DEFERRED = {
        "available": False,
        "deferred": True,
        "message": "Not explained yet: the engine runs for a few findings "
        "per detector run; this one comes on a later run.",
    }

    def __init__(self, cluster, budget):
        self.cluster, self.budget = cluster, budget

    def __call__(self, candidate, finding):
        old = (finding.evidence.get("explanation") if finding else None) or {}
        same_rv = (
            finding is not None
            and (finding.evidence.get("claim") or {}).get("resourceVersion") == candidate.claim.resource_version
        )
        if old and same_rv and not old.get("deferred"):
            return old  # the claim did not change: neither did the answer
        if self.budget <= 0:
            return dict(self.DEFERRED)
        self.budget -= 1
        return _explain_unallocatable(self.cluster, candidate)


def _explain_unallocatable(cluster, candidate):
    """The allocation engine's per-node explanation."""
    from claims.models import Pod
    from claims.preview import run_preview  # imported here: claims.preview imports this app's models

    # The Pending pod itself (its tolerations, selector, priority): the remedies are checked for it.
    pod = Pod.objects.filter(cluster=cluster, uid=candidate.subject).only("raw").first() if candidate.subject else None
    try:
        # Bounded: a detector run makes at most EXPLAIN_PER_RUN of these.
        result = run_preview(
            cluster,
            claim=candidate.claim,
            pod=pod.raw if pod is not None else None,
            with_remedies=True,
            deadline=settings.GPUDASH_ENGINE_LIMITS["STUCK_EXPLAIN_DEADLINE"],
        )
    except Exception as exc:  # the engine's failure must not stop the other rules
        return {"available": False, "message": f"The allocation engine could not explain it: {exc}"}
    return summarize_preview(result)


def summarize_preview(result, max_nodes=20):
    """The engine's answer, trimmed for storage: the summary and a few nodes (fitting ones first)."""
    result = _jsonable(result)
    nodes = sorted(result.get("nodes") or [], key=lambda n: (not n.get("fits"), n.get("node") or ""))
    out = {
        "available": True,
        "summary": result.get("summary") or {},
        "nodes": nodes[:max_nodes],
        "node_count": len(nodes),
    }
    for key in ("verdict", "remedies"):  # computed over every node (dra.verdict, dra.remedies): kept whole
        if key in result:
            out[key] = result[key]
    return out


def _jsonable(value):
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    elif hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__dict__"):
        return _jsonable({k: v for k, v in vars(value).items() if not k.startswith("_")})
    return str(value)


def candidates(cluster, now=None, cfg=None):
    now = now or timezone.now()
    cfg = cfg or thresholds()
    mirror = Mirror(cluster)
    for rule in RULES:
        yield from rule(mirror, cfg, now)


def _chunks(ids, size=5000):
    # Keeps `id IN (...)` well under the database's bound-parameter limits on big clusters.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def detect(cluster, now=None):
    """Run every rule for one cluster and reconcile the Finding rows. Returns counts."""
    now = now or timezone.now()
    cfg = thresholds()
    found = {}
    for cand in candidates(cluster, now, cfg):
        found.setdefault(cand.key, cand)
    opened = updated = cleared = 0
    explainer = _Explainer(cluster, int(cfg.get("EXPLAIN_PER_RUN", 20)))
    with transaction.atomic():
        observations = {
            (o.rule, o.claim_uid, o.subject): o
            for o in StuckObservation.objects.select_for_update().filter(cluster=cluster)
        }
        active = {
            (f.rule, f.claim_uid, f.subject): f
            for f in Finding.objects.select_for_update().filter(cluster=cluster).active()
        }
        unseen = [
            StuckObservation(cluster=cluster, rule=k[0], claim_uid=k[1], subject=k[2], since=now)
            for k, cand in found.items()
            if cand.since is None and k not in observations
        ]
        StuckObservation.objects.bulk_create(unseen, batch_size=1000)
        observations.update({(o.rule, o.claim_uid, o.subject): o for o in unseen})
        due = {}
        for key, cand in found.items():
            since = cand.since if cand.since is not None else observations[key].since
            grace = cand.grace if cand.grace is not None else cfg[GRACE_KEY[cand.rule]] if GRACE_KEY[cand.rule] else 0
            if now - since >= timedelta(seconds=grace) or key in active:
                cand.evidence["since"] = since.isoformat()
                due[key] = cand
        # A condition that ended forgets its first sighting: if it comes back, its grace starts again.
        ended = [o.id for k, o in observations.items() if k not in found or found[k].since is not None]
        for chunk in _chunks(ended):
            StuckObservation.objects.filter(id__in=chunk).delete()
        changed, still, new_rows = [], [], []
        for key, cand in due.items():
            finding = active.get(key)
            if finding is None:
                if cand.rule == UNALLOCATABLE:
                    cand.evidence["explanation"] = explainer(cand, None)
                new_rows.append(
                    Finding(
                        cluster=cluster,
                        rule=cand.rule,
                        severity=cand.severity,
                        namespace=cand.claim.namespace,
                        claim_name=cand.claim.name,
                        claim_uid=cand.claim.uid,
                        subject=cand.subject,
                        summary=cand.summary,
                        summary_message=cand.message,
                        evidence=cand.evidence,
                        remedy=cand.remedy,
                        first_seen=now,
                        last_seen=now,
                    )
                )
                opened += 1
            else:
                if cand.rule == UNALLOCATABLE:
                    cand.evidence["explanation"] = explainer(cand, finding)
                new = (cand.severity, cand.summary, cand.message, cand.evidence, cand.remedy, cand.claim.name)
                if new != (
                    finding.severity,
                    finding.summary,
                    finding.summary_message,
                    finding.evidence,
                    finding.remedy,
                    finding.claim_name,
                ):
                    (
                        finding.severity,
                        finding.summary,
                        finding.summary_message,
                        finding.evidence,
                        finding.remedy,
                        finding.claim_name,
                    ) = new
                    changed.append(finding)
                still.append(finding.id)
                updated += 1
        Finding.objects.bulk_create(new_rows, batch_size=500)
        if changed:
            Finding.objects.bulk_update(
                changed, ["severity", "summary", "summary_message", "evidence", "remedy", "claim_name"], batch_size=500
            )
        for chunk in _chunks(still):
            Finding.objects.filter(id__in=chunk).update(last_seen=now)
        gone = [f for key, f in active.items() if key not in due]
        for chunk in _chunks([f.id for f in gone]):
            cleared += Finding.objects.filter(id__in=chunk).update(cleared_at=now)
        _publish_findings(
            cluster, [(ADDED, f) for f in new_rows] + [(MODIFIED, f) for f in changed] + [(DELETED, f) for f in gone]
        )
    OpsCounter.add("detector_runs", cluster.name)  # gpudash_detector_runs_total on /metrics
    return {"opened": opened, "updated": updated, "cleared": cleared, "candidates": len(found)}


def _publish_findings(cluster, events):
    """Tell the live pages (stuck claims, claim detail, the navigation badge) once the findings commit.

    Sent like the watchers' changes, as kind "Finding" with the claim's namespace, so namespace-scoped
    viewers get them redacted like any other change.
    """
    from mirror.sync.publish import Change, publish_on_commit

    publish_on_commit(
        [
            Change(cluster.pk, cluster.name, FINDING_KIND, event, f.namespace, f.claim_name, f.claim_uid)
            for event, f in events
        ]
    )


def detect_all(now=None):
    from mirror.models import Cluster

    return {c.name: detect(c, now) for c in Cluster.objects.filter(enabled=True)}
