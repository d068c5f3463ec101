"""Health findings: rules of the stuck-claim detector (claims/stuck.py runs them with the others, so they
open and clear the same way), each with its evidence and the next step to take.

* unhealthy_device: an allocated device is unhealthy (a pod's health report, or a NoSchedule taint)
  while pods still run on it. A NoExecute taint is left to taint_eviction, which says more.
* device_not_ready: "prepared but not ready": the driver's device status says Ready=False long after
  the allocation (GPUDASH_HEALTH["NOT_READY_GRACE"]).
* taint_eviction: a NoExecute taint (ResourceSlice or DeviceTaintRule) on an allocated device that the
  claim's request does not tolerate: the device taint eviction controller deletes the pods using it.
  Tolerations are evaluated as the allocator does (dra.model.Variant.tolerates); a toleration with
  tolerationSeconds only delays the eviction, and is said so.
* binding_timeout: binding conditions (allocation.devices.results[].bindingConditions) still not True
  past the scheduler's binding timeout (GPUDASH_STUCK["BINDING_TIMEOUT"], upstream's
  DynamicResourcesArgs.bindingTimeout, 600 s by default). Upstream, the scheduler's PreBind waits that
  long, then gives the allocation up and schedules the pod again; an allocation still waiting past it
  means that did not happen (or the timeout is configured longer).

unhealthy_device and taint_eviction only report (nothing to release: the claim is not stuck, its
device is); device_not_ready and binding_timeout make the claim stuck.
"""

import re
from collections import defaultdict

from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from claims.models import ClaimDeviceStatus, Finding
from claims.stuck import Candidate, claim_ref
from dra.errors import InputError
from dra.model import Variant
from mirror.messages import english, message

from . import conf, notion
from .models import UNHEALTHY, DeviceHealth

UNHEALTHY_DEVICE = "unhealthy_device"
DEVICE_NOT_READY = "device_not_ready"
TAINT_EVICTION = "taint_eviction"
BINDING_TIMEOUT = "binding_timeout"


OTHER_POD = "a pod in another namespace"
# A pod report's reason as stored in English (notion.report_signal): "pod NS/NAME (container C) reports it HEALTH...".
_POD_REPORT = re.compile(r"^pod ([^/\s]+)/\S+ \(container [^)]*\) reports it (\w+)")


def scope_evidence(msg, evidence, visible):
    """A health finding's summary message and evidence as a reader of namespaces `visible` may see them
    (claims/finding_scope.py calls it with copies): a device is shared across namespaces (admin access,
    shared partitions), so its reasons may quote another namespace's pod report; those say "a pod in
    another namespace reports it ...", without the pod's name or message, as on the device page."""
    params = (msg or {}).get("params") or {}
    if isinstance(params.get("reasons"), list):
        params["reasons"] = [notion.scoped_reason(r, visible) if isinstance(r, dict) else r for r in params["reasons"]]
    if isinstance(evidence.get("reasons"), list):
        evidence["reasons"] = [_scoped_english_reason(r, visible) for r in evidence["reasons"]]
    for key in ("pods", "reservedFor"):
        if isinstance(evidence.get(key), list):
            evidence[key] = [p if "/" not in p or p.split("/", 1)[0] in visible else OTHER_POD for p in evidence[key]]
    if isinstance(params.get("pods"), str) and isinstance(evidence.get("pods"), list):
        params["pods"] = ", ".join(evidence["pods"])
    return msg, evidence


def _scoped_english_reason(text, visible):
    m = _POD_REPORT.match(text) if isinstance(text, str) else None
    if m is None or m.group(1) in visible:
        return text
    return english(notion.scoped_reason({"params": {"pod": "-/-", "health": m.group(2)}}, set()))


def _live_pods(m, claim):
    return sorted(f"{p.namespace}/{p.name}" for p in m.live_referencing_pods(claim))


def _health_by_device(cluster):
    return {(h.driver, h.pool, h.device): h for h in DeviceHealth.objects.filter(cluster=cluster)}


def _held(m, keys):
    """[(claim, result)] of the allocated claims holding any of `keys`."""
    for claim in m.claims:
        if not claim.allocated:
            continue
        for result in m.results.get(claim.id, []):
            if (result.driver, result.pool, result.device) in keys:
                yield claim, result


