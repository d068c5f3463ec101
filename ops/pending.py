"""'Why is my Pod Pending?': the DRA admin's checklist for one pod, in order.

Reads the pod, its claims, events and driver pods live from the API server when it answers (the mirror
may lag, and events are not mirrored), else from the database mirror, and says which it used.
Each step is {"key", "title", "status" (pass/warn/fail/info), "detail", "data"}.
"""

from django.utils.translation import gettext, pgettext

from claims.answers import headline_text, plain, present
from claims.models import Pod, ResourceClaim
from claims.preview import filter_rejections_text, post_filter_text
from claims.preview_service.dispatch import request_preview
from dra.model import label_selector_matches
from inventory.models import Node, ResourceSlice
from mirror.kube import KubeClient, KubeError, ops_setting
from mirror.messages import grouped

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
TERMINAL = ("Succeeded", "Failed")


class PodNotFound(LookupError):
    pass


class ClusterReader:
    """Live reads with the mirror as fallback; `source` says which one answered ('live' or 'mirror')."""

    def __init__(self, cluster, live=True):
        self.cluster = cluster
        self.client = None
        self.error = ""
        if live and not cluster.is_snapshot:
            try:
                self.client = KubeClient.for_cluster(cluster)
            except KubeError as exc:
                self.error = str(exc)
        self.timeout = ops_setting("API_TIMEOUT_SECONDS", 10.0)

    @property
    def live(self):
        return self.client is not None

    def close(self):
        if self.client is not None:
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def get(self, path, query=None):
        """JSON from the API server, None on 404; on any other failure drop to mirror mode."""
        if self.client is None:
            return None
        try:
            return self.client.get_json(path, query, timeout=(self.timeout, self.timeout))
        except KubeError as exc:
            if exc.not_found:
                return None
            self.error = str(exc)
            self.client.close()
            self.client = None
            raise

    def pod(self, namespace, name):
        if self.live:
            try:
                return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}"), "live"
            except KubeError:
                pass
        row = Pod.objects.filter(cluster=self.cluster, namespace=namespace, name=name).first()
        return (row.raw if row else None), "mirror"

    def claim(self, namespace, name):
        if self.live:
            try:
                return self.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"), "live"
            except KubeError:
                pass
        row = ResourceClaim.objects.filter(cluster=self.cluster, namespace=namespace, name=name).first()
        return (row.raw if row else None), "mirror"

    def events(self, namespace, name, uid):
        """Events about one object, live; from the mirror when the API server is not asked (None if neither has them)."""
        if not self.live:
            return self.mirrored_events("Pod", namespace, name, uid)
        try:
            doc = (
                self.get(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": f"involvedObject.name={name}"})
                or {}
            )
        except KubeError:
            return self.mirrored_events("Pod", namespace, name, uid)
        items = [e for e in doc.get("items") or [] if (e.get("involvedObject") or {}).get("uid") in (None, "", uid)]
        items.sort(
            key=lambda e: (
                e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
            )
        )
        return [
            {
                "type": e.get("type"),
                "reason": e.get("reason"),
                "message": e.get("message"),
                "count": e.get("count"),
                "at": e.get("lastTimestamp") or e.get("eventTime"),
            }
            for e in items[-20:]
        ]

    def mirrored_events(self, kind, namespace, name, uid):
        from mirror.models import KubeEvent

        rows = list(KubeEvent.objects.about(self.cluster.id, kind, name, namespace, uid)[:20])
        if not rows:
            return None
        return [
            {"type": e.type, "reason": e.reason, "message": e.message, "count": e.count, "at": e.last_seen}
            for e in reversed(rows)
        ]

    def driver_pods(self, driver, node):
        """Pods of `driver` on `node`: (list of {name, namespace, phase, ready}, how they were found) or (None, why)."""
        selectors = []
        label = ops_setting("DRIVER_POD_LABEL")
        if label:
            selectors.append(f"{label}={driver}")
        extra = (ops_setting("DRIVER_POD_SELECTORS") or {}).get(driver)
        if extra:
            selectors.append(extra)
        found = {}
        if self.live:
            try:
                for selector in selectors:
                    doc = (
                        self.get("/api/v1/pods", {"labelSelector": selector, "fieldSelector": f"spec.nodeName={node}"})
                        or {}
                    )
                    for p in doc.get("items") or []:
                        if (p.get("spec") or {}).get("nodeName") == node:
                            found[(p["metadata"].get("namespace"), p["metadata"].get("name"))] = p
                return [_driver_pod_view(p) for p in found.values()], selectors
            except KubeError:
                pass
        for row in Pod.objects.filter(cluster=self.cluster, node_name=node):
            if any(label_selector_matches(s, row.labels) for s in selectors):
                found[(row.namespace, row.name)] = row.raw
        return [_driver_pod_view(p) for p in found.values()], selectors


def _driver_pod_view(pod):
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    meta = pod.get("metadata") or {}
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "phase": status.get("phase"), "ready": ready}


