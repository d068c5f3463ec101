"""Cluster readiness checks: what DRA admins are told to verify before going live, as pass/warn/fail.

1. API versions served and DRA features visibly in use; 2. drivers deployed where slices are published;
3. RBAC (SubjectAccessReview for configurable subjects, SelfSubjectRulesReview for the dashboard);
4. device reporting accuracy; 5. the failure-recovery path (stuck claims, release durations);
6. the mirror: objects skipped as malformed, DeviceClasses whose selectors cannot be counted;
7. a fleet in transition: DRA beside device plugins and HAMi.
Live calls go to the API server; everything else reads the mirror. A check that cannot run says why.
"""

from collections import Counter, defaultdict
from datetime import timedelta
from statistics import median
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from claims.models import (
    AllocationResult,
    ClaimStateChange,
    Finding,
    PodFootprint,
    ResourceClaim,
)
from inventory import accelerators, devicekinds, fleet
from inventory.accelerators import accelerator_rows
from inventory.models import Device, DeviceClass, DeviceTaintRule, Node, ResourceSlice, SharedCounterSet
from mirror import messages
from mirror.kube import KubeError, ops_setting
from mirror.messages import grouped
from mirror.models import SyncState
from mirror.sync.kinds import KINDS
from ops.pending import ClusterReader

from . import featuregates, readiness_dra
from .driverdaemonsets import DriverPodFinder

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
_RANK = {PASS: 0, SKIP: 1, WARN: 2, FAIL: 3}
MIRRORED = ("nodes", "pods", "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")


def check(check_id, title, items, summary="", data=None):
    """A check's result; its status is its worst item (no items = pass)."""
    status = max((i["status"] for i in items), key=_RANK.get, default=PASS)
    return {"id": check_id, "title": title, "status": status, "summary": summary, "items": items, "data": data or {}}


def item(status, text, links=(), **data):
    """One line of a check; `links` ({label, url}) lead to the objects the line is about."""
    return {
        "status": status,
        "text": text,
        **({"links": [dict(link) for link in links if link]} if links else {}),
        **({"data": data} if data else {}),
    }


def link(label, url_name, *args, **query):
    url = reverse(url_name, args=args)
    return {"label": str(label), "url": url + ("?" + urlencode(query) if query else "")}


def _node_links(cluster, names, limit=20):
    return [link(n, "inventory:node-detail", cluster.name, n) for n in sorted(names)[:limit]]


def _pod_links(cluster, pods, limit=20):
    return [link(p.name, "claims:pod-detail", cluster.name, p.namespace, p.name) for p in list(pods)[:limit]]


def _pods_link(namespace):
    return link(gettext("pods in %(namespace)s") % {"namespace": namespace}, "claims:pod-list", namespace=namespace)


def _slices_link(driver):
    return link(gettext("%(driver)s slices") % {"driver": driver}, "inventory:slice-list", driver=driver)


# --- 1. versions and features -----------------------------------------------------------------------


def check_versions(cluster, reader):
    """The API server's version, the resource.k8s.io versions it serves, and which DRA feature gates
    are on: from its kubernetes_feature_enabled metric where RBAC allows GET /metrics, else inferred."""
    items, data = [], {}
    version, versions = cluster.server_version, list(cluster.served_resource_versions or [])
    served_kinds = set()
    if reader.live:
        try:
            info = reader.get("/version") or {}
            version = info.get("gitVersion") or version
            group = reader.get("/apis/resource.k8s.io") or {}
            versions = [v.get("version") for v in group.get("versions") or []]
            for v in versions:
                listing = reader.get(f"/apis/resource.k8s.io/{v}") or {}
                served_kinds |= {r.get("kind") for r in listing.get("resources") or [] if "/" not in r.get("name", "")}
        except KubeError as exc:
            items.append(
                item(
                    WARN, gettext("API server not reachable, using what discovery recorded: %(error)s") % {"error": exc}
                )
            )
    if not served_kinds:
        served_kinds = set(
            SyncState.objects.filter(cluster=cluster)
            .exclude(status=SyncState.Status.NOT_SERVED)
            .values_list("kind", flat=True)
        )
    data.update(server_version=version, resource_versions=versions, served_kinds=sorted(k for k in served_kinds if k))
    items.append(
        item(PASS if version else WARN, f"Kubernetes {version}" if version else gettext("Server version unknown."))
    )
    if "v1" in versions:
        items.append(
            item(
                PASS,
                gettext("resource.k8s.io served: %(versions)s.") % {"versions": ", ".join(versions)},
                links=[
                    link(gettext("ResourceSlices"), "inventory:slice-list"),
                    link(gettext("DeviceClasses"), "inventory:class-list"),
                    link(gettext("ResourceClaims"), "claims:claim-list"),
                    link(gettext("ResourceClaimTemplates"), "claims:template-list"),
                ],
            )
        )
    elif versions:
        items.append(
            item(
                WARN,
                gettext("resource.k8s.io only as %(versions)s: v1 (Kubernetes 1.34+) is what gpudash expects.")
                % {"versions": ", ".join(versions)},
            )
        )
    else:
        items.append(item(FAIL, gettext("resource.k8s.io is not served: DRA is off on this cluster.")))
    features = features_in_use(cluster)
    data["features"] = features
    gates, source, why = featuregates.read_gates(reader, versions, served_kinds, features)
    data.update(
        feature_gates={k: v[0] if isinstance(v, tuple) else v for k, v in gates.items()}, feature_gates_source=source
    )
    items += _gate_items(gates, source, why, features)
    fields, data["status_fields"] = readiness_dra.status_field_items(
        cluster, gates, source, version, served_kinds, item
    )
    items += fields
    items.append(
        item(
            PASS,
            gettext("DRA features in use: %(features)s.")
            % {
                "features": ", ".join(f"{FEATURE_NAMES.get(k, k)} ({v})" for k, v in features.items())
                or gettext("none beyond basic allocation")
            },
            links=[link(label, *target) for k in features for label, target in [_feature_link(k)] if target],
        )
    )
    return check("versions", gettext("API server and DRA versions"), items, f"Kubernetes {version or '?'}", data)


