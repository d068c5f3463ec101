"""Readiness lines about device status and health (issue 35), beside checks 1 and 3 of ops/readiness.py:

- whether the cluster serves the fields drivers and kubelets report into: ResourceClaim status.devices
  (DRAResourceClaimDeviceStatus), the pod's allocatedResourcesStatus (ResourceHealthStatus, its message:
  ResourceHealthStatusMessage), device taints and DeviceTaintRules; from the API server's
  kubernetes_feature_enabled metric, else from what objects carry and what is served, else the version's
  default (said as such);
- which drivers report device status and health (check 4's line);
- whether each driver's service account may write claim status, and no more: update/patch on
  resourceclaims/status, plus, where DRAResourceClaimGranularStatusAuthorization is on (beta, on by
  default from v1.36), the synthetic resourceclaims/driver subresource named after the driver with the
  associated-node: verbs; cluster-wide writes on resourceclaims themselves, the binding subresource or
  wildcards are flagged.

What drivers and kubelets report is read from the mirrored rows (claims.ClaimDeviceStatus,
claims.PodResourceHealth), never from the raw objects: one source for both lines, the same the pages use.
"""

import re

from django.utils.translation import gettext, gettext_lazy

from claims.models import AllocationResult, ClaimDeviceStatus, PodResourceHealth
from mirror.kube import KubeError

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"

# Gate -> [(minor version from which, stage, on by default)], from the v1.36 feature list
# (pkg/features/kube_features.go) and v1.37's graduations; GA gates cannot be turned off.
DEFAULTS = {
    "DRAResourceClaimDeviceStatus": [(32, "ALPHA", False), (33, "BETA", True), (37, "GA", True)],
    "ResourceHealthStatus": [(31, "ALPHA", False), (36, "BETA", True), (37, "GA", True)],
    "ResourceHealthStatusMessage": [(36, "BETA", True)],
    "DRADeviceTaints": [(33, "ALPHA", False), (36, "BETA", True), (37, "GA", True)],
    "DRADeviceTaintRules": [(35, "ALPHA", False), (36, "BETA", False), (37, "GA", True)],
    "DRAResourceClaimGranularStatusAuthorization": [(36, "BETA", True)],
}
# What each gate lets the cluster serve (the line's subject).
FIELDS = {
    "DRAResourceClaimDeviceStatus": gettext_lazy(
        "ResourceClaim status.devices (drivers' device conditions, data and network data)"
    ),
    "ResourceHealthStatus": gettext_lazy("device health in pod status (containerStatuses[].allocatedResourcesStatus)"),
    "ResourceHealthStatusMessage": gettext_lazy("the message of a device health report"),
    "DRADeviceTaints": gettext_lazy("device taints in ResourceSlices"),
    "DRADeviceTaintRules": gettext_lazy("DeviceTaintRules"),
    "DRAResourceClaimGranularStatusAuthorization": gettext_lazy(
        "per-driver authorization of status.devices writes (resourceclaims/driver)"
    ),
}
GRANULAR = "DRAResourceClaimGranularStatusAuthorization"


def minor_version(version):
    """36 of "v1.36.2-gke.100"; None when the version is unknown or not 1.x."""
    m = re.match(r"^v?1\.(\d+)", version or "")
    return int(m.group(1)) if m else None


def default_for(gate, minor):
    """(stage, on by default) of a gate in Kubernetes 1.<minor>; None before the gate existed."""
    found = None
    for since, stage, on in DEFAULTS[gate]:
        if minor is not None and minor >= since:
            found = (stage, on)
    return found