def _scoped_driver_pod(view, namespaces):
    """A driver pod as a reader who sees the driver pods of `namespaces` (None: all) may: one of another
    namespace counts for the check (its phase, ready) but is not named."""
    if namespaces is None or view["namespace"] in namespaces:
        return view
    return {**view, "namespace": "", "name": ""}


def _driver_pod_label(view, phase=False):
    name = f"{view['namespace']}/{view['name']}" if view["name"] else gettext("a driver pod in another namespace")
    return f"{name} ({view['phase']})" if phase else name


def step(key, title, status, detail, **data):
    return {"key": key, "title": title, "status": status, "detail": detail, "data": data}


def pod_claim_names(pod):
    """[(pod claim name, claim name or '', template name or '')] for the pod's claims, extended-resource claim included."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    generated = {s.get("name"): s.get("resourceClaimName") or "" for s in status.get("resourceClaimStatuses") or []}
    out = []
    for ref in spec.get("resourceClaims") or []:
        name = ref.get("name") or ""
        out.append(
            (name, ref.get("resourceClaimName") or generated.get(name, ""), ref.get("resourceClaimTemplateName") or "")
        )
    ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        out.append(("(extended resources)", ext, ""))
    return out


def scheduling_step(pod):
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    phase = status.get("phase") or "Unknown"
    if node:
        return step(
            "scheduling",
            pgettext("pending check", "Scheduled"),
            PASS,
            gettext("Bound to node %(node)s; phase %(phase)s.") % {"node": node, "phase": phase},
            node=node,
            phase=phase,
        )
    if cond and cond.get("status") == "False":
        # The scheduler's reason stays as the scheduler wrote it; its message is shown once, verbatim,
        # in the answer above the checks (explain_pod: report["scheduler_message"]).
        reason = cond.get("reason") or gettext("Not scheduled")
        return step(
            "scheduling",
            pgettext("pending check", "Scheduled"),
            FAIL,
            gettext("%(reason)s (the scheduler's message is quoted above).") % {"reason": reason}
            if cond.get("message")
            else reason,
            reason=cond.get("reason"),
            message=cond.get("message"),
            phase=phase,
        )
    return step(
        "scheduling",
        pgettext("pending check", "Scheduled"),
        WARN,
        gettext(
            "Not scheduled yet and no PodScheduled condition: the scheduler has not tried "
            "(scheduling gates, or the claim does not exist yet)."
        ),
        phase=phase,
    )


def claim_steps(cluster, reader, pod, pod_claim, claim_name, template, visible_namespaces=None, user_key=None):
    meta, _status = pod.get("metadata") or {}, pod.get("status") or {}
    pod_uid, node = meta.get("uid"), (pod.get("spec") or {}).get("nodeName")
    steps = []
    if not claim_name:
        steps.append(
            step(
                "exists",
                gettext("Claim exists"),
                FAIL,
                gettext(
                    "No claim created yet from template %(template)s (the resource-claim controller writes it into the pod's "
                    "status; look for FailedResourceClaimCreation events, or a missing template)."
                )
                % {"template": repr(template)},
            )
        )
        return steps, None
    claim, _ = reader.claim(meta.get("namespace"), claim_name)
    if claim is None:
        steps.append(
            step(
                "exists",
                gettext("Claim exists"),
                FAIL,
                gettext("ResourceClaim %(claim)s does not exist in %(namespace)s.")
                % {"claim": claim_name, "namespace": meta.get("namespace")},
            )
        )
        return steps, None
    cmeta, cstatus = claim.get("metadata") or {}, claim.get("status") or {}
    if cmeta.get("deletionTimestamp"):
        steps.append(
            step(
                "exists",
                gettext("Claim exists"),
                FAIL,
                gettext("ResourceClaim %(claim)s is being deleted: new pods using it are gated.")
                % {"claim": claim_name},
            )
        )
    else:
        steps.append(
            step("exists", gettext("Claim exists"), PASS, gettext("ResourceClaim %(claim)s.") % {"claim": claim_name})
        )
    allocation = cstatus.get("allocation")
    if not allocation:
        steps.append(
            step(
                "allocated",
                pgettext("pending check", "Allocated"),
                FAIL,
                gettext("Not allocated: no node has devices that satisfy it (see the engine's explanation)."),
            )
        )
        steps.append(
            engine_step(cluster, meta.get("namespace"), claim_name, visible_namespaces, pod=pod, user_key=user_key)
        )
        return steps, claim
    claim_node = ResourceClaim.node_from_selector(allocation.get("nodeSelector"))
    results = (allocation.get("devices") or {}).get("results") or []
    devices = [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results]
    shown = ", ".join(devices) or gettext("(no devices)")
    steps.append(
        step(
            "allocated",
            pgettext("pending check", "Allocated"),
            PASS,
            (gettext("Allocated %(devices)s on %(node)s.") if claim_node else gettext("Allocated %(devices)s."))
            % {"devices": shown, "node": claim_node},
            node=claim_node,
            devices=devices,
        )
    )
    reserved = list(cstatus.get("reservedFor") or [])
    if any(e.get("uid") == pod_uid for e in reserved):
        steps.append(
            step("reserved", gettext("Reserved for this pod"), PASS, gettext("status.reservedFor names this pod."))
        )
    elif node:
        steps.append(
            step(
                "reserved",
                gettext("Reserved for this pod"),
                FAIL,
                gettext(
                    "The pod is bound but the claim is not reserved for it: the kubelet "
                    "refuses to start it (reserved for: %(consumers)s)."
                )
                % {"consumers": ", ".join(e.get("name", "?") for e in reserved) or gettext("nobody")},
            )
        )
    else:
        others = ", ".join(e.get("name", "?") for e in reserved)
        steps.append(
            step(
                "reserved",
                gettext("Reserved for this pod"),
                INFO if not others else WARN,
                gettext(
                    "Not reserved yet (the scheduler reserves it when it binds the pod); reserved for %(consumers)s."
                )
                % {"consumers": others}
                if others
                else gettext("Not reserved yet (the scheduler reserves it when it binds the pod)."),
            )
        )
    steps.append(prepared_step(pod, claim, results))
    return steps, claim


def prepared_step(pod, claim, results):
    cstatus = claim.get("status") or {}
    seen = {
        (d.get("driver"), d.get("pool"), d.get("device")): {c.get("type"): c for c in d.get("conditions") or []}
        for d in cstatus.get("devices") or []
    }
    failed, pending = [], []
    for r in results:
        conds = seen.get((r.get("driver"), r.get("pool"), r.get("device")), {})
        name = f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
        failed += [
            f"{name}: {c} ({(conds.get(c) or {}).get('message') or 'True'})"
            for c in r.get("bindingFailureConditions") or []
            if (conds.get(c) or {}).get("status") == "True"
        ]
        pending += [
            f"{name}: {c}" for c in r.get("bindingConditions") or [] if (conds.get(c) or {}).get("status") != "True"
        ]
    device_conditions = {f"{k[0]}/{k[1]}/{k[2]}": {t: c.get("status") for t, c in v.items()} for k, v in seen.items()}
    if failed:
        return step(
            "prepared",
            pgettext("pending check", "Devices prepared"),
            FAIL,
            gettext("Binding failed: %(conditions)s") % {"conditions": "; ".join(failed)},
            conditions=device_conditions,
        )
    if pending:
        return step(
            "prepared",
            pgettext("pending check", "Devices prepared"),
            WARN,
            gettext("Waiting for binding conditions: %(conditions)s") % {"conditions": "; ".join(pending)},
            conditions=device_conditions,
        )
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Running" or phase in TERMINAL:
        return step(
            "prepared",
            pgettext("pending check", "Devices prepared"),
            PASS,
            gettext("The pod's containers started (phase %(phase)s).") % {"phase": phase},
            conditions=device_conditions,
        )
    if (pod.get("spec") or {}).get("nodeName"):
        return step(
            "prepared",
            pgettext("pending check", "Devices prepared"),
            WARN,
            gettext(
                "The pod is bound but not running: the kubelet may be failing to prepare the "
                "devices (look for FailedPrepareDynamicResources events, and at the driver below)."
            ),
            conditions=device_conditions,
        )
    return step(
        "prepared",
        pgettext("pending check", "Devices prepared"),
        INFO,
        gettext("Not applicable until the pod is bound to a node."),
        conditions=device_conditions,
    )


def engine_step(cluster, namespace, claim_name, visible_namespaces=None, pod=None, user_key=None):
    """Where the claim could be allocated for this pod: the pod's node filters (its tolerations, selector,
    requests) first, as the scheduler runs them, then DRA; names the first failing filter per node.
    Run by a preview worker on behalf of `user_key` (admission counts it like any preview)."""
    row = ResourceClaim.objects.filter(cluster=cluster, namespace=namespace, name=claim_name).first()
    if row is None:
        return step(
            "engine",
            gettext("Where could it fit?"),
            INFO,
            gettext("The claim is not in the mirror yet: no per-node explanation."),
        )
    try:
        from claims.stuck import summarize_preview

        full = request_preview(
            cluster,
            user_key=user_key,
            claim=row,
            visible_namespaces=visible_namespaces,
            pod=pod,
            with_remedies=True,
        )
        result = summarize_preview(full)
    except Exception as exc:  # an engine failure is reported, the rest of the checklist still runs
        return step(
            "engine",
            gettext("Where could it fit?"),
            WARN,
            gettext("The allocation engine could not explain it: %(error)s") % {"error": exc},
        )
    summary = result["summary"]
    fits = summary.get("fits", 0)
    common = (summary.get("mostCommonReason") or {}).get("example") or ""
    filtered = filter_rejections_text(summary)
    if fits:
        caveat = "; ".join(
            gettext("%(plugin)s not simulated (%(reason)s)") % {"plugin": n["plugin"], "reason": n["reason"]}
            for n in (summary.get("nodeFilters") or {}).get("notSimulated") or []
        )
        text = (
            gettext(
                "The engine finds %(fits)s node(s) where it fits now: the scheduler may not have retried yet, or %(caveat)s."
            )
            if caveat
            else gettext("The engine finds %(fits)s node(s) where it fits now: the scheduler may not have retried yet.")
        )
        return step(
            "engine",
            gettext("Where could it fit?"),
            INFO,
            text % {"fits": fits, "caveat": caveat} + (f" {filtered}" if filtered else ""),
            **result,
        )
    # The answer (the blocker in one sentence) comes from the nodes that could serve the request; the
    # scheduler's own message is quoted once, in the answer (explain_pod).
    # The headline itself leads the report (explain_pod's answer); the evidence row gives the counts.
    sentences = headline_text(result.get("verdict"))
    text = gettext("Fits on none of %(nodes)s nodes.") % {"nodes": grouped(summary.get("nodes", 0))}
    if not sentences and common:
        text += " " + gettext("Most common reason: %(reason)s.") % {"reason": plain(common).rstrip(".")}
    if filtered:
        text += f" {filtered}"
    post = post_filter_text(summary)
    for node in result.get("nodes") or ():
        node["reason"] = plain(node.get("reason"))
    return step("engine", gettext("Where could it fit?"), FAIL, text + (f" {post}" if post else ""), **result)


def driver_steps(cluster, reader, node, drivers, driver_namespaces=None):
    """For each driver expected on `node`: slices published, pool complete, driver pod running."""
    out = []
    node_row = Node.objects.filter(cluster=cluster, name=node).first()
    if node_row is None:
        out.append(
            step(
                "node",
                gettext("Node %(node)s") % {"node": node},
                FAIL,
                gettext("Node %(node)s is not known (deleted?).") % {"node": node},
            )
        )
    elif node_row.ready is False:
        out.append(
            step(
                "node",
                gettext("Node %(node)s") % {"node": node},
                FAIL,
                gettext("Node %(node)s is NotReady since %(since)s.")
                % {"node": node, "since": node_row.ready_changed_at},
            )
        )
    else:
        out.append(
            step(
                "node",
                gettext("Node %(node)s") % {"node": node},
                PASS,
                gettext("Ready.") if node_row.ready else gettext("Readiness unknown."),
            )
        )
    slices = list(ResourceSlice.objects.filter(cluster=cluster, node_name=node))
    pod_drivers = set(drivers)
    drivers = sorted(pod_drivers | {s.driver for s in slices})
    for driver in drivers:
        start = len(out)
        mine = [s for s in slices if s.driver == driver]
        published = gettext("%(driver)s: slices published") % {"driver": driver}
        running = gettext("%(driver)s: driver pod running") % {"driver": driver}
        if not mine:
            out.append(
                step(
                    f"slices:{driver}",
                    published,
                    FAIL,
                    gettext(
                        "No ResourceSlice of %(driver)s for node %(node)s: the driver's kubelet plugin is not running or not "
                        "registered."
                    )
                    % {"driver": driver, "node": node},
                )
            )
        else:
            out.append(
                step(
                    f"slices:{driver}", published, PASS, gettext("%(count)s slice(s).") % {"count": grouped(len(mine))}
                )
            )
            for pool in sorted({s.pool for s in mine}):
                out.append(pool_step(cluster, driver, pool))
        pods, selectors = reader.driver_pods(driver, node)
        pods = [_scoped_driver_pod(p, driver_namespaces) for p in pods or ()]
        if not selectors:
            out.append(
                step(
                    f"driverpod:{driver}",
                    running,
                    INFO,
                    gettext(
                        "No label selector known for this driver's pods (settings GPUDASH_OPS DRIVER_POD_LABEL / DRIVER_POD_SELECTORS)."
                    ),
                )
            )
        elif not pods:
            out.append(
                step(
                    f"driverpod:{driver}",
                    running,
                    FAIL,
                    gettext("No driver pod on %(node)s matching %(selectors)s.")
                    % {"node": node, "selectors": (" {} ".format(gettext("or"))).join(selectors)},
                )
            )
        elif any(p["phase"] == "Running" and p["ready"] for p in pods):
            out.append(
                step(
                    f"driverpod:{driver}",
                    running,
                    PASS,
                    gettext("%(pods)s running and ready.") % {"pods": ", ".join(_driver_pod_label(p) for p in pods)},
                    pods=pods,
                )
            )
        else:
            out.append(
                step(
                    f"driverpod:{driver}",
                    running,
                    FAIL,
                    gettext("Driver pod(s) not ready: %(pods)s")
                    % {"pods": ", ".join(_driver_pod_label(p, phase=True) for p in pods)},
                    pods=pods,
                )
            )
        if pod_drivers and driver not in pod_drivers:
            for s in out[start:]:
                s["data"]["unrelated"] = True  # the pod uses none of this driver's devices: evidence only
    return out


def pool_step(cluster, driver, pool):
    rows = list(
        ResourceSlice.objects.filter(cluster=cluster, driver=driver, pool=pool).values(
            "pool_generation", "resource_slice_count"
        )
    )
    newest = max(r["pool_generation"] for r in rows)
    current = [r for r in rows if r["pool_generation"] == newest]
    expected = max(r["resource_slice_count"] for r in current)
    title = gettext("%(driver)s: pool %(pool)s complete") % {"driver": driver, "pool": pool}
    counts = {"published": len(current), "expected": expected, "generation": newest}
    if len(current) < expected:
        return step(
            f"pool:{driver}/{pool}",
            title,
            FAIL,
            gettext(
                "%(published)s of %(expected)s slices of generation %(generation)s published: "
                "the scheduler skips incomplete pools for most requests."
            )
            % counts,
        )
    return step(
        f"pool:{driver}/{pool}",
        title,
        PASS,
        gettext("%(published)s/%(expected)s slices, generation %(generation)s.") % counts,
    )


def explain_pod(
    cluster,
    namespace,
    name,
    live=True,
    visible_namespaces=None,
    driver_namespaces=None,
    user_key=None,
    may_release=False,
):
    """The whole checklist for one pod; PodNotFound if neither the API server nor the mirror knows it.
    `visible_namespaces`: the viewer's scope; the engine's reasons then do not name other namespaces' claims.
    `driver_namespaces` (roles.driver_namespaces): the driver pods named, and whose logs are read.
    `user_key`: who asks, for the preview workers' admission control. `may_release`: the viewer may run
    the release dry run (a release remedy then links to it)."""
    with ClusterReader(cluster, live=live) as reader:
        pod, source = reader.pod(namespace, name)
        if pod is None:
            raise PodNotFound(f"pod {namespace}/{name} not found in cluster {cluster.name}")
        meta = pod.get("metadata") or {}
        report = {
            "cluster": cluster.name,
            "pod": {
                "namespace": namespace,
                "name": name,
                "uid": meta.get("uid"),
                "phase": (pod.get("status") or {}).get("phase"),
                "node": (pod.get("spec") or {}).get("nodeName") or "",
            },
            "source": source,
            "steps": [scheduling_step(pod)],
            "events": reader.events(namespace, name, meta.get("uid")),
            "claims": [],
            "drivers": [],
        }
        nodes, drivers = set(), set()
        for pod_claim, claim_name, template in pod_claim_names(pod):
            steps, claim = claim_steps(
                cluster, reader, pod, pod_claim, claim_name, template, visible_namespaces, user_key
            )
            report["claims"].append({"pod_claim": pod_claim, "claim": claim_name, "template": template, "steps": steps})
            if claim:
                allocation = (claim.get("status") or {}).get("allocation") or {}
                claim_node = ResourceClaim.node_from_selector(allocation.get("nodeSelector"))
                if claim_node:
                    nodes.add(claim_node)
                drivers |= {
                    r.get("driver") for r in (allocation.get("devices") or {}).get("results") or [] if r.get("driver")
                }
        if not report["claims"]:
            report["steps"].append(
                step(
                    "claims",
                    gettext("Uses DRA"),
                    INFO,
                    gettext("The pod has no resource claims: DRA is not why it is Pending."),
                )
            )
        pod_node = report["pod"]["node"]
        if pod_node:
            nodes.add(pod_node)
        for node in sorted(nodes):
            report["drivers"].append(
                {"node": node, "steps": driver_steps(cluster, reader, node, drivers, driver_namespaces)}
            )
        if live and _needs_driver_logs(report):
            from claims.driverlogs import limits, node_driver_logs

            report["driver_logs"] = [
                t
                for d in report["drivers"]
                for t in node_driver_logs(
                    cluster,
                    d["node"],
                    drivers or None,
                    client=reader.client if reader.live else None,
                    namespaces=driver_namespaces,
                )
            ]
            report["driver_log_lines"], report["driver_log_bytes"] = limits()
        if source == "mirror" and live:
            report["note"] = gettext(
                "API server not reachable (%(error)s): read from the database mirror (events as far as the Events "
                "mirror holds them)."
            ) % {"error": reader.error}
        _add_answer(report, cluster, may_release)
        report["verdict"] = verdict(report)
        return report


def _needs_driver_logs(report):
    """A claim allocated but not prepared, or a driver check failing: the driver's log is the next step."""
    steps = [s for c in report["claims"] for s in c["steps"]] + [s for d in report["drivers"] for s in d["steps"]]
    return bool(report["drivers"]) and any(
        (s["key"] == "prepared" and s["status"] in (WARN, FAIL))
        or (s["key"].startswith(("driverpod:", "slices:")) and s["status"] == FAIL)
        for s in steps
    )