def rule_unhealthy_device(m, cfg, now):
    health = {k: h for k, h in _health_by_device(m.cluster).items() if h.state == UNHEALTHY}
    for claim, result in _held(m, health):
        h = health[(result.driver, result.pool, result.device)]
        reasons = [
            r for r in h.reasons if r.get("state") == UNHEALTHY and (r.get("taint") or {}).get("effect") != "NoExecute"
        ]
        pods = _live_pods(m, claim)
        if not reasons or not pods:
            continue
        subject = f"{result.driver}/{result.pool}/{result.device}"
        yield Candidate(
            UNHEALTHY_DEVICE,
            claim,
            subject=subject,
            summary=message(
                gettext_noop(
                    "Device %(device)s is unhealthy (%(reasons)s) while pods %(pods)s still run on it: move the work to "
                    "healthy devices (delete the pods so that their controllers re-create them with new claims), and "
                    "check the driver on node %(node)s."
                ),
                device=subject,
                reasons=[r["text"] for r in reasons],
                pods=", ".join(pods),
                node=h.node_name or "-",
            ),
            severity=Finding.Severity.CRITICAL,
            evidence={
                "claim": claim_ref(claim),
                "device": subject,
                "node": h.node_name,
                "health": h.state,
                "reasons": [r.get("english", "") for r in reasons],
                "pods": pods,
            },
            since=min(h.since, now),  # never in the future (the sync's clock and the detector's `now`)
            grace=0,
        )


def rule_device_not_ready(m, cfg, now):
    grace = conf.setting("NOT_READY_GRACE")
    rows = ClaimDeviceStatus.objects.filter(cluster=m.cluster, ready=False).only(
        "claim_id", "driver", "pool", "device", "share_id", "conditions"
    )
    for row in rows:
        claim = m.claims_by_id.get(row.claim_id)
        if claim is None or not claim.allocated:
            continue
        ready = next((c for c in row.conditions if isinstance(c, dict) and c.get("type") == "Ready"), {})
        subject = f"{row.driver}/{row.pool}/{row.device}" + (f"/{row.share_id}" if row.share_id else "")
        detail = ": ".join(x for x in (ready.get("reason"), ready.get("message")) if x) or "-"
        pods = _live_pods(m, claim)
        yield Candidate(
            DEVICE_NOT_READY,
            claim,
            subject=subject,
            summary=message(
                gettext_noop(
                    "Prepared but not ready: the driver reports device %(device)s Ready=False (%(detail)s) although it "
                    "was allocated at %(allocated)s. Check the driver's kubelet plugin on node %(node)s, and its logs for "
                    "this claim."
                ),
                device=subject,
                detail=detail,
                allocated=f"{claim.allocation_timestamp:%Y-%m-%d %H:%M:%S}Z" if claim.allocation_timestamp else "-",
                node=claim.node_name or "-",
            ),
            evidence={
                "claim": claim_ref(claim),
                "device": subject,
                "node": claim.node_name,
                "ready": {k: ready.get(k) for k in ("status", "reason", "message", "lastTransitionTime") if k in ready},
                "pods": pods,
            },
            since=claim.allocation_timestamp,
            grace=grace,
        )


def _variant(claim, request):
    """The Variant (dra.model) of `request` ("req" or "req/sub") in the claim's spec, or None."""
    name, _, sub = request.partition("/")
    for req in (claim.spec.get("devices") or {}).get("requests") or []:
        if not isinstance(req, dict) or req.get("name") != name:
            continue
        raw = req.get("exactly") or req  # v1beta1 kept the fields on the request itself
        if sub:
            raw = next((s for s in req.get("firstAvailable") or [] if isinstance(s, dict) and s.get("name") == sub), {})
        try:
            return Variant(name, sub, raw, f"request {request}")
        except InputError:
            return None
    return None


def _toleration_seconds(variant, taint):
    """Seconds a tolerating request keeps the device (None: for ever)."""
    for tol in variant.tolerations:
        if Variant(variant.request, variant.sub, {"tolerations": [tol]}, "").tolerates(taint):
            if tol.get("tolerationSeconds") is None:
                return None
            return tol["tolerationSeconds"]
    return None


def rule_taint_eviction(m, cfg, now):
    health = _health_by_device(m.cluster)
    no_execute = {
        key: [r for r in h.reasons if (r.get("taint") or {}).get("effect") == "NoExecute"] for key, h in health.items()
    }
    no_execute = {k: v for k, v in no_execute.items() if v}
    variants = {}
    for claim, result in _held(m, no_execute):
        pods = _live_pods(m, claim)
        if not pods:
            continue
        if (claim.id, result.request) not in variants:
            variants[(claim.id, result.request)] = _variant(claim, result.request)
        variant = variants[(claim.id, result.request)]
        for reason in no_execute[(result.driver, result.pool, result.device)]:
            taint = reason["taint"]
            seconds = None
            if variant is not None and variant.tolerates(taint):
                seconds = _toleration_seconds(variant, taint)
                if seconds is None:
                    continue  # tolerated for ever: nobody is evicted
            device = f"{result.driver}/{result.pool}/{result.device}"
            params = {"device": device, "taint": reason["text"], "pods": ", ".join(pods), "request": result.request}
            summary = (
                message(
                    gettext_noop(
                        "%(taint)s on device %(device)s will evict pods %(pods)s once request %(request)s's toleration "
                        "of %(seconds)s s runs out. Move the work to other devices, or remove the taint if it was set "
                        "by mistake."
                    ),
                    seconds=seconds,
                    **params,
                )
                if seconds is not None
                else message(
                    gettext_noop(
                        "%(taint)s on device %(device)s evicts pods %(pods)s: request %(request)s does not tolerate it. "
                        "Move the work to other devices, or remove the taint if it was set by mistake."
                    ),
                    **params,
                )
            )
            yield Candidate(
                TAINT_EVICTION,
                claim,
                subject=f"{device}:{reason.get('rule') or ''}:{taint.get('key') or ''}",
                summary=summary,
                severity=Finding.Severity.CRITICAL,
                evidence={
                    "claim": claim_ref(claim),
                    "device": device,
                    "taint": taint,
                    "source": reason.get("source"),
                    "rule": reason.get("rule") or "",
                    "request": result.request,
                    "toleration_seconds": seconds,
                    "pods": pods,
                },
                since=min(health[(result.driver, result.pool, result.device)].since, now),
                grace=0,
            )