def reported(cluster):
    """What drivers and kubelets report in the cluster, from the rows: {"claims": claims with device status
    entries, "pods": pods with device health reports, "messages": whether a report carries a message,
    "status_drivers", "health_drivers": the drivers reporting each}."""
    status = ClaimDeviceStatus.objects.filter(cluster=cluster)
    health = PodResourceHealth.objects.filter(cluster=cluster)
    health_drivers = set(health.exclude(driver="").values_list("driver", flat=True).distinct())
    # CDI resource IDs name no driver: the claims the reports belong to do.
    by_claim = set(
        health.filter(driver="")
        .exclude(resource_claim_name="")
        .values_list("namespace", "resource_claim_name")
        .distinct()
    )
    if by_claim:
        for ns, name, driver in AllocationResult.objects.filter(
            cluster=cluster, claim__name__in={n for _, n in by_claim}
        ).values_list("claim__namespace", "claim__name", "driver"):
            if (ns, name) in by_claim:
                health_drivers.add(driver)
    return {
        "claims": status.values("claim_id").distinct().count(),
        "pods": health.values("pod_id").distinct().count(),
        "messages": health.exclude(message="").exists(),
        "status_drivers": set(status.values_list("driver", flat=True).distinct()),
        "health_drivers": health_drivers,
    }


def evidence(cluster, served_kinds):
    """{gate: what shows it on}: a field the API server drops while its gate is off, reported in the
    cluster (claims with device status entries, pods with device health reports), or a kind that is served."""
    proof = {}
    seen = reported(cluster)
    if seen["claims"]:
        proof["DRAResourceClaimDeviceStatus"] = gettext("%(count)s claim(s) carry status.devices") % {
            "count": seen["claims"]
        }
    if seen["pods"]:
        proof["ResourceHealthStatus"] = gettext("%(count)s pod(s) carry allocatedResourcesStatus") % {
            "count": seen["pods"]
        }
        if seen["messages"]:
            proof["ResourceHealthStatusMessage"] = gettext("health reports carry messages")
    if "DeviceTaintRule" in served_kinds:
        proof["DRADeviceTaintRules"] = gettext("DeviceTaintRules are served")
    return proof


def device_status_item(cluster, item):
    """Check 4's line: per driver with allocated devices, does it report device status (claims'
    status.devices) and device health (pods' allocatedResourcesStatus)? Both are optional for a driver, so
    the line informs and never fails (`item`: readiness.item)."""
    drivers = sorted(set(AllocationResult.objects.filter(cluster=cluster).values_list("driver", flat=True).distinct()))
    if not drivers:
        return item(PASS, gettext("No device is allocated: no driver could report device status or health yet."))
    seen = reported(cluster)
    status, health = seen["status_drivers"], seen["health_drivers"]
    yes, no = gettext("yes"), gettext("no")
    lines = [
        gettext("%(driver)s: device status %(status)s, health %(health)s")
        % {"driver": d, "status": yes if d in status else no, "health": yes if d in health else no}
        for d in drivers
    ]
    return item(
        PASS,
        gettext("Drivers that report device status and health: %(drivers)s.") % {"drivers": "; ".join(lines)},
        drivers={d: {"device_status": d in status, "health": d in health} for d in drivers},
    )


def gate_states(cluster, gates, source, version, served_kinds):
    """{gate: {"enabled": True/False/None, "how": metrics|objects|ga|default|unknown, "stage", "why"}}."""
    minor = minor_version(version)
    proof = evidence(cluster, served_kinds)
    states = {}
    for gate in DEFAULTS:
        default = default_for(gate, minor)
        if source == "metrics" and gate in gates:
            enabled, stage = gates[gate]
            states[gate] = {"enabled": enabled, "how": "metrics", "stage": stage or "GA"}
        elif gate in proof:
            states[gate] = {
                "enabled": True,
                "how": "objects",
                "stage": default[0] if default else "",
                "why": proof[gate],
            }
        elif source != "metrics" and gates.get(gate) is True:  # featuregates.inferred: a feature in use
            why = gettext("objects use it")
            states[gate] = {"enabled": True, "how": "objects", "stage": default[0] if default else "", "why": why}
        elif default and default[0] == "GA":
            states[gate] = {"enabled": True, "how": "ga", "stage": "GA"}
        elif default:
            states[gate] = {"enabled": None, "how": "default", "stage": default[0], "default": default[1]}
        else:  # before the gate existed, or the version is unknown
            states[gate] = {"enabled": False if minor is not None else None, "how": "unknown", "stage": ""}
    return states


