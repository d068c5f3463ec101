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
buildResourceHealth). The join to devices is claims' PodResourceHealth queryset with_devices() (docs/device-health.md):
the fallback form names the device, a CDI ID goes through its claim's allocation results; a report that
fits no device is left out here (the pod page still lists it).
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


def report_devices(reports):
    """[(report, pod, device key or None)] for a queryset of PodResourceHealth rows (with their pods),
    joined to devices by its with_devices() (claims: the one join of the project)."""
    return [(r, r.pod, r.device_key) for r in reports.with_devices()]


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


def gather(cluster_id, taints_of=None):
    """{(driver, pool, device): (state, reasons, node)} for every device of the cluster that is not healthy.

    `taints_of`: the stored DeviceHealth rows, when only pods or claims changed: their taint reasons are
    taken as they are instead of reading every device's taints again (a scan of the device table)."""
    if taints_of is not None:
        signals, nodes = defaultdict(list), {}
        for key, row in taints_of.items():
            kept = [r for r in row.reasons if r.get("source") in (SLICE_TAINT, TAINT_RULE)]
            if kept:
                signals[key].extend(kept)
                nodes[key] = row.node_name
        return _with_reports(cluster_id, signals, nodes)
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
    return _with_reports(cluster_id, signals, nodes)


def _with_reports(cluster_id, signals, nodes):
    for report, pod, key in report_devices(troubled_reports(cluster_id)):
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
            "cluster_id",
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


def scoped_reason(text, scope):
    """A reason's message as a reader limited to `scope` (namespaces; None = all) may see it: a pod
    report of another namespace says that a pod reports it, not which pod, nor its message."""
    params = (text or {}).get("params") or {}
    pod = params.get("pod")
    if scope is None or not pod or pod.split("/", 1)[0] in scope:
        return text
    return message(gettext_noop("a pod in another namespace reports it %(health)s"), health=params.get("health", ""))
