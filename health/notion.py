"""Device health as one notion: healthy, unhealthy, unknown or degraded.

A device's health comes from three kinds of signal:

* pod health reports (KEP-4680: `status.containerStatuses[].allocatedResourcesStatus[]`, mirrored as
  claims.PodResourceHealth) of pods still running: Unhealthy -> unhealthy, Unknown -> unknown,
  Healthy -> nothing to say;
* taints the driver publishes on the device in its ResourceSlice: effect NoSchedule or NoExecute ->
  unhealthy (the device is kept from new claims, or emptied), effect None -> degraded (a note for
  admins, nothing is blocked; any other effect counts as None);
* DeviceTaintRules, matched to devices the way the scheduler does it (dra/taintrules.py), same effects.

Precedence, the first that applies wins: unhealthy > degraded > unknown > healthy. "healthy" means that
nothing reports trouble (most drivers only report on allocated devices); a degraded note outranks an
"Unknown" report because it is something an admin said, where Unknown says only that the kubelet lost
the driver's health stream. Every signal is kept as a reason, worst first.

Resource IDs of a report name the device the kubelet prepared: the first CDI device ID the driver
returned ("vendor/class=name"), else "<driver>/<pool>/<device>" (kubelet cm/dra/manager.go,
buildResourceHealth). The "<driver>/<pool>/<device>" form names the device itself (claims.devicestatus reads it so); a
CDI ID is joined to a device of its claim's allocation results for its request by the device name it ends in (the name after "=",
equal to the device or ending in "-<device>" / "_<device>", the longest such name); else, when the request
was given exactly one device, that one. A report that fits none is left out (shown on the pod page only).
"""

from collections import defaultdict
from types import SimpleNamespace

from django.apps import apps
from django.utils.translation import gettext_noop

from dra.model import BLOCKING_TAINT_EFFECTS
from dra.model import Device as EngineDevice
from dra.taintrules import RuleMatcher
from mirror.messages import english, message

from .models import DEGRADED, HEALTHY, POD_REPORT, SLICE_TAINT, STATES, TAINT_RULE, UNHEALTHY, UNKNOWN

TERMINAL_PHASES = ("Succeeded", "Failed")
REPORT_STATES = {"Unhealthy": UNHEALTHY, "Unknown": UNKNOWN}


def taint_state(taint):
    return UNHEALTHY if (taint or {}).get("effect") in BLOCKING_TAINT_EFFECTS else DEGRADED


def taint_text(taint):
    t = taint or {}
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key') or ''}{value}:{t.get('effect') or 'None'}"


def taint_signal(taint, source, rule=""):
    params = {"taint": taint_text(taint)}
    if source == TAINT_RULE:
        text = message(gettext_noop("taint %(taint)s from DeviceTaintRule %(rule)s"), rule=rule, **params)
    else:
        text = message(gettext_noop("taint %(taint)s in its ResourceSlice"), **params)
    return {"state": taint_state(taint), "source": source, "text": text, "taint": dict(taint or {}), "rule": rule}


def report_signal(report, pod):
    health = report.health
    params = {"pod": f"{pod.namespace}/{pod.name}", "health": health, "container": report.container}
    if report.message:
        text = message(
            gettext_noop("pod %(pod)s (container %(container)s) reports it %(health)s: %(detail)s"),
            detail=report.message,
            **params,
        )
    else:
        text = message(gettext_noop("pod %(pod)s (container %(container)s) reports it %(health)s"), **params)
    return {"state": REPORT_STATES[health], "source": POD_REPORT, "text": text, "pod": params["pod"]}


def decide(signals):
    """(state, reasons worst first) of one device's signals; no signal: healthy."""
    if not signals:
        return HEALTHY, []
    ordered = sorted(signals, key=lambda s: STATES.index(s["state"]))
    return ordered[0]["state"], ordered


def device_of_resource(resource_id, results):
    """The (driver, pool, device) of `results` (one claim request's allocation results) a report's
    resource ID names, or None. See the module's docstring for the forms."""
    keys = [tuple(k) for k in results]
    for key in keys:
        if resource_id == "/".join(key):
            return key
    name = resource_id.rsplit("=", 1)[-1] if "=" in resource_id else resource_id.rsplit("/", 1)[-1]
    fits = [k for k in keys if name == k[2] or name.endswith((f"-{k[2]}", f"_{k[2]}"))]
    if fits:
        return max(fits, key=lambda k: len(k[2]))
    return keys[0] if len(keys) == 1 else None