def _gate_items(gates, source, why, features):
    """The DRA feature-gate lines: from the metric (enabled/disabled per gate), or what is inferred."""
    dra = [g for g in featuregates.DRA_GATES if g in gates] + sorted(
        g for g in gates if g.startswith("DRA") and g not in featuregates.DRA_GATES
    )
    if source == "metrics":
        on = [g for g in dra if gates[g][0]]
        off = [g for g in dra if not gates[g][0]]
        out = []
        core = gates.get("DynamicResourceAllocation")
        if core is not None and not core[0]:
            out.append(item(FAIL, gettext("Feature gate DynamicResourceAllocation is off: DRA does not work.")))
        out.append(
            item(
                PASS,
                gettext(
                    "DRA feature gates enabled (kubernetes_feature_enabled from the API server's /metrics): %(gates)s."
                )
                % {"gates": ", ".join(on) or gettext("none")},
                gates=on,
            )
        )
        if off:
            used_but_off = [
                g for k in features for g in [featuregates.PROVEN_BY_USE.get(k)] if g in off
            ]  # objects written while the gate was on; the API server now ignores those fields
            out.append(
                item(
                    WARN if used_but_off else PASS,
                    gettext("Disabled: %(gates)s.") % {"gates": ", ".join(off)}
                    + (
                        " "
                        + gettext(
                            "Objects still use %(gates)s: written while the gate was on, the API server now drops "
                            "those fields on update and the scheduler ignores them."
                        )
                        % {"gates": ", ".join(sorted(set(used_but_off)))}
                        if used_but_off
                        else ""
                    ),
                    gates=off,
                )
            )
        return out
    on = sorted(g for g, v in gates.items() if v is True)
    return [
        item(
            PASS,
            gettext(
                "DRA feature gates known to be on (inferred from the API versions served and the fields objects carry): %(gates)s."
            )
            % {"gates": ", ".join(on) or gettext("none")},
            gates=on,
        ),
        item(
            SKIP,
            gettext(
                "The other gates cannot be told: the API server's /metrics was not readable (%(error)s). "
                'Grant GET on the non-resource URL /metrics (deploy/rbac-readonly.yaml, "nonResourceURLs") to read them all.'
            )
            % {"error": why[:300]},
        ),
    ]


def _feature_link(feature):
    """Where the objects using a feature are listed: (label, (url name, *args, query))."""
    label = FEATURE_NAMES.get(feature, feature)
    targets = {
        "device taints": ("inventory:device-list",),
        "consumable capacity": ("inventory:device-list",),
        "binding conditions": ("inventory:device-list",),
        "partitionable devices (shared counters)": ("inventory:slice-list",),
        "per-device node selection": ("inventory:slice-list",),
        "admin access": ("claims:claim-list",),
        "prioritized list (firstAvailable)": ("claims:claim-list",),
        "extended resources backed by DRA": ("claims:claim-list",),
        "DeviceTaintRules": ("inventory:class-list",),
    }
    return label, targets.get(feature)


# The names of features_in_use's keys (which stay English: they are the API's data) in the page's language.
FEATURE_NAMES = {
    "partitionable devices (shared counters)": gettext_lazy("partitionable devices (shared counters)"),
    "consumable capacity": gettext_lazy("consumable capacity"),
    "binding conditions": gettext_lazy("binding conditions"),
    "device taints": gettext_lazy("device taints"),
    "admin access": gettext_lazy("admin access"),
    "per-device node selection": gettext_lazy("per-device node selection"),
    "prioritized list (firstAvailable)": gettext_lazy("prioritized list (firstAvailable)"),
    "extended resources backed by DRA": gettext_lazy("extended resources backed by DRA"),
}


def features_in_use(cluster):
    """Which optional DRA features the mirrored objects visibly use, with a count each."""
    found = {}
    devices = Device.objects.filter(cluster=cluster)
    counts = {
        "partitionable devices (shared counters)": SharedCounterSet.objects.filter(cluster=cluster).count(),
        "consumable capacity": devices.filter(allow_multiple_allocations=True).count(),
        "binding conditions": devices.exclude(binding_conditions=[]).count(),
        "device taints": devices.exclude(taints=[]).count(),
        "DeviceTaintRules": DeviceTaintRule.objects.filter(cluster=cluster).count(),
        "admin access": AllocationResult.objects.filter(cluster=cluster, admin_access=True).count(),
        "per-device node selection": ResourceSlice.objects.filter(
            cluster=cluster, per_device_node_selection=True
        ).count(),
    }
    prioritized = extended = 0
    for raw in ResourceClaim.objects.filter(cluster=cluster).values_list("raw", flat=True):
        reqs = ((raw.get("spec") or {}).get("devices") or {}).get("requests") or []
        prioritized += any(r.get("firstAvailable") for r in reqs)
        extended += "resource.kubernetes.io/extended-resource-claim" in (
            (raw.get("metadata") or {}).get("annotations") or {}
        )
    counts["prioritized list (firstAvailable)"] = prioritized
    counts["extended resources backed by DRA"] = extended
    for name, n in counts.items():
        if n:
            found[name] = n
    return found


# --- 2. drivers ---------------------------------------------------------------------------------------


def _node_label_matches(labels, spec):
    key, has_value, value = spec.partition("=")
    return key in labels and (not has_value or labels[key] == value)


def _slice_nodes(cluster):
    """{driver: nodes it publishes node-local slices (or per-device node names) for}."""
    slice_nodes = defaultdict(set)
    for driver, node in (
        ResourceSlice.objects.filter(cluster=cluster).exclude(node_name="").values_list("driver", "node_name")
    ):
        slice_nodes[driver].add(node)
    for driver, node in (
        Device.objects.filter(cluster=cluster, slice__node_name="")
        .exclude(node_name="")
        .values_list("driver", "node_name")
    ):
        slice_nodes[driver].add(node)
    return slice_nodes