def _add_answer(report, cluster, may_release):
    """The answer first: the scheduler's message (once, verbatim), the engine's headline and its
    verified remedies, from the first claim the engine explained."""
    report["scheduler_message"] = next(
        (s["data"].get("message") for s in report["steps"] if s["key"] == "scheduling" and s["data"].get("message")),
        "",
    )
    engines = [s for c in report["claims"] for s in c["steps"] if s["key"] == "engine" and s["data"].get("verdict")]
    report["headline"] = [line for s in engines for line in headline_text(s["data"]["verdict"])]
    report["remedies"] = [
        r
        for s in engines
        if not s["data"]["verdict"].get("fits")
        for r in present(s["data"].get("remedies"), cluster, may_release)
    ]
    report["remedies_searched"] = any(not s["data"]["verdict"].get("fits") for s in engines)


def verdict(report):
    """The answer in one line: a running pod says so; a pending pod gets the engine's headline (the
    nodes that could serve it and what blocks them now), else the first failing check, in checklist
    order, among the checks about the pod's own drivers."""
    ordered = list(report["steps"])
    for c in report["claims"]:
        ordered += c["steps"]
    for d in report["drivers"]:
        ordered += d["steps"]
    ordered = [s for s in ordered if not s["data"].get("unrelated")]
    phase, node = report["pod"]["phase"], report["pod"]["node"]
    failing = [s for s in ordered if s["status"] == FAIL]
    if phase == "Running" or phase in TERMINAL:
        detail = (
            gettext("The pod is running on %(node)s.") % {"node": node}
            if phase == "Running"
            else gettext("The pod has finished (%(phase)s).") % {"phase": phase}
        )
        if failing:
            detail += " " + gettext("A check still fails (see the evidence): %(title)s.") % {
                "title": failing[0]["title"]
            }
        return {"status": "running", "title": gettext("Running") if phase == "Running" else phase, "detail": detail}
    if report.get("headline"):
        return {"status": FAIL, "title": gettext("Why it is Pending"), "detail": " ".join(report["headline"])}
    for status in (FAIL, WARN):
        hit = next((s for s in ordered if s["status"] == status), None)
        if hit:
            return {"status": status, "title": hit["title"], "detail": hit["detail"]}
    return {
        "status": INFO,
        "title": gettext("No DRA problem found"),
        "detail": gettext("Every DRA check passes; look at other scheduling constraints."),
    }