def report_devices(cluster_id, reports):
    """[(report, pod, device key or None)] for PodResourceHealth rows (with their pods loaded).

    The report's ResourceClaim is its `resource_claim_name` (the sync resolved the pod-level name); a
    report naming "<driver>/<pool>/<device>" is taken as it says, a CDI ID through the allocation."""
    AllocationResult = apps.get_model("claims", "AllocationResult")
    reports = list(reports)
    wanted = {(r.namespace, r.resource_claim_name) for r in reports if r.resource_claim_name and not r.device}
    results = defaultdict(list)  # (namespace, claim) -> [(request, key)]
    if wanted:
        for ns, claim, request, driver, pool, device in AllocationResult.objects.filter(
            cluster_id=cluster_id, claim__name__in={c for _, c in wanted}
        ).values_list("claim__namespace", "claim__name", "request", "driver", "pool", "device"):
            if (ns, claim) in wanted:
                results[(ns, claim)].append((request, (driver, pool, device)))
    out = []
    for report in reports:
        if report.device:
            out.append((report, report.pod, (report.driver, report.pool, report.device)))
            continue
        of_request = [
            key
            for request, key in results.get((report.namespace, report.resource_claim_name), [])
            if not report.request or request == report.request or request.startswith(f"{report.request}/")
        ]
        out.append((report, report.pod, device_of_resource(report.resource_id, of_request) if of_request else None))
    return out


def _rule_devices(cluster_id, raw_rules):
    """[(rule name, taint, (driver, pool, device, node))] for the DeviceTaintRules' selected devices."""
    Device = apps.get_model("inventory", "Device")
    DeviceClass = apps.get_model("inventory", "DeviceClass")
    classes = None
    out = []
    for raw in raw_rules:
        sel = (raw.get("spec") or {}).get("deviceSelector") or {}
        if sel.get("deviceClassName") and classes is None:
            classes = {
                c.name: SimpleNamespace(selectors=(c.raw.get("spec") or {}).get("selectors") or [])
                for c in DeviceClass.objects.filter(cluster_id=cluster_id).only("name", "raw")
            }
        matcher = RuleMatcher(raw, classes or {})
        if not matcher.usable:
            continue
        rows = Device.objects.filter(cluster_id=cluster_id)
        for field, value in (("driver", matcher.driver), ("pool", matcher.pool), ("name", matcher.device)):
            if value:
                rows = rows.filter(**{field: value})
        if matcher.exprs:  # CEL selectors (pre-1.35 rules): the engine's view of each candidate device
            for d in rows.only("driver", "pool", "name", "node_name", "raw"):
                dev = EngineDevice(SimpleNamespace(driver=d.driver, pool=d.pool), d.raw or {"name": d.name})
                if matcher.selects(dev):
                    out.append((matcher.name, matcher.taint, (d.driver, d.pool, d.name, d.node_name)))
        else:
            for key in rows.values_list("driver", "pool", "name", "node_name"):
                out.append((matcher.name, matcher.taint, key))
    return out


def gather(cluster_id):
    """{(driver, pool, device): (state, reasons, node)} for every device of the cluster that is not healthy."""
    Device = apps.get_model("inventory", "Device")
    DeviceTaintRule = apps.get_model("inventory", "DeviceTaintRule")
    signals, nodes = defaultdict(list), {}
    for driver, pool, name, node, taints in (
        Device.objects.filter(cluster_id=cluster_id)
        .exclude(taints=[])
        .values_list("driver", "pool", "name", "node_name", "taints")
    ):
        nodes[(driver, pool, name)] = node
        for taint in taints or []:
            signals[(driver, pool, name)].append(taint_signal(taint, SLICE_TAINT))
    raw_rules = list(DeviceTaintRule.objects.filter(cluster_id=cluster_id).values_list("raw", flat=True))
    for rule, taint, (driver, pool, name, node) in _rule_devices(cluster_id, raw_rules):
        nodes[(driver, pool, name)] = node
        signals[(driver, pool, name)].append(taint_signal(taint, TAINT_RULE, rule))
    for report, pod, key in report_devices(cluster_id, troubled_reports(cluster_id)):
        if key is not None:
            nodes.setdefault(key, pod.node_name)
            signals[key].append(report_signal(report, pod))
    out = {}
    for key, found in signals.items():
        state, reasons = decide(found)
        if state != HEALTHY:
            out[key] = (state, reasons, nodes.get(key, ""))
    return out


def troubled_reports(cluster_id):
    """Unhealthy and Unknown reports of pods not finished (a finished pod's report is history)."""
    PodResourceHealth = apps.get_model("claims", "PodResourceHealth")
    return (
        PodResourceHealth.objects.filter(cluster_id=cluster_id, health__in=tuple(REPORT_STATES))
        .exclude(pod__phase__in=TERMINAL_PHASES)
        .select_related("pod")
        .only(
            "pod_id",
            "namespace",
            "container",
            "claim_name",
            "resource_claim_name",
            "driver",
            "pool",
            "device",
            "request",
            "resource_id",
            "health",
            "message",
            "pod__namespace",
            "pod__name",
            "pod__node_name",
            "pod__phase",
        )
        .order_by("id")
    )


def main_reason(reasons):
    """(source, English text) of the worst reason."""
    if not reasons:
        return "", ""
    return reasons[0]["source"], english(reasons[0]["text"])