def check_drivers(cluster, reader):
    """Per driver: its DaemonSet(s), desired vs ready on every node they target, nodes publishing
    slices without a driver pod and the reverse, and why the configured pod labels found nothing."""
    items, data = [], {}
    slice_nodes = _slice_nodes(cluster)
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    finder = DriverPodFinder(cluster, reader)
    for driver in sorted(slice_nodes):
        publishing = slice_nodes[driver]
        daemonsets, selectors, guessed = finder.for_driver(driver)
        pods = [p for ds in daemonsets for p in ds.pods if p.node]
        pod_nodes = {p.node for p in pods if p.phase == "Running"}
        data[driver] = {
            "nodes_with_slices": sorted(publishing),
            "nodes_with_driver_pods": sorted(pod_nodes),
            "daemonsets": [
                {"name": ds.key, "desired": ds.desired, "ready": ds.ready_count, "pods": len(ds.pods)}
                for ds in daemonsets
            ],
            "selectors": selectors,
            "guessed": guessed,
            "service_accounts": sorted({f"{p.namespace}:{p.service_account}" for p in pods if p.service_account}),
        }
        if not daemonsets:
            items.append(
                item(
                    WARN,
                    gettext(
                        "%(driver)s: slices from %(count)s node(s), but no pod matches %(selectors)s and no "
                        "DaemonSet is named like the driver: set GPUDASH_OPS DRIVER_POD_SELECTORS for it."
                    )
                    % {
                        "driver": driver,
                        "count": grouped(len(publishing)),
                        "selectors": ", ".join(selectors) or gettext("(no selector configured)"),
                    },
                    links=[_slices_link(driver), *_node_links(cluster, publishing)],
                )
            )
            continue
        if guessed:
            ds = daemonsets[0]
            items.append(
                item(
                    WARN,
                    gettext(
                        "%(driver)s: the configured pod selectors (%(selectors)s) match no pod, so gpudash took "
                        "DaemonSet %(daemonset)s for this driver by its name (its pods carry %(labels)s). Label "
                        "the driver's pods %(label)s=%(driver)s, or set GPUDASH_OPS DRIVER_POD_SELECTORS "
                        '{"%(driver)s": "%(selector)s"}.'
                    )
                    % {
                        "driver": driver,
                        "selectors": ", ".join(selectors) or gettext("none"),
                        "daemonset": ds.key,
                        "labels": ds.selector or gettext("other labels"),
                        "label": ops_setting("DRIVER_POD_LABEL") or "resource.gpudash.io/driver",
                        "selector": ds.selector,
                    },
                    links=[_pods_link(ds.namespace), *_pod_links(cluster, ds.pods)],
                    finding="driver_pod_label_mismatch",
                )
            )
        for ds in daemonsets:
            items += _daemonset_items(cluster, driver, ds, nodes, publishing)
        ready_nodes = {p.node for p in pods if p.ready}
        data[driver]["down_nodes"] = sorted(publishing - ready_nodes)
        silent = sorted(pod_nodes - publishing)
        orphan = sorted(publishing - pod_nodes)
        if silent:
            items.append(
                item(
                    FAIL,
                    gettext(
                        "%(driver)s: driver pods run on %(nodes)s but no slices are published there "
                        "(kubelet plugin not registered?)."
                    )
                    % {"driver": driver, "nodes": ", ".join(silent[:20])},
                    nodes=silent,
                    links=[*_node_links(cluster, silent), *_pod_links(cluster, [p for p in pods if p.node in silent])],
                )
            )
        if orphan:
            items.append(
                item(
                    WARN,
                    gettext(
                        "%(driver)s: slices published for %(nodes)s where no driver pod runs "
                        "(stale slices: the driver is gone from the node, or its pods are labelled otherwise)."
                    )
                    % {"driver": driver, "nodes": ", ".join(orphan[:20])},
                    nodes=orphan,
                    links=[_slices_link(driver), *_node_links(cluster, orphan)],
                )
            )
        if not silent and not orphan:
            items.append(
                item(
                    PASS,
                    gettext("%(driver)s: driver pods and slices on the same %(count)s node(s).")
                    % {"driver": driver, "count": grouped(len(publishing))},
                    links=[_slices_link(driver)],
                )
            )
    gpu_labels = ops_setting("GPU_NODE_LABELS") or []
    publishing_any = set().union(*slice_nodes.values()) if slice_nodes else set()
    served_otherwise = set(
        accelerator_rows([cluster.id]).values_list("node_name", flat=True)
    )  # device plugin, HAMi: check 7
    unpublished = sorted(
        n.name
        for n in nodes.values()
        if any(_node_label_matches(n.labels, s) for s in gpu_labels)
        and n.name not in publishing_any
        and n.name not in served_otherwise
    )
    if unpublished:
        items.append(
            item(
                WARN,
                gettext("%(count)s node(s) look like GPU nodes but publish no slices: %(nodes)s.")
                % {"count": grouped(len(unpublished)), "nodes": ", ".join(unpublished[:20])},
                nodes=unpublished,
                links=_node_links(cluster, unpublished),
            )
        )
    if not slice_nodes:
        items.append(item(WARN, gettext("No DRA driver publishes node-local slices.")))
    if finder.daemonsets is None:
        data["daemonsets_error"] = finder.daemonset_error
        items.append(
            item(
                SKIP,
                gettext(
                    "DaemonSets could not be read (%(error)s): driver pods are grouped by their owner, and nodes "
                    'a DaemonSet targets without a pod cannot be told. The optional rule "list daemonsets" '
                    "in deploy/rbac-readonly.yaml allows it."
                )
                % {"error": finder.daemonset_error[:300]},
            )
        )
    return check(
        "drivers",
        gettext("DRA drivers deployed"),
        items,
        gettext("%(count)s driver(s)") % {"count": grouped(len(slice_nodes))},
        data,
    )