def rule_binding_timeout(m, cfg, now):
    timeout = cfg["BINDING_TIMEOUT"]
    waiting = [
        (claim, r) for claim in m.claims if claim.allocated for r in m.results.get(claim.id, []) if r.binding_conditions
    ]
    if not waiting:
        return
    statuses = defaultdict(dict)
    for row in ClaimDeviceStatus.objects.filter(claim_id__in={c.id for c, _r in waiting}).only(
        "claim_id", "driver", "pool", "device", "conditions"
    ):
        for c in row.conditions:
            if isinstance(c, dict) and c.get("type"):
                statuses[(row.claim_id, row.driver, row.pool, row.device)][c["type"]] = c
    for claim, result in waiting:
        seen = statuses.get((claim.id, result.driver, result.pool, result.device), {})
        if any((seen.get(c) or {}).get("status") == "True" for c in result.binding_failure_conditions):
            continue  # a failure: the stuck detector's not_prepared rule says so
        pending = [c for c in result.binding_conditions if (seen.get(c) or {}).get("status") != "True"]
        if not pending:
            continue
        device = f"{result.driver}/{result.pool}/{result.device}"
        said = [
            f"{c}: {seen[c].get('status')}"
            + (
                f" ({': '.join(x for x in (seen[c].get('reason'), seen[c].get('message')) if x)})"
                if seen[c].get("reason") or seen[c].get("message")
                else ""
            )
            for c in pending
            if c in seen
        ]
        pods = sorted(c.name for c in m.consumers.get(claim.id, []))
        yield Candidate(
            BINDING_TIMEOUT,
            claim,
            subject=device,
            summary=message(
                gettext_noop(
                    "Binding conditions %(conditions)s of device %(device)s are still not True past the scheduler's "
                    "binding timeout (%(timeout)s s after the allocation at %(allocated)s; the driver says: %(said)s). "
                    "The scheduler should have given the allocation up and scheduled %(pods)s again: check the "
                    "controller that sets these conditions, then the scheduler (is it running, and is its "
                    "DynamicResources bindingTimeout longer?)."
                ),
                conditions=", ".join(pending),
                device=device,
                timeout=f"{timeout:g}",
                allocated=f"{claim.allocation_timestamp:%Y-%m-%d %H:%M:%S}Z" if claim.allocation_timestamp else "-",
                said="; ".join(said) or message(gettext_noop("nothing yet")),
                pods=", ".join(pods) or message(gettext_noop("its pod")),
            ),
            evidence={
                "claim": claim_ref(claim),
                "device": device,
                "pending": pending,
                "conditions": {c: seen[c] for c in pending if c in seen},
                "bindingConditions": result.binding_conditions,
                "bindingFailureConditions": result.binding_failure_conditions,
                "binding_timeout_seconds": timeout,
                "reservedFor": pods,
            },
            since=claim.allocation_timestamp,
            grace=timeout,
        )


RULES = [rule_unhealthy_device, rule_device_not_ready, rule_taint_eviction, rule_binding_timeout]
RULE_INFO = {
    rule_unhealthy_device: {
        "titles": {UNHEALTHY_DEVICE: _("Unhealthy device in use")},
        "report_only": (UNHEALTHY_DEVICE,),
        "scope": scope_evidence,
    },
    rule_device_not_ready: {"titles": {DEVICE_NOT_READY: _("Prepared but not ready")}, "scope": scope_evidence},
    rule_taint_eviction: {
        "titles": {TAINT_EVICTION: _("Taint evicts pods")},
        "report_only": (TAINT_EVICTION,),
        "scope": scope_evidence,
    },
    rule_binding_timeout: {"titles": {BINDING_TIMEOUT: _("Binding conditions past timeout")}, "scope": scope_evidence},
}