def status_field_items(cluster, gates, source, version, served_kinds, item):
    """Check 1's lines on the device status and health fields; `item` is readiness.item."""
    states = gate_states(cluster, gates, source, version, served_kinds)
    out = []
    for gate, state in states.items():
        what = FIELDS[gate]
        params = {"what": what, "gate": gate, "version": version or "?", "stage": state.get("stage") or "?"}
        how = state["how"]
        if state["enabled"] is True:
            if how == "metrics":
                text = gettext("%(what)s: served (%(gate)s on, from the API server's /metrics).")
            elif how == "ga":
                text = gettext("%(what)s: served (%(gate)s is GA in %(version)s, always on).")
            else:
                text = gettext("%(what)s: served (%(gate)s on: %(why)s).")
                params["why"] = state.get("why", "")
            status = PASS
        elif state["enabled"] is False:
            text = (
                gettext("%(what)s: not served (%(gate)s is off, from the API server's /metrics).")
                if how == "metrics"
                else gettext("%(what)s: not served (%(gate)s does not exist in %(version)s).")
            )
            # Off where the version has it on by default: turned off on purpose, and the pages that show
            # device status or health stay empty. Off by default (e.g. DeviceTaintRules in v1.36): a fact.
            default = default_for(gate, minor_version(version))
            status = WARN if default and default[1] else PASS
        elif how == "default" and state.get("default"):
            text = gettext(
                "%(what)s: on by default in %(version)s (%(gate)s, %(stage)s), not confirmed: the API server's "
                "/metrics was not readable and no object shows it yet."
            )
            status = SKIP
        elif how == "default":
            text = gettext(
                "%(what)s: off by default in %(version)s (%(gate)s, %(stage)s): not served unless the API server "
                "enables it."
            )
            status = PASS
        else:
            text = gettext("%(what)s: unknown (%(gate)s; the server version is unknown).")
            status = SKIP
        out.append(item(status, text % params, gate=gate, enabled=state["enabled"], how=how))
    if states["ResourceHealthStatus"]["enabled"] is not False:
        out.append(
            item(
                PASS,
                gettext(
                    "Device health reaches pod status only where the kubelet also has ResourceHealthStatus on "
                    "and the driver streams health (NodeWatchResources): the kubelet's gate is not visible from "
                    "the API server."
                ),
            )
        )
    return out, {gate: s["enabled"] for gate, s in states.items()}


# --- RBAC of drivers on claim status -------------------------------------------------------------------

ANY_VERB = "gpudash-probe-any-verb"  # granted only by verbs: ["*"]
ANY_RESOURCE = "gpudash-probe-any-resource"  # granted only by resources: ["*"]


def _allowed(post, user, namespace, verb, resource, subresource="", name="", group="resource.k8s.io"):
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            # No namespace: the question is about every namespace (a ClusterRole's reach).
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                **({"subresource": subresource} if subresource else {}),
                **({"name": name} if name else {}),
            },
        },
    }
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    return bool((post(path, body).get("status") or {}).get("allowed"))


def driver_rights(post, driver, account):
    """What a driver's service account may do to claims: {right: allowed}."""
    namespace, name = account.split(":", 1)
    user = f"system:serviceaccount:{namespace}:{name}"

    def may(verb, resource, subresource="", obj="", group="resource.k8s.io"):
        return _allowed(post, user, namespace, verb, resource, subresource, obj, group)

    rights = {"user": user}
    for verb in ("update", "patch"):
        rights[f"{verb} status"] = may(verb, "resourceclaims", "status")
        rights[f"associated-node:{verb}"] = may(f"associated-node:{verb}", "resourceclaims", "driver", driver)
        rights[f"arbitrary-node:{verb}"] = may(f"arbitrary-node:{verb}", "resourceclaims", "driver", driver)
        rights[f"{verb} resourceclaims"] = may(verb, "resourceclaims")
        rights[f"{verb} resourceclaims/binding"] = may(verb, "resourceclaims", "binding")
    rights["delete resourceclaims"] = may("delete", "resourceclaims")
    rights["wildcard verbs"] = may(ANY_VERB, "resourceclaims") or may(ANY_VERB, "resourceclaims", "status")
    rights["wildcard resources"] = may("update", ANY_RESOURCE)
    return rights