def _daemonset_items(cluster, driver, ds, nodes, publishing):
    """Desired vs ready for one driver DaemonSet, and the nodes where its pod is missing or not Ready."""
    by_node = defaultdict(list)
    for pod in ds.pods:
        by_node[pod.node].append(pod)
    if ds.selector:  # the DaemonSet itself was read: the nodes it targets are known
        targets = sorted(n for n, node in nodes.items() if ds.targets(node))
    else:
        targets = sorted(set(by_node) | publishing)
    desired = ds.desired if ds.desired is not None else len(targets)
    ready_nodes = sorted(n for n in targets if any(p.ready for p in by_node.get(n, ())))
    ready = ds.ready_count if ds.ready_count is not None else len(ready_nodes)
    out = []
    name = ds.key if ds.name else gettext("pods without a DaemonSet in %(namespace)s") % {"namespace": ds.namespace}
    out.append(
        item(
            PASS if ready >= desired and desired else WARN,
            gettext("%(driver)s: DaemonSet %(daemonset)s: %(ready)s of %(desired)s desired pods ready.")
            % {"driver": driver, "daemonset": name, "ready": grouped(ready), "desired": grouped(desired)},
            daemonset=ds.key,
            desired=desired,
            ready=ready,
            links=[_pods_link(ds.namespace)],
        )
    )
    missing, not_ready = [], []
    for n in targets:
        pods = by_node.get(n, [])
        if not pods:
            missing.append(n)
        elif not any(p.ready for p in pods):
            not_ready.append((n, pods[0]))
    if missing:
        slices_there = [n for n in missing if n in publishing]
        out.append(
            item(
                FAIL if slices_there else WARN,
                gettext(
                    "%(driver)s: no driver pod on %(nodes)s, which DaemonSet %(daemonset)s targets: claims "
                    "cannot be prepared or cleaned up there."
                )
                % {"driver": driver, "nodes": ", ".join(missing[:20]), "daemonset": name},
                nodes=missing,
                links=_node_links(cluster, missing),
            )
        )
    for n, pod in not_ready:
        node = nodes.get(n)
        node_down = node is not None and node.ready is False
        out.append(
            item(
                WARN if node_down else FAIL,
                (
                    gettext("%(driver)s: driver pod %(pod)s on %(node)s is not Ready: the node itself is NotReady.")
                    if node_down
                    else gettext("%(driver)s: driver pod %(pod)s on %(node)s is not Ready (%(phase)s%(reason)s).")
                )
                % {
                    "driver": driver,
                    "pod": pod.name,
                    "node": n,
                    "phase": pod.phase or "?",
                    "reason": f", {pod.reason}" if pod.reason else "",
                },
                node=n,
                pod=f"{pod.namespace}/{pod.name}",
                links=[*_node_links(cluster, [n]), *_pod_links(cluster, [pod])],
            )
        )
    stray = sorted(n for n in by_node if n and ds.selector and n not in targets)
    if stray:
        out.append(
            item(
                WARN,
                gettext("%(driver)s: pods of %(daemonset)s run on %(nodes)s, which its node selector does not pick.")
                % {"driver": driver, "daemonset": name, "nodes": ", ".join(stray[:20])},
                links=_node_links(cluster, stray),
            )
        )
    return out


# --- 3. RBAC ------------------------------------------------------------------------------------------

# (verb, group, resource, subresource, namespaced, why it matters)
RISKY = (
    (
        "create",
        "resource.k8s.io",
        "resourceslices",
        "",
        False,
        gettext_lazy("publish devices (ResourceSlices are for drivers and admins)"),
    ),
    ("update", "resource.k8s.io", "resourceslices", "", False, gettext_lazy("rewrite published devices")),
    ("delete", "resource.k8s.io", "resourceslices", "", False, gettext_lazy("withdraw published devices")),
    ("update", "resource.k8s.io", "resourceclaims", "status", True, gettext_lazy("update claim status")),
    ("patch", "resource.k8s.io", "resourceclaims", "status", True, gettext_lazy("write claim status")),
    (
        "patch",
        "resource.k8s.io",
        "resourceclaims",
        "binding",
        True,
        gettext_lazy("change allocation / reservedFor (1.36 binding)"),
    ),
    ("create", "resource.k8s.io", "deviceclasses", "", False, gettext_lazy("define device classes")),
    ("patch", "", "namespaces", "", False, gettext_lazy("label their namespace for admin access")),
)
# Every mirrored kind (DeviceTaintRules only where served, so not required).
NEEDED_READ = [
    (verb, kind.group, kind.plural)
    for kind in KINDS
    if kind.kind not in ("DeviceTaintRule", "Event")
    for verb in ("get", "list", "watch")
]
# Optional rights: without them a part of the UI says it cannot show something, nothing else breaks.
OPTIONAL_READ = [
    ("list", "", "events", gettext_lazy("the object pages show no mirrored Events")),
    ("watch", "", "events", gettext_lazy("the object pages show no mirrored Events")),
    ("get", "", "pods/log", gettext_lazy("no DRA driver log tail on the Pending, claim and node pages")),
    (
        "list",
        "apps",
        "daemonsets",
        gettext_lazy("the driver check cannot tell desired from ready driver pods per node"),
    ),
]
NEEDED_RELEASE = [
    ("patch", "resource.k8s.io", "resourceclaims/status"),
    ("patch", "resource.k8s.io", "resourceclaims/binding"),
    ("patch", "resource.k8s.io", "resourceclaims"),
    ("delete", "resource.k8s.io", "resourceclaims"),
]


def _rules_allow(rules, verb, group, resource):
    def has(values, value):
        return "*" in (values or []) or value in (values or [])

    return any(
        has(r.get("verbs"), verb)
        and has(r.get("apiGroups"), group)
        and has(r.get("resources"), resource)
        and not r.get("resourceNames")
        for r in rules
    )


def _driver_account_items(reader, drivers):
    """A driver's kubelet plugin publishes its node's slices: its service account must be allowed to
    create them (`drivers`: {driver: ["namespace:serviceaccount", ...]} from check 2)."""
    items = []
    for driver, accounts in sorted(drivers.items()):
        for account in accounts:
            namespace, name = account.split(":", 1)
            user = ":".join(("system", "serviceaccount", namespace, name))  # the account's user name
            body = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user,
                    "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                    "resourceAttributes": {"verb": "create", "group": "resource.k8s.io", "resource": "resourceslices"},
                },
            }
            try:
                allowed = (
                    _post(reader, "/apis/authorization.k8s.io/v1/subjectaccessreviews", body).get("status") or {}
                ).get("allowed")
            except KubeError as exc:
                items.append(item(SKIP, gettext("SubjectAccessReview failed: %(error)s") % {"error": exc}))
                return items
            items.append(
                item(
                    PASS if allowed else FAIL,
                    (
                        gettext(
                            "%(driver)s: its service account %(subject)s may publish ResourceSlices, as a driver must."
                        )
                        if allowed
                        else gettext(
                            "%(driver)s: its service account %(subject)s may not create ResourceSlices: the driver cannot "
                            "publish its devices."
                        )
                    )
                    % {"driver": driver, "subject": user},
                    subject=user,
                    driver=driver,
                    links=[_pods_link(namespace)],
                )
            )
    return items


def check_rbac(cluster, reader, drivers=None, gates=None):
    if not reader.live:
        return check(
            "rbac",
            gettext("RBAC"),
            [
                item(
                    SKIP,
                    gettext("Needs the API server: %(why)s.") % {"why": reader.error or gettext("snapshot cluster")},
                )
            ],
        )
    items = []
    probe_ns = "default"
    items += _driver_account_items(reader, drivers or {})
    items += readiness_dra.driver_status_rbac_items(reader, drivers or {}, gates, _post, item)
    for subject in ops_setting("RBAC_SUBJECTS") or []:
        who = subject.get("user") or ",".join(subject.get("groups") or [])
        allowed = []
        for verb, group, resource, sub, namespaced, why in RISKY:
            body = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": subject.get("user"),
                    "groups": subject.get("groups") or [],
                    "resourceAttributes": {
                        "verb": verb,
                        "group": group,
                        "resource": resource,
                        "subresource": sub,
                        **({"namespace": probe_ns} if namespaced else {}),
                    },
                },
            }
            try:
                answer = _post(reader, "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
            except KubeError as exc:
                items.append(item(SKIP, gettext("SubjectAccessReview failed: %(error)s") % {"error": exc}))
                return check("rbac", gettext("RBAC"), items)
            if (answer.get("status") or {}).get("allowed"):
                allowed.append(f"{verb} {resource}{'/' + sub if sub else ''} ({why})")
        if allowed:
            items.append(
                item(
                    FAIL,
                    gettext("%(subject)s may %(rights)s.") % {"subject": who, "rights": "; ".join(allowed)},
                    subject=who,
                    allowed=allowed,
                )
            )
        else:
            items.append(
                item(
                    PASS,
                    gettext("%(subject)s cannot write slices, claim status or binding, classes, or namespace labels.")
                    % {"subject": who},
                    subject=who,
                )
            )
    try:
        review = _post(
            reader,
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": probe_ns},
            },
        )
    except KubeError as exc:
        items.append(item(SKIP, gettext("SelfSubjectRulesReview failed: %(error)s") % {"error": exc}))
        return check("rbac", gettext("RBAC"), items)
    rules = (review.get("status") or {}).get("resourceRules") or []
    missing = [f"{v} {r}" for v, g, r in NEEDED_READ if not _rules_allow(rules, v, g, r)]
    items.append(
        item(
            FAIL if missing else PASS,
            gettext("The dashboard lacks %(rights)s (deploy/rbac-readonly.yaml).") % {"rights": ", ".join(missing)}
            if missing
            else gettext("The dashboard can get/list/watch every mirrored kind."),
        )
    )
    optional_missing = [(f"{v} {r}", why) for v, g, r, why in OPTIONAL_READ if not _rules_allow(rules, v, g, r)]
    for right, why in optional_missing:
        items.append(
            item(
                WARN,
                gettext(
                    "Optional: the dashboard lacks %(right)s: %(why)s (the optional rules in deploy/rbac-readonly.yaml)."
                )
                % {"right": right, "why": why},
                right=right,
            )
        )
    if not optional_missing:
        items.append(item(PASS, gettext("The dashboard may read Events and DRA driver logs (optional rights).")))
    release_missing = [f"{v} {r}" for v, g, r in NEEDED_RELEASE if not _rules_allow(rules, v, g, r)]
    if cluster.writable and _impersonates(cluster):
        items += _impersonation_items(rules, release_missing)
    elif cluster.writable and release_missing:
        items.append(
            item(
                WARN,
                gettext(
                    "Release actions are enabled but the dashboard lacks %(rights)s (deploy/rbac-release.yaml), "
                    "or set the cluster read-only."
                )
                % {"rights": ", ".join(release_missing)},
            )
        )
    elif not cluster.writable and len(release_missing) < len(NEEDED_RELEASE):
        items.append(
            item(
                WARN,
                gettext(
                    "The cluster is read-only in gpudash but its service account may still write claims: "
                    "use deploy/rbac-readonly.yaml."
                ),
            )
        )
    elif cluster.writable:
        items.append(item(PASS, gettext("The dashboard has exactly what release actions need.")))
    return check("rbac", gettext("Least privilege (RBAC)"), items, data={"dashboard_rules": rules})


def _impersonates(cluster):
    """Do release actions on this cluster run as the signed-in user (issue 13, accounts.config)?"""
    clusters = getattr(settings, "GPUDASH_KUBE_IMPERSONATION", ())
    return "*" in clusters or cluster.name in clusters


def _rules_allow_name(rules, verb, group, resource, name):
    """Like _rules_allow, but a rule limited to resourceNames counts when it lists `name`."""
    return any(
        _rules_allow([{**r, "resourceNames": None}], verb, group, resource)
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rules
    )


def _impersonation_items(rules, release_missing):
    """Writes go out as the signed-in user: the dashboard needs to review and impersonate, not to write."""
    missing = []
    if not _rules_allow(rules, "create", "authorization.k8s.io", "subjectaccessreviews"):
        missing.append("create subjectaccessreviews")
    if not any(_rules_allow([{**r, "resourceNames": None}], "impersonate", "", "users") for r in rules):
        missing.append("impersonate users")
    any_user = _rules_allow(rules, "impersonate", "", "users")
    if getattr(settings, "GPUDASH_KUBE_IMPERSONATE_GROUPS", "mapped") == "mapped":
        prefix = getattr(settings, "GPUDASH_KUBE_GROUPS_PREFIX", "")
        groups = sorted({prefix + rule.group for rule in getattr(settings, "OIDC_GROUP_MAP", ())})
        lacking = [g for g in groups if not _rules_allow_name(rules, "impersonate", "", "groups", g)]
        if lacking:
            missing.append("impersonate groups " + ", ".join(lacking))
    elif not _rules_allow(rules, "impersonate", "", "groups"):
        missing.append("impersonate groups (any name: GPUDASH_KUBE_IMPERSONATE_GROUPS=all)")
    out = [
        item(
            FAIL,
            gettext(
                "Writes run as the signed-in user (impersonation): the dashboard lacks %(rights)s (deploy/rbac-impersonate.yaml)."
            )
            % {"rights": "; ".join(missing)},
            missing=missing,
        )
        if missing
        else item(
            PASS,
            gettext(
                "Writes run as the signed-in user (impersonation): the dashboard may review and impersonate "
                "them; the cluster's RBAC decides each write."
            ),
        )
    ]
    if any_user:
        out.append(
            item(
                WARN,
                gettext(
                    "The dashboard may impersonate ANY user name, system users included: list the people "
                    "in resourceNames (deploy/rbac-impersonate.yaml)."
                ),
            )
        )
    if len(release_missing) < len(NEEDED_RELEASE):
        local = getattr(settings, "GPUDASH_PASSWORD_LOGIN", True)
        out.append(
            item(
                PASS if local else WARN,
                gettext("The dashboard's own account may also write claims: local (password) accounts release with it.")
                if local
                else gettext(
                    "The dashboard's own account may also write claims: with password sign-in off nobody needs that; "
                    "drop deploy/rbac-release.yaml."
                ),
            )
        )
    return out