def driver_status_rbac_items(reader, drivers, gates, post, item):
    """Per driver service account: may it write claim status (and, with the granular gate, its own
    driver's entries), and does it hold more than that (`drivers`: {driver: ["ns:sa", ...]},
    `gates`: {gate: on?} from check 1, `post`: readiness._post, `item`: readiness.item)."""
    granular = (gates or {}).get(GRANULAR)
    out = []
    for driver, accounts in sorted(drivers.items()):
        for account in accounts:
            try:
                rights = driver_rights(lambda path, body: post(reader, path, body), driver, account)
            except KubeError as exc:
                out.append(item(SKIP, gettext("SubjectAccessReview failed: %(error)s") % {"error": exc}))
                return out
            params = {"driver": driver, "subject": rights["user"]}
            status_write = rights["update status"] or rights["patch status"]
            associated = rights["associated-node:update"] or rights["associated-node:patch"]
            arbitrary = rights["arbitrary-node:update"] or rights["arbitrary-node:patch"]
            wide = [
                r
                for r in (
                    "update resourceclaims",
                    "patch resourceclaims",
                    "delete resourceclaims",
                    "update resourceclaims/binding",
                    "patch resourceclaims/binding",
                )
                if rights[r]
            ]
            wildcard = rights["wildcard verbs"] or rights["wildcard resources"]
            data = {
                "subject": rights["user"],
                "driver": driver,
                "rights": {k: v for k, v in rights.items() if k != "user"},
            }
            if not status_write:
                out.append(
                    item(
                        WARN,
                        gettext(
                            "%(driver)s: its service account %(subject)s may not update resourceclaims/status: the "
                            "driver cannot report device status (conditions, network data). Grant update and patch "
                            "on resourceclaims/status if it reports them."
                        )
                        % params,
                        **data,
                    )
                )
            elif granular is not False and not (associated or arbitrary):
                out.append(
                    item(
                        WARN,
                        gettext(
                            "%(driver)s: its service account %(subject)s may update resourceclaims/status but holds no "
                            'associated-node:update/patch on resourceclaims/driver named "%(driver)s": with '
                            "DRAResourceClaimGranularStatusAuthorization (on by default from v1.36) the API server "
                            "rejects its status.devices writes."
                        )
                        % params,
                        **data,
                    )
                )
            else:
                out.append(
                    item(
                        PASS,
                        gettext(
                            "%(driver)s: its service account %(subject)s may update claim status (status.devices) "
                            "for its own driver."
                        )
                        % params,
                        **data,
                    )
                )
            if arbitrary and not associated and not wildcard:
                out.append(
                    item(
                        WARN,
                        gettext(
                            "%(driver)s: %(subject)s may write status.devices of claims on any node "
                            "(arbitrary-node:); a kubelet plugin needs only associated-node: (its own node). "
                            "Keep arbitrary-node: for a central controller's account."
                        )
                        % params,
                        **data,
                    )
                )
            if wildcard:
                out.append(
                    item(
                        FAIL,
                        gettext(
                            '%(driver)s: %(subject)s holds a wildcard ("*" verbs on resourceclaims, or every '
                            "resource of resource.k8s.io): it may rewrite or delete any claim and its allocation. "
                            "Grant only update and patch on resourceclaims/status (and resourceclaims/driver)."
                        )
                        % params,
                        **data,
                    )
                )
            elif wide:
                out.append(
                    item(
                        WARN,
                        gettext(
                            "%(driver)s: %(subject)s may %(rights)s in every namespace: more than a driver needs "
                            "(it writes status only). Drop those verbs from its ClusterRole."
                        )
                        % {**params, "rights": ", ".join(wide)},
                        **data,
                    )
                )
    return out