def _post(reader, path, body):
    """POST a review (authorization reviews are create-only, answered synchronously)."""
    client = reader.client.api_client
    prepared = client.param_serialize(
        "POST",
        path,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    try:
        response = client.call_api(*prepared, _request_timeout=reader.timeout).response
    except Exception as exc:  # connection errors of any layer become a check result, never a 500
        raise KubeError(f"POST {path}: {exc}") from exc
    import json

    try:
        data = response.data
    finally:
        response.release_conn()
    if not 200 <= response.status < 300:
        raise KubeError(f"POST {path}: HTTP {response.status}", status=response.status)
    return json.loads(data or b"{}")


# --- 4. device reporting --------------------------------------------------------------------------------


def check_reporting(cluster):
    items = []
    pools = defaultdict(list)
    for s in ResourceSlice.objects.filter(cluster=cluster).only(
        "id", "name", "driver", "pool", "pool_generation", "resource_slice_count", "node_name"
    ):
        pools[(s.driver, s.pool)].append(s)
    incomplete, mixed = [], []
    newest_ids = set()
    for (driver, pool), slices in sorted(pools.items()):
        newest = max(s.pool_generation for s in slices)
        current = [s for s in slices if s.pool_generation == newest]
        newest_ids |= {s.id for s in current}
        if len(current) < max(s.resource_slice_count for s in current):
            incomplete.append(f"{driver}/{pool} ({len(current)}/{max(s.resource_slice_count for s in current)})")
        if len({s.pool_generation for s in slices}) > 1:
            mixed.append(f"{driver}/{pool}")
    items.append(
        item(
            FAIL if incomplete else PASS,
            gettext("Incomplete pools: %(pools)s.") % {"pools": ", ".join(incomplete[:20])}
            if incomplete
            else gettext("Every pool is complete."),
            links=[
                link(f"{d}/{p}", "inventory:slice-list", driver=d, pool=p)
                for d, p in sorted({tuple(x.split(" ", 1)[0].split("/", 1)) for x in incomplete})[:20]
            ]
            or [link(gettext("pools"), "inventory:pool-list")],
        )
    )
    if mixed:
        items.append(
            item(
                WARN,
                gettext(
                    "Pools with slices of several generations (an update in progress, or a stuck driver): %(pools)s."
                )
                % {"pools": ", ".join(mixed[:20])},
            )
        )
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    ghost = sorted(
        {s.node_name for slices in pools.values() for s in slices if s.node_name and s.node_name not in nodes}
    )
    items.append(
        item(
            FAIL if ghost else PASS,
            gettext("Slices for nodes that don't exist: %(nodes)s.") % {"nodes": ", ".join(ghost[:20])}
            if ghost
            else gettext("Every node-local slice has its node."),
            links=[link(n, "inventory:slice-list", node=n) for n in ghost[:20]],
        )
    )
    dupes = [
        f"{d}/{p}/{n}"
        for (d, p, n), c in Counter(
            Device.objects.filter(cluster=cluster, slice_id__in=newest_ids).values_list("driver", "pool", "name")
        ).items()
        if c > 1
    ]
    items.append(
        item(
            FAIL if dupes else PASS,
            gettext("Duplicate device names: %(devices)s.") % {"devices": ", ".join(dupes[:20])}
            if dupes
            else gettext("No duplicate device names."),
            links=[
                link(d, "inventory:device-list", driver=d.split("/", 1)[0], pool=p, name=n)
                for d in dupes[:20]
                for p, n in [d.split("/", 1)[1].rsplit("/", 1)]
            ],
        )
    )
    count_label = ops_setting("GPU_COUNT_LABEL")
    if count_label:
        labelled = [name for name, node in nodes.items() if count_label in node.labels]
        per_node = Counter()
        # Whole devices only: partitions (e.g. MIG devices, type "mig") are not what a GPU-count label counts.
        for name, attrs in Device.objects.filter(
            cluster=cluster, slice_id__in=newest_ids, node_name__in=labelled
        ).values_list("node_name", "attributes"):
            kind = next(
                (
                    v.get("string")
                    for k, v in (attrs or {}).items()
                    if k.rsplit("/", 1)[-1] == "type" and isinstance(v, dict)
                ),
                None,
            )
            if kind in (None, "gpu"):
                per_node[name] += 1
        wrong = []
        for name, node in nodes.items():
            want = node.labels.get(count_label)
            if want is None:
                continue
            try:
                want = int(want)
            except ValueError:
                wrong.append(
                    gettext("%(node)s (label %(label)s=%(value)s is not a number)")
                    % {"node": name, "label": count_label, "value": repr(want)}
                )
                continue
            if per_node.get(name, 0) != want:
                wrong.append(
                    gettext("%(node)s (%(count)s devices, label says %(value)s)")
                    % {"node": name, "count": grouped(per_node.get(name, 0)), "value": want}
                )
        if wrong:
            items.append(
                item(
                    WARN,
                    gettext("Devices per node differ from %(label)s: %(nodes)s.")
                    % {"label": count_label, "nodes": ", ".join(wrong[:20])},
                    nodes=wrong,
                    links=_node_links(cluster, [w.split(" ", 1)[0] for w in wrong]),
                )
            )
    items.append(readiness_dra.device_status_item(cluster, item))
    return check(
        "reporting",
        gettext("Device reporting accuracy"),
        items,
        gettext("%(count)s pool(s)") % {"count": grouped(len(pools))},
    )


# --- 5. failure recovery --------------------------------------------------------------------------------


def release_durations(cluster, since):
    """Seconds from a claim losing its last reservation (its pod went away) to being deallocated, per release."""
    changes = defaultdict(list)
    for c in ClaimStateChange.objects.filter(cluster=cluster, at__gte=since).order_by("at", "id"):
        changes[c.uid].append(c)
    durations, open_releases = [], 0
    for rows in changes.values():
        started = None
        for c in rows:
            if c.old_state == ResourceClaim.State.RESERVED and c.new_state != ResourceClaim.State.RESERVED:
                started = c.at
            if started and c.new_state in (ResourceClaim.State.PENDING, "deleted"):
                durations.append((c.at - started).total_seconds())
                started = None
            elif c.new_state == ResourceClaim.State.RESERVED:
                started = None
        open_releases += started is not None
    return durations, open_releases


def check_recovery(cluster, now=None, drivers_down=None):
    """The release path: claims held after their pod went away, claims stuck deleting, how long a
    release takes (pod gone -> claim deallocated), and the claims a driver that is down holds back.
    `drivers_down`: {driver: nodes publishing its slices without a Ready driver pod} (check 2)."""
    now = now or timezone.now()
    items = []
    active = Counter(Finding.objects.filter(cluster=cluster).active().values_list("rule", flat=True))
    held = active.get("stale_reservation", 0) + active.get("orphaned_allocation", 0)
    stuck_link = [link(gettext("stuck claims"), "ops:stuck")]
    items.append(
        item(
            FAIL if held else PASS,
            gettext("%(count)s claim finding(s) still allocated after their pod went away.") % {"count": grouped(held)}
            if held
            else gettext("No claim is held after its pod went away."),
            links=stuck_link if held else (),
        )
    )
    deleting = active.get("deletion_blocked", 0)
    items.append(
        item(
            WARN if deleting else PASS,
            gettext("%(count)s claim(s) stuck deleting.") % {"count": grouped(deleting)}
            if deleting
            else gettext("No claim stuck deleting."),
            links=stuck_link if deleting else (),
        )
    )
    durations, still_open = release_durations(cluster, now - timedelta(days=1))
    data = {"releases": len(durations), "open": still_open}
    if durations:
        data.update(p50_seconds=median(durations), max_seconds=max(durations))
        slow = max(durations) > 300
        items.append(
            item(
                WARN if slow else PASS,
                gettext(
                    "%(count)s release(s) in the last day: median %(median)s, slowest %(slowest)s "
                    "(pod gone → claim deallocated)."
                )
                % {
                    "count": grouped(len(durations)),
                    "median": messages.duration(median(durations)),
                    "slowest": messages.duration(max(durations)),
                },
                links=[link(gettext("audit log"), "ops:audit")],
            )
        )
    else:
        items.append(item(PASS, gettext("No release observed in the last day.")))
    if still_open:
        items.append(
            item(
                WARN,
                gettext("%(count)s claim(s) lost their reservation but are not deallocated yet.")
                % {"count": grouped(still_open)},
                links=[link(gettext("allocated claims"), "claims:claim-list", state=ResourceClaim.State.ALLOCATED)],
            )
        )
    for driver, nodes in sorted((drivers_down or {}).items()):
        if not nodes:
            continue
        claims = (
            AllocationResult.objects.filter(cluster=cluster, driver=driver, claim__node_name__in=nodes)
            .values_list("claim__node_name", "claim_id")
            .distinct()
        )
        per_node = Counter(node for node, _claim in claims)
        if not per_node:
            continue
        items.append(
            item(
                WARN,
                gettext(
                    "%(driver)s is down on %(nodes)s, where %(count)s allocated claim(s) use its devices: their "
                    "running pods keep running, but new pods using them cannot start, and when their pods are "
                    "deleted the devices are not cleaned up (nor reusable) until the driver is back. Drain a "
                    "driver only once no claim on its nodes is allocated."
                )
                % {
                    "driver": driver,
                    "nodes": ", ".join(f"{n} ({per_node[n]})" for n in sorted(per_node)),
                    "count": grouped(sum(per_node.values())),
                },
                driver=driver,
                nodes=dict(per_node),
                links=[
                    link(
                        gettext("claims on %(node)s") % {"node": n},
                        "claims:claim-list",
                        node=n,
                    )
                    for n in sorted(per_node)
                ],
            )
        )
    items.append(
        item(
            PASS,
            gettext(
                "When a pod is deleted, the ResourceClaim controller removes it from its claims' reservedFor; a "
                "claim made from the pod's template is deleted with it, a shared claim that nobody reserves any "
                "more is deallocated, and the driver unprepares the devices on the node. gpudash flags a claim "
                "that stays allocated after that (stuck claims) and releases it only through an audited action."
            ),
            links=[*stuck_link, link(gettext("audit log"), "ops:audit")],
        )
    )
    return check("recovery", gettext("Failure recovery path"), items, data=data)


# --- 6. the mirror itself --------------------------------------------------------------------------------


def check_mirror(cluster):
    """Objects the watchers skipped as malformed, and DeviceClasses whose selectors cannot be counted:
    each is isolated (the rest of the cluster works), and shown here with its reason."""
    items = []
    for state in SyncState.objects.filter(cluster=cluster, malformed_count__gt=0).order_by("kind"):
        last = (
            " " + gettext("Last: %(reason)s") % {"reason": state.last_malformed[:500]} if state.last_malformed else ""
        )
        items.append(
            item(
                WARN,
                gettext("%(count)s malformed %(kind)s object(s) skipped by the watcher.")
                % {"count": grouped(state.malformed_count), "kind": state.kind}
                + last,
                kind=state.kind,
                count=state.malformed_count,
                last=state.last_malformed[:2000],
                at=state.last_malformed_at.isoformat() if state.last_malformed_at else None,
            )
        )
    broken = list(
        DeviceClass.objects.filter(cluster=cluster)
        .exclude(match_error="")
        .order_by("name")
        .values_list("name", "match_error")[:20]
    )
    for name, error in broken:
        items.append(
            item(
                WARN,
                gettext("DeviceClass %(class)s: %(error)s") % {"class": name, "error": error[:500]},
                device_class=name,
            )
        )
    if not items:
        items.append(
            item(PASS, gettext("Every mirrored object was stored and every DeviceClass selector could be counted."))
        )
    return check("mirror", gettext("Mirrored objects"), items)


# --- 7. a fleet in transition: device plugins and HAMi beside DRA --------------------------------------


def _vendor_domain(driver):
    """The extended-resource domain of a DRA driver's vendor: gpu.nvidia.com -> nvidia.com."""
    parts = driver.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else driver


def check_transition(cluster):
    """Nodes and pods where DRA meets device plugins or HAMi (inventory/accelerators.py), each with
    what to do. Reads the mirror only."""
    items = []
    dra = defaultdict(set)  # node -> vendor domains of the DRA drivers publishing GPUs there
    for driver, node in (
        Device.objects.filter(cluster=cluster, kind__in=(devicekinds.GPU, devicekinds.PARTITION))
        .exclude(node_name="")
        .values_list("driver", "node_name")
        .distinct()
        .order_by()
    ):
        dra[node].add(_vendor_domain(driver))
    offered = defaultdict(dict)  # node -> {resource: (source, kind)}
    for node, source, resource, kind, alloc in accelerators.accelerator_rows([cluster.id]).values_list(
        "node_name", "source", "resource", "kind", "allocatable"
    ):
        if alloc > 0:
            offered[node][resource] = (source, kind)
    # 1. the same GPUs through DRA and a device plugin (or HAMi)
    both = sorted(
        n
        for n, res in offered.items()
        if n in dra
        and any(r.split("/", 1)[0] in dra[n] and k in ("gpu", "partition", "share") for r, (_s, k) in res.items())
    )
    if both:
        items.append(
            item(
                WARN,
                gettext(
                    "%(count)s node(s) publish GPUs in DRA ResourceSlices and advertise them through a device plugin too: "
                    "%(nodes)s. The same GPUs can be handed out twice (once to a claim, once to an nvidia.com/gpu request). "
                    "Run one of the two per node: label the node so the device-plugin DaemonSet skips it, or keep the DRA "
                    "kubelet plugin off it."
                )
                % {"count": grouped(len(both)), "nodes": ", ".join(both[:20])},
                nodes=both,
                finding="dra_and_device_plugin",
            )
        )
    # 2. a DeviceClass's extendedResourceName that a device plugin also advertises
    for name, ext in (
        DeviceClass.objects.filter(cluster=cluster)
        .exclude(extended_resource_name="")
        .values_list("name", "extended_resource_name")
        .order_by("name")
    ):
        nodes = sorted(n for n, res in offered.items() if ext in res)
        if nodes:
            items.append(
                item(
                    WARN,
                    gettext(
                        "DeviceClass %(class)s serves %(resource)s through DRA, and a device plugin advertises %(resource)s "
                        "on %(count)s node(s): %(nodes)s. There the scheduler gives %(resource)s requests the device "
                        "plugin's GPUs (it prefers a node's own allocatable), elsewhere DRA's. Remove the device plugin "
                        "from those nodes once they publish ResourceSlices, or drop extendedResourceName until the move "
                        "is done."
                    )
                    % {"class": name, "resource": ext, "count": grouped(len(nodes)), "nodes": ", ".join(nodes[:20])},
                    nodes=nodes,
                    device_class=name,
                    resource=ext,
                    finding="extended_resource_name_shadowed",
                )
            )
    # 3. pods asking for a device-plugin resource on nodes that only DRA serves
    classes = dict(
        DeviceClass.objects.filter(cluster=cluster)
        .exclude(extended_resource_name="")
        .values_list("extended_resource_name", "name")
    )
    cfg = accelerators.config()
    legacy = defaultdict(list)
    dra_only = sorted(n for n in dra if not offered.get(n))
    for start in range(0, len(dra_only), 500):
        rows = PodFootprint.objects.on_nodes().filter(cluster=cluster, node_name__in=dra_only[start : start + 500])
        for ns, pod, node, raw in rows.values_list("namespace", "name", "node_name", "raw").iterator(chunk_size=2000):
            wanted = sorted(
                r
                for r in ((raw or {}).get("requests") or {})
                if accelerators.resource_kind(r, cfg) and r not in offered.get(node, {})
            )
            for resource in wanted:
                legacy[(node, resource)].append(f"{ns}/{pod}")
    for (node, resource), pods in sorted(legacy.items()):
        via = classes.get(resource)
        if via:
            text = gettext(
                "%(count)s pod(s) on %(node)s ask for %(resource)s, which only DRA serves there (DeviceClass %(class)s, "
                "extendedResourceName): %(pods)s. Fine with the DRAExtendedResource feature; move them to a ResourceClaim "
                "when convenient."
            ) % {
                "count": grouped(len(pods)),
                "node": node,
                "resource": resource,
                "class": via,
                "pods": ", ".join(pods[:10]),
            }
            status = PASS
        else:
            text = gettext(
                "%(count)s pod(s) on %(node)s ask for %(resource)s, which no device plugin advertises there and no DeviceClass "
                "serves: %(pods)s. They were bound before the device plugin went away; pods like them now stay Pending. Ask "
                "through a ResourceClaim, or give a DeviceClass extendedResourceName: %(resource)s."
            ) % {"count": grouped(len(pods)), "node": node, "resource": resource, "pods": ", ".join(pods[:10])}
            status = WARN
        items.append(
            item(status, text, node=node, resource=resource, pods=pods, finding="device_plugin_request_on_dra_node")
        )
    if not items:
        items.append(
            item(
                PASS,
                gettext(
                    "No node mixes DRA with device plugins or HAMi, and no pod asks for a device-plugin GPU on a DRA-only node."
                ),
            )
        )
    totals = fleet.source_totals([cluster.id])
    summary = gettext(
        "DRA %(dra_gpus)s GPUs on %(dra_nodes)s node(s) · device plugin %(dp_gpus)s GPUs on %(dp_nodes)s · HAMi %(shares)s vGPU "
        "shares of %(hami_gpus)s GPUs on %(hami_nodes)s"
    ) % {
        "dra_gpus": totals["dra"]["gpus"],
        "dra_nodes": totals["dra"]["nodes"],
        "dp_gpus": totals["device-plugin"]["gpus"],
        "dp_nodes": totals["device-plugin"]["nodes"],
        "shares": totals["hami"]["shares"],
        "hami_gpus": totals["hami"]["gpus"],
        "hami_nodes": totals["hami"]["nodes"],
    }
    return check("transition", gettext("DRA beside device plugins and HAMi"), items, summary, {"sources": totals})


def run_checks(cluster, live=True):
    with ClusterReader(cluster, live=live) as reader:
        checks = [
            check_versions(cluster, reader),
            check_drivers(cluster, reader),
        ]
        found = {d: v for d, v in checks[1]["data"].items() if isinstance(v, dict)}
        checks += [
            check_rbac(
                cluster,
                reader,
                {d: v.get("service_accounts") or [] for d, v in found.items()},
                checks[0]["data"].get("status_fields"),
            ),
            check_reporting(cluster),
        ]
        down = {d: v.get("down_nodes") for d, v in found.items()}
        checks += [
            check_recovery(cluster, drivers_down=down),
            check_mirror(cluster),
            check_transition(cluster),
        ]
        status = max((c["status"] for c in checks), key=_RANK.get)
        return {
            "cluster": cluster.name,
            "status": status,
            "live": reader.live,
            "checked_at": timezone.now().isoformat().replace("+00:00", "Z"),
            "checks": checks,
            "error": reader.error,
        }
