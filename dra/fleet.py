"""Fleet-wide previews: place claims on every node, summarise, and count headroom."""

import json
import time
from collections import Counter, defaultdict
from typing import NamedTuple

from .deadline import FILTER_TIMEOUT_SECONDS, Deadline, TimedOut
from .documents import EXTENDED_CLAIM_NAME, extended_resource_claim
from .errors import AllocationError, InputError
from .explain import explain
from .gcpause import collector_paused
from .model import ADMIN_ACCESS_LABEL, MAX_DEVICES_PER_CLAIM, node_selector_matches
from .nodefilters import (
    DYNAMIC_RESOURCES,
    FILTER_ORDER,
    NODE_AFFINITY,
    NODE_NAME,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    REASON_TERMS_CONFLICT,
    TAINT_TOLERATION,
    SchedulingPod,
    filter_entry,
    rejected,
    run_filters,
    served_by_device_plugin,
)
from .preemption import fit_error_message, postfilter
from .search import DEADLINE, ERROR, NODE_FAILURE, SUCCESS, NodeAllocator, Overlay, Plan, deadline_message

# Node labels that name a node pool, most specific first.
NODE_POOL_LABELS = (
    "gpudash.io/node-pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node-pool",
    "nodepool",
    "node.kubernetes.io/instance-type",
)


def _compile(expr, owner, index):
    from .cel import CelCompileError, compile_selector

    try:
        return compile_selector(expr)
    except CelCompileError as exc:
        where = ""
        if getattr(exc, "line", None) is not None:
            where = f" at line {exc.line}, column {exc.column}"
        raise AllocationError(
            f"{owner}: selector #{index}: CEL compile error{where}: {getattr(exc, 'message', None) or exc}"
        ) from None


def prepare(inventory, claims):
    """Up-front checks shared by every node (brief 2.3); hard errors raise AllocationError.

    Upstream interleaves these checks with building `allocationMode: All` lists, which evaluate
    selectors on the node's devices (and may fail first). When an `All` request comes before the
    first failing check, that check is deferred to the search at its position (Plan.deferred).
    """
    chains = {}
    class_chains = {}
    seen_all = False
    for ci, claim in enumerate(claims):
        try:
            seen_all = _prepare_claim(inventory, claim, ci, chains, class_chains, seen_all)
        except _Failed as failed:
            if not failed.after_all:
                raise failed.error from None
            plan = Plan(inventory, claims, chains)
            plan.deferred = (failed.position, failed.error)
            return plan
    return Plan(inventory, claims, chains)


class _Failed(Exception):
    def __init__(self, position, error, after_all):
        self.position, self.error, self.after_all = position, error, after_all


def _prepare_claim(inventory, claim, ci, chains, class_chains, seen_all):
    """Checks of one claim in upstream order; returns whether an `All` request has been seen."""
    f = inventory.features

    def fail(position, message):
        raise _Failed(position, AllocationError(message), seen_all)

    if claim.uses_admin_access and inventory.admin_access_allowed(claim.namespace) is False:
        fail(
            (ci, -1, 0),
            (
                f"claim {claim.ref}: adminAccess needs namespace {claim.namespace} to have label "
                f"{ADMIN_ACCESS_LABEL}=true (the API server would reject this claim)"
            ),
        )
    fixed = 0
    has_all = False
    for ri, req in enumerate(claim.requests):
        if req.prioritized and not f.prioritized_list:
            fail(
                (ci, ri, -2),
                f"claim {claim.ref}, request {req.name}: has subrequests, but the DRAPrioritizedList feature is disabled",
            )
        if not f.consumable_capacity:
            for v in req.variants:
                if v.capacity_requests:
                    what = f"subrequest {v.sub}" if v.sub else f"request {req.name}"
                    fail(
                        (ci, ri, -1),
                        f"claim {claim.ref}, {what}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                    )
        for vi, v in enumerate(req.variants):
            pos = (ci, ri, vi)
            where = f"claim {claim.ref}, request {v.error_name}"
            for i, sel in enumerate(v.selectors):
                if not ((sel or {}).get("cel") or {}).get("expression"):
                    fail(pos, f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
            if v.admin and not f.admin_access:
                fail(pos, f"{where}: admin access is requested, but the feature is disabled")
            if not v.class_name:
                fail(pos, f"{where}: missing device class name (unsupported request type?)")
            cls = inventory.device_class(v.class_name)
            if cls is None:
                fail(pos, f"{where}: could not retrieve device class {v.class_name} (no DeviceClass of that name)")
            if v.mode not in ("ExactCount", "All"):
                fail(pos, f"{where}: unsupported count mode {v.mode}")
            try:
                if cls.name not in class_chains:
                    chain = []
                    for i, sel in enumerate(cls.selectors):
                        expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                        if not expr:
                            raise AllocationError(
                                f"class {cls.name}: selector #{i}: CEL expression empty (unsupported selector type?)"
                            )
                        chain.append((f"class {cls.name}", i, _compile(expr, f"class {cls.name}", i), expr))
                    class_chains[cls.name] = chain
                chain = list(class_chains[cls.name])
                exprs = []
                for i, sel in enumerate(v.selectors):
                    expr = sel["cel"]["expression"]
                    chain.append((f"claim {claim.ref}", i, _compile(expr, f"claim {claim.ref}", i), expr))
                    exprs.append(expr)
            except AllocationError as exc:
                fail(pos, str(exc))
            chains[id(v)] = ((cls.name, tuple(exprs)), chain)
            if v.mode == "All":
                has_all = seen_all = True
        counts = [v.count for v in req.variants if v.mode == "ExactCount"]
        if len(counts) == len(req.variants):
            fixed += min(counts) if counts else 0
    # With `All` requests the count depends on the node: the search checks it (NodeAllocator.run).
    if not has_all and fixed > MAX_DEVICES_PER_CLAIM:
        fail(
            (ci, len(claim.requests), 0),
            f"claim {claim.ref}: number of requested devices {fixed} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}",
        )
    for i, c in enumerate(claim.constraints):
        # The allocator accepts distinctAttribute whatever the gates (the API server drops the field
        # on create when DRAConsumableCapacity is off there; a claim that still has it is honoured).
        if not (c.match or c.distinct):
            fail(
                (ci, len(claim.requests), 1),
                f"claim {claim.ref}, constraint #{i}: empty constraint (unsupported constraint type?)",
            )
    return seen_all


def _node_entry(outcome, reason=None):
    fits = outcome.status == SUCCESS
    return {
        "node": outcome.node,
        "fits": fits,
        "results": outcome.result_dicts() if fits else [],
        "reason": reason,
        "error": outcome.message if outcome.status == ERROR else None,
    }


# Reason codes of the node filters (the summary groups failing nodes by code).
FILTER_CODES = {
    NODE_UNSCHEDULABLE: "node-unschedulable",
    NODE_NAME: "node-name",
    TAINT_TOLERATION: "node-taints",
    NODE_AFFINITY: "node-affinity",
    NODE_PORTS: "node-ports",
    NODE_RESOURCES_FIT: "node-resources",
}


class _PodPlans:
    """The pod's node filters and its DRA plan per node. Nodes whose device plugin advertises some of
    the pod's DeviceClass-mapped extended resources get a plan whose extended-resource claim leaves
    those out (NodeResourcesFit counted them instead), as upstream builds one claim variant per node."""

    def __init__(self, inventory, claims, pod, extra=None, deadline=None, filter_timeout=FILTER_TIMEOUT_SECONDS):
        self.inventory, self.claims, self.pod, self.extra = inventory, claims, pod, extra
        self.limits = {"deadline": deadline, "filter_timeout": filter_timeout}  # for every NodeAllocator
        self.dra = _all_mapped(inventory, pod) if pod is not None else frozenset()
        has_ext = pod is not None and pod.raw is not None and any(c.name == EXTENDED_CLAIM_NAME for c in claims)
        self.mapped = self.dra if has_ext else frozenset()  # names whose claim requests vary per node
        self.base = prepare(inventory, claims)  # hard errors raise
        self._variants = {
            frozenset(): (self.base, NodeAllocator(self.base, extra=extra, **self.limits) if claims else None)
        }

    def filters(self, name, usage=None):
        """[FilterResult] up to the first rejection ([] without a pod or for a node without a Node object)."""
        facts = self.inventory.node_facts.get(name)
        if self.pod is None or facts is None:
            return []
        return run_filters(self.pod, facts, self.inventory.usage_of(name) if usage is None else usage, self.dra)

    def single(self):
        """(plan, allocator) when every node gets the same one (no per-node extended-resource
        variants), else None: then for_node decides per node."""
        return self._variants[frozenset()] if not self.mapped else None

    def for_node(self, name):
        """(plan, allocator or None when DRA has nothing to allocate on this node)."""
        served = frozenset()
        if self.mapped:
            served = (
                served_by_device_plugin(self.inventory.node_facts.get(name), self.mapped)
                if name in self.inventory.node_facts
                else frozenset()
            )
        hit = self._variants.get(served)
        if hit is None:
            others = [c for c in self.claims if c.name != EXTENDED_CLAIM_NAME]
            ext = extended_resource_claim(self.inventory, self.pod.raw, self.pod.ref.split("/", 1)[0], served=served)
            variant = others + ([ext] if ext is not None else [])
            plan = prepare(self.inventory, variant) if variant else self.base
            hit = self._variants[served] = (
                plan,
                NodeAllocator(plan, extra=self.extra, **self.limits) if variant else None,
            )
        return hit


def _all_mapped(inventory, pod):
    """DRA-mappable names among the pod's requests (NodeResourcesFit leaves them to DRA where the node lacks them)."""
    if not pod.requests:
        return frozenset()
    dra = inventory.dra_extended_resources()
    return frozenset(r for r in pod.requests if r in dra)


@collector_paused()  # a fleet-wide preview: one entry per node, no cycles (gcpause.py)
def preview(
    inventory,
    claims,
    *,
    bound=(),
    nodes=None,
    explain_failures=True,
    reason_codes=False,
    pod=None,
    node_filters=True,
    deadline=None,
    filter_timeout=FILTER_TIMEOUT_SECONDS,
    post_filter=True,
):
    """Place `claims` on every node (or `nodes`). `bound` = [(ref, nodeSelector)] of already-allocated
    claims of the same pod, which must be usable on the node.

    `pod` (nodefilters.SchedulingPod): the pod being placed; its node filters run first on each node, in
    the scheduler's order, and a node they reject never fits. Without one, a would-be pod with no
    tolerations (beyond the default ones) and no selector is assumed, unless `node_filters` is False.

    Returns the documented JSON shape: {"nodes": [...], "summary": {...}}. With `reason_codes` each
    node entry also carries `code` (the summary's reason code, None where it fits), which the UI
    needs to group thousands of failing nodes by reason.

    `filter_timeout` (seconds, None = none): each node's search, as the scheduler's per-node Filter
    timeout (10 s); past it the node has the scheduler's timeout error. `deadline` (seconds or a
    deadline.Deadline): the whole call; nodes not decided by then get code "deadline", and
    `summary.deadline` says how many. `post_filter=False` leaves out what the PostFilter plugins
    (preemption) would say when no node fits (the what-if only needs the verdicts).
    """
    started = time.perf_counter()
    deadline = Deadline.of(deadline)
    names = list(nodes) if nodes is not None else inventory.node_names
    unknown = [n for n in names if n not in inventory.nodes]
    if unknown:
        raise InputError(f"unknown node(s): {', '.join(unknown[:5])}")
    if pod is None and node_filters:
        pod = SchedulingPod.would_be()
    if not node_filters:
        pod = None
    try:
        plans = _PodPlans(inventory, claims, pod, deadline=deadline, filter_timeout=filter_timeout)
    except AllocationError as exc:
        entries = [
            {"node": n, "fits": False, "results": [], "reason": None, "error": str(exc), "filters": []} for n in names
        ]
        codes = ["error"] * len(entries)
        return _with_codes(
            entries, codes, reason_codes, summarize(entries, claims, inventory, started, codes=codes, pod=pod)
        )
    warmed = _warm(inventory, deadline)
    entries, codes, sched = [], [], []
    # The loop below runs once per node of the fleet: attribute lookups hoisted, no generators.
    facts_of, usage_of, node_view = inventory.node_facts.get, inventory.usage_of, inventory.node
    dra_names = plans.dra
    unsimulated = (
        [
            {"plugin": plugin, "passed": None, "reason": f"not simulated: {why}", "reasons": []}
            for plugin, why in pod.not_simulated
        ]
        if pod is not None
        else []
    )
    single = plans.single()
    expired = deadline.expired
    for name in names:
        if not warmed or expired():
            entries.append(_deadline_entry(name, deadline))
            codes.append("deadline")
            sched.append([])
            continue
        facts = facts_of(name) if pod is not None else None
        results = run_filters(pod, facts, usage_of(name), dra_names) if facts is not None else ()
        if results and results[-1].passed is False:
            failed = results[-1]
            entries.append(
                {
                    "node": name,
                    "fits": False,
                    "results": [],
                    "reason": f"{failed.plugin}: {failed.reason}",
                    "error": None,
                    "filters": [r.to_dict() for r in results],
                }
            )
            codes.append(FILTER_CODES[failed.plugin])
            sched.append(failed.reasons)
            continue
        entry, code, reasons = _dynamic_resources(
            plans, name, node_view(name), bound, single, explain_failures, deadline
        )
        fits = entry["fits"]
        if fits:
            dra = filter_entry(DYNAMIC_RESOURCES, True)
        else:
            error = entry["error"]
            dra = filter_entry(DYNAMIC_RESOURCES, False, error or ", ".join(reasons), tuple(reasons))
        filters = [r.to_dict() for r in results]
        if unsimulated:
            filters.extend(unsimulated)  # shared by the nodes, as filter_entry's
        filters.append(dra)
        entry["filters"] = filters
        entries.append(entry)
        codes.append(code)
        sched.append(reasons)
    summary = summarize(entries, claims, inventory, started, codes, sched=sched, pod=pod)
    if (
        post_filter
        and pod is not None
        and not pod.hypothetical
        and summary["schedulerMessage"]
        and "deadline" not in codes
        and not summary["errors"]
    ):
        _add_post_filter(summary, pod, plans, names, entries, bound, deadline)
    if deadline.seconds is not None:
        summary["deadline"] = {
            "seconds": deadline.seconds,
            "reached": "deadline" in codes,
            "undecidedNodes": codes.count("deadline"),
        }
    return _with_codes(entries, codes, reason_codes, summary)


def _dynamic_resources(plans, name, view, bound, single, explain_failures, deadline):
    """(entry, code, scheduler reasons) of the DynamicResources Filter on one node: the pod's other
    claims are allocated, then its allocated claims must be usable there.

    The scheduler notes an allocated claim whose node selector excludes the node, but still tries
    to allocate the others first: a failed allocation is what the node reports ("cannot allocate all
    claims"), and only where the allocation succeeds does the node say "resourceclaim not available
    on the node" (and only there does the claim become one that PostFilter may deallocate)."""
    blocked = None
    if bound:
        blocked = next((ref for ref, sel in bound if sel and not node_selector_matches(sel, name, view.labels)), None)
    plan, allocator = single if single is not None else plans.for_node(name)
    if allocator is not None:
        outcome = allocator.run(view)
        if outcome.status != SUCCESS or not blocked:
            return _dra_entry(outcome, plan, view, explain_failures, deadline, allocator)
    if blocked:
        entry = {
            "node": name,
            "fits": False,
            "results": [],
            "reason": f"claim {blocked} is allocated and not available on this node (resourceclaim not available on the node)",
            "error": None,
        }
        return entry, "unavailable", [SCHEDULER_REASONS["unavailable"]]
    # every extended resource comes from the node's device plugin: nothing for DRA
    return {"node": name, "fits": True, "results": [], "reason": None, "error": None}, None, []


def _add_post_filter(summary, pod, plans, names, entries, bound, deadline):
    """What the PostFilter plugins answer when no node fits a Pod (DynamicResources, then
    DefaultPreemption; preemption.py): `summary.postFilter`, and their text appended to
    `schedulerMessage` as the scheduler appends it. A would-be pod for a bare claim gets none: its
    priority and claims are the real pod's, which the preview does not know."""
    inventory = plans.inventory
    if pod.node_names == frozenset():
        # NodeAffinity's PreFilter rejected the pod (its matchFields terms conflict), so the other
        # PreFilters, DynamicResources' among them, never ran. DynamicResources' PostFilter, the first,
        # then finds none of its cycle state and fails with the state lookup's own error text, "not
        # found"; a PostFilter error ends the run, so DefaultPreemption adds nothing (kube-scheduler
        # v1.36, checked against the real framework: "0/N nodes are available: pod affinity terms
        # conflict. not found").
        not_found = "not found"
        summary["postFilter"] = {
            "message": not_found,
            "dynamicResources": {"message": not_found, "deallocates": []},
            "preemption": None,
            "undecided": None,
        }
        summary["schedulerMessage"] = f"{summary['schedulerMessage']} {not_found}"
        return
    dra_message, deallocates = _dra_post_filter(pod, inventory, entries, bound)
    potential = []
    for name in names:
        failed = rejected(plans.filters(name))  # the verdict of the loop again, with its resolvable flag
        if failed is not None and failed.resolvable:
            potential.append(name)
    on_node = defaultdict(list)
    if potential:
        wanted = set(potential)
        for fp in inventory.pod_footprints.values():  # the bound, non-terminal pods
            if fp["node"] in wanted:
                on_node[fp["node"]].append(fp)
    single = plans.single()

    def recheck(name, evicted):
        usage = inventory.usage_of(name)
        for fp in evicted:
            usage = usage.minus(fp)
        failed = rejected(plans.filters(name, usage))
        if failed is not None:
            return False, list(failed.reasons), None, None
        entry, code, reasons = _dynamic_resources(plans, name, inventory.node(name), bound, single, False, deadline)
        if code == "deadline":
            return False, [], None, entry["reason"]
        error = entry["error"]
        return entry["fits"], reasons, (f'running "DynamicResources" filter plugin: {error}' if error else None), None

    verdict = postfilter(pod, len(names), potential, on_node.__getitem__, recheck)
    # Each PostFilter's text, joined: none at all when preemption finds a node (its Success ends the run).
    # A PostFilter that fails with an error ends the run with its text alone.
    message = (
        (verdict["message"] if verdict["error"] else f"{dra_message}, {verdict['message']}")
        if verdict["message"]
        else None
    )
    summary["postFilter"] = {
        "message": message,
        "dynamicResources": {"message": dra_message, "deallocates": deallocates},
        "preemption": verdict,
        "undecided": verdict["undecided"],
    }
    if message:
        summary["schedulerMessage"] = f"{summary['schedulerMessage']} {message}"


def _dra_post_filter(pod, inventory, entries, bound):
    """(message, claims it would deallocate) of DynamicResources' PostFilter: an allocated claim of
    the pod that was not available on some node DynamicResources checked, and that no other pod has
    reserved, gets deallocated so that the next attempt may allocate it elsewhere. Only the nodes that
    said "resourceclaim not available on the node" count: where the pod's other claims could not be
    allocated, the scheduler never records the allocated claim as unavailable."""
    if not bound:
        return "still not schedulable", []
    unavailable = SCHEDULER_REASONS["unavailable"]
    checked = [
        e["node"]
        for e in entries
        if e["filters"]
        and e["filters"][-1]["plugin"] == DYNAMIC_RESOURCES
        and unavailable in e["filters"][-1]["reasons"]
    ]
    uid = ((pod.raw or {}).get("metadata") or {}).get("uid")
    freeable = []
    for ref, selector in bound:
        if not selector or not any(
            not node_selector_matches(selector, n, inventory.nodes.get(n) or {}) for n in checked
        ):
            continue
        ns, _, name = ref.partition("/")
        reserved = (((inventory.claims.get((ns, name)) or {}).get("status") or {}).get("reservedFor")) or []
        if not reserved or (len(reserved) == 1 and uid and reserved[0].get("uid") == uid):
            freeable.append(ref)
    if freeable:
        return "deallocation of ResourceClaim completed", freeable[:1]  # upstream picks one
    return "still not schedulable", []


def _warm(inventory, deadline):
    """Fleet-wide work the first node view of an Inventory does, within the deadline; False if not done."""
    try:
        inventory._counter_only_pools(deadline)
        return True
    except TimedOut:
        return False


def _deadline_entry(name, deadline):
    return {
        "node": name,
        "fits": False,
        "results": [],
        "reason": deadline_message(deadline),
        "error": None,
        "filters": [],
    }


def _dra_entry(outcome, plan, view, explain_failures, deadline=None, allocator=None):
    """(entry, code, scheduler reasons) of the DynamicResources Filter on one node. `allocator`: the
    one that ran, whose kept direct answer may hold this failure's explanation already."""
    if outcome.status == SUCCESS:
        return _node_entry(outcome), None, []
    if outcome.status == ERROR:
        return _node_entry(outcome), "error", []
    if outcome.status == DEADLINE:
        return _node_entry(outcome, outcome.message), "deadline", []
    if not explain_failures:
        code, text = "unschedulable", "cannot allocate all claims"
    elif allocator is not None:
        code, text = allocator.kept_explanation(lambda: explain(plan, view, deadline))
    else:
        code, text = explain(plan, view, deadline)
    reason = "cannot allocate all claims"
    if outcome.status == NODE_FAILURE:
        text, code, reason = f"{outcome.message}; {text}", "invalid-pools", SCHEDULER_REASONS["invalid-pools"]
    return _node_entry(outcome, text), code, [reason]


def _with_codes(entries, codes, wanted, summary):
    if wanted:
        for entry, code in zip(entries, codes):
            entry["code"] = code
    return {"nodes": entries, "summary": summary}


def summarize(entries, claims, inventory, started, codes, sched=None, pod=None):
    """`sched`: per entry, the scheduler's reasons for it (a filter's, or DynamicResources'); derived
    from the codes when not given."""
    fits = sum(1 for e in entries if e["fits"])
    errors = sum(1 for e in entries if e["error"])
    by_code = Counter(c for c in codes if c)
    examples = {}
    for entry, code in zip(entries, codes):
        if code and code not in examples:
            examples[code] = entry["reason"] or entry["error"]
    reasons = [{"code": code, "nodes": n, "example": examples[code]} for code, n in by_code.most_common()]
    if sched is None:
        sched = [[SCHEDULER_REASONS.get(c, "cannot allocate all claims")] if c and c != "error" else [] for c in codes]
    scheduler = Counter(r for node_reasons in sched for r in node_reasons)
    filter_codes = set(FILTER_CODES.values())
    filtered = sum(1 for c in codes if c in filter_codes)
    return {
        "claims": [c.ref for c in claims],
        "nodes": len(entries),
        "fits": fits,
        "errors": errors,
        "filtered": filtered,
        "mostCommonReason": reasons[0] if reasons else None,
        "reasons": reasons,
        "problems": list(inventory.problems),
        "schedulerMessage": (
            f"0/{len(entries)} nodes are available: {REASON_TERMS_CONFLICT}."
            if pod is not None and pod.node_names == frozenset() and entries
            else scheduler_message(entries, scheduler)
        ),  # a PreFilter failure: no per-node counts
        "nodeFilters": _filters_summary(inventory, pod, [e for e, c in zip(entries, codes) if c in filter_codes]),
        "seconds": round(time.perf_counter() - started, 4),
    }


def _filters_summary(inventory, pod, entries=()):
    if pod is None:
        return {"enabled": False}
    return {
        "enabled": True,
        "rejections": _rejections(entries),
        "pod": pod.describe(),
        "simulated": list(FILTER_ORDER) + [DYNAMIC_RESOURCES],
        "notSimulated": [{"plugin": p, "reason": why} for p, why in pod.not_simulated],
        "podsCounted": len(inventory.pod_footprints),
        "podsKnown": inventory.pods_known,
    }


def _rejections(entries, examples=5):
    """Per node filter, in the scheduler's order: how many nodes it rejected first, with what, which ones.
    `entries`: the nodes a filter rejected (their last filter is the failing one)."""
    by_plugin = {}
    for entry in entries:
        failed = entry["filters"][-1]
        item = by_plugin.get(failed["plugin"])
        if item is None:
            item = by_plugin[failed["plugin"]] = {
                "plugin": failed["plugin"],
                "nodes": 0,
                "reasons": {},
                "exampleNodes": [],
            }
        item["nodes"] += 1
        counts = item["reasons"]
        for reason in failed["reasons"]:
            counts[reason] = counts.get(reason, 0) + 1
        if len(item["exampleNodes"]) < examples:
            item["exampleNodes"].append(entry["node"])
    out = []
    for plugin in FILTER_ORDER:
        if plugin in by_plugin:
            item = by_plugin[plugin]
            item["reasons"] = dict(sorted(item["reasons"].items()))
            out.append(item)
    return out


SCHEDULER_REASONS = {
    "invalid-pools": "invalid resource pools were encountered",
    "unavailable": "resourceclaim not available on the node",
}


def scheduler_message(entries, counts):
    """What `kubectl describe pod` would show if no node fits (FitError.Error), else None: each reason
    counted once per rejected node, "<count> <reason>" sorted as strings (Go sort.Strings).

    A hard error on any node comes first, even where other nodes fit: the scheduler filters every
    node of a small fleet, and the first Filter that fails with an error ends the whole attempt
    (status Error, no node is chosen, no PostFilter runs), so the pod stays pending with that text."""
    if not entries:
        return None
    error = next((e["error"] for e in entries if e["error"]), None)
    if error:
        return f'running "DynamicResources" filter plugin: {error}'
    if any(e["fits"] for e in entries):
        return None
    return fit_error_message(len(entries), counts)


def node_pool_of(labels, label=None):
    for key in (label,) if label else NODE_POOL_LABELS:
        if key and labels.get(key):
            return labels[key]
    return "(no node pool label)"


class Fits(NamedTuple):
    """Where a pod fits (SharedFits.fits)."""

    nodes: frozenset  # names of the nodes where it fits
    error: str | None  # the first node's error when every node fails with one
    undecided: bool  # the deadline came before every node was decided
    erring: frozenset  # names of the nodes that failed with an error


class SharedFits:
    """Where each of many pods fits on one inventory, as `preview` would say pod by pod, with the
    work shared between the pods (a what-if re-checks every pending pod).

    On each node a preview runs the pod's node filters, then DynamicResources. The filters read only
    the pod's filter inputs (nodeName, tolerations, nodeSelector, required affinity, requests, host
    ports) and the node; DynamicResources reads only the claims' specs (a claim's namespace where
    admin access depends on it), the allocated claims' node selectors, the node's devices, and for
    DRA-backed extended resources the pod's containers and namespace. So pods with equal filter
    inputs share the filter verdicts of a node, pods with equal claims share its DynamicResources
    verdict, and DynamicResources runs only on nodes whose filters some pod passes. An error's text
    names the pod's own claims: where the answer is an error, its text comes from the pod's own
    preview. One instance per inventory and request (its deadline; allocators are not thread-safe).
    """

    def __init__(self, inventory, deadline=None, filter_timeout=FILTER_TIMEOUT_SECONDS):
        self.inventory = inventory
        self.deadline = Deadline.of(deadline)
        self.filter_timeout = filter_timeout
        self._filters = {}  # filter key -> _FilterVerdicts
        self._dra = {}  # DRA key -> (_PodPlans, single, bound, {node: (fits, error)}), or AllocationError
        self._warmed = False

    def fits(self, claims, bound=(), pod=None, nodes=None):
        """Fits: the nodes among `nodes` (None: all) where the pod fits, the error text when every
        node fails with an error (else None), whether the deadline cut the answer short, and the
        nodes that failed with an error: what preview(inventory, claims, bound=bound, nodes=nodes,
        pod=pod, explain_failures=False, post_filter=False, deadline=...) says in its node entries
        and summary."""
        inv = self.inventory
        if nodes is None:
            names = inv.node_names
        else:
            names = list(nodes)
            unknown = [n for n in names if n not in inv.nodes]
            if unknown:
                raise InputError(f"unknown node(s): {', '.join(unknown[:5])}")
        if pod is None:
            pod = SchedulingPod.would_be()
        dra = self._dra_of(claims, bound, pod)
        if isinstance(dra, AllocationError):  # prepare's up-front checks: every node has the error
            error = self._own_error(claims, bound, pod, names) if names else None
            return Fits(frozenset(), error, False, frozenset(names))
        if not self._warmed:
            self._warmed = _warm(inv, self.deadline)
            if not self._warmed:
                return Fits(frozenset(), None, True, frozenset())
        plans, single, shared_bound, verdicts = dra
        filters = self._filters_of(pod)
        passing = filters.passing(names) if nodes is None else filters.among(names)
        if passing is None:
            return Fits(frozenset(), None, True, frozenset())
        expired, node_view = self.deadline.expired, inv.node
        fits, erring = [], []
        for name in passing:
            verdict = verdicts.get(name)
            if verdict is None:
                if expired():
                    return Fits(frozenset(fits), None, True, frozenset(erring))  # preview: the rest undecided
                entry, code, _ = _dynamic_resources(
                    plans, name, node_view(name), shared_bound, single, False, self.deadline
                )
                if code == "deadline":
                    return Fits(frozenset(fits), None, True, frozenset(erring))
                verdict = verdicts[name] = (entry["fits"], entry["error"])
            if verdict[0]:
                fits.append(name)
            elif verdict[1] is not None:
                erring.append(name)
        # Nodes the filters reject carry no error: an error answer needs every node to pass them.
        error = None
        if names and not fits and len(erring) == len(names):
            error = self._own_error(claims, bound, pod, names)
        return Fits(frozenset(fits), error, False, frozenset(erring))

    def _own_error(self, claims, bound, pod, names):
        """The error text of the first node in this pod's own preview (the texts name its claims)."""
        result = preview(
            self.inventory,
            claims,
            bound=bound,
            nodes=names[:1],
            pod=pod,
            explain_failures=False,
            post_filter=False,
            deadline=self.deadline,
            filter_timeout=self.filter_timeout,
        )
        return result["nodes"][0]["error"]

    def _filters_of(self, pod):
        key = _json_key(
            [
                pod.node_name,
                [t.to_dict() for t in pod.tolerations],
                pod.node_selector,
                pod.required,
                pod.requests,
                [list(p) for p in pod.host_ports],
            ]
        )
        hit = self._filters.get(key)
        if hit is None:
            hit = self._filters[key] = _FilterVerdicts(self.inventory, pod, self.deadline)
        return hit

    def _dra_of(self, claims, bound, pod):
        has_ext = pod.raw is not None and any(c.name == EXTENDED_CLAIM_NAME for c in claims)
        per_node = None
        if has_ext:  # the claim is rebuilt per node from the pod's containers (_PodPlans.for_node)
            spec = pod.raw.get("spec") or {}
            per_node = [
                pod.ref.split("/", 1)[0],
                sorted(_all_mapped(self.inventory, pod)),
                [
                    (c or {}).get("resources")
                    for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
                ],
            ]
        key = _json_key(
            [
                [[c.namespace if c.uses_admin_access else "", claim_inputs(c)] for c in claims],
                [sel for _, sel in bound],
                per_node,
            ]
        )
        hit = self._dra.get(key)
        if hit is None:
            try:
                plans = _PodPlans(
                    self.inventory, claims, pod, deadline=self.deadline, filter_timeout=self.filter_timeout
                )
                hit = (plans, plans.single(), list(bound), {})
            except AllocationError as exc:
                hit = exc
            self._dra[key] = hit
        return hit


class _FilterVerdicts:
    """The node filters' verdicts for one set of pod filter inputs (SharedFits), node by node."""

    def __init__(self, inventory, pod, deadline):
        self.inventory, self.pod, self.deadline = inventory, pod, deadline
        self.dra_names = _all_mapped(inventory, pod)
        self.passes = {}  # node -> whether the filters let the pod through
        self.all_passing = None  # the nodes of the whole fleet that pass, in its order

    def passing(self, names):
        """The nodes of the whole fleet (`names`: inventory.node_names) that pass; None if the deadline
        came first."""
        if self.all_passing is None:
            found = self.among(names)
            if found is None:
                return None
            self.all_passing = found
        return self.all_passing

    def among(self, names):
        inv, pod, dra_names, passes = self.inventory, self.pod, self.dra_names, self.passes
        facts_of, usage_of, expired = inv.node_facts.get, inv.usage_of, self.deadline.expired
        out = []
        for name in names:
            ok = passes.get(name)
            if ok is None:
                if expired():
                    return None
                facts = facts_of(name)
                results = run_filters(pod, facts, usage_of(name), dra_names) if facts is not None else ()
                ok = passes[name] = not (results and results[-1].passed is False)
            if ok:
                out.append(name)
        return out


def claim_inputs(claim):
    """What the allocator reads of a claim (its requests, constraints and config), as JSON-able lists:
    equal for claims it places alike whatever their names."""
    return [
        [[r.name, r.prioritized, [[v.sub, v.raw] for v in r.variants]] for r in claim.requests],
        [k.raw for k in claim.constraints],
        claim.config,
    ]


def _json_key(value):
    return json.dumps(value, sort_keys=True, default=str)


@collector_paused()  # a fleet-wide preview: one entry per node, no cycles (gcpause.py)
def headroom(
    inventory,
    claims,
    *,
    max_per_node=64,
    pool_label=None,
    nodes=None,
    pod=None,
    node_filters=True,
    deadline=None,
    filter_timeout=FILTER_TIMEOUT_SECONDS,
):
    """How many more copies of `claims` fit right now: greedy, node after node, each copy placed on
    top of the previous ones (devices, shares, counters, and the pod's own requests and host ports),
    like the scheduler would one pod at a time. Nodes the pod's filters reject count nothing.

    `deadline` (seconds or a Deadline) stops counting when it passes: `deadlineReached` is then true
    and the counts are a lower bound. A node whose search times out counts the copies found so far.
    """
    started = time.perf_counter()
    deadline = Deadline.of(deadline)
    stopped = False
    if pod is None and node_filters:
        pod = SchedulingPod.would_be()
    if not node_filters:
        pod = None
    overlay = Overlay()
    plans = _PodPlans(
        inventory, claims, pod, extra=overlay, deadline=deadline, filter_timeout=filter_timeout
    )  # hard errors raise
    copy_fp = {"requests": pod.requests, "hostPorts": pod.host_ports} if pod is not None else None
    by_node, by_pool, by_model = {}, defaultdict(int), defaultdict(int)
    capped, filtered = [], 0
    for name in nodes if nodes is not None else inventory.node_names:
        if deadline.expired() or not _warm(inventory, deadline):
            stopped = True
            break
        view = inventory.node(name)
        usage = inventory.usage_of(name)
        if rejected(plans.filters(name, usage)) is not None:
            filtered += 1
            continue
        _, allocator = plans.for_node(name)
        n = 0
        while n < max_per_node:
            if n and copy_fp is not None and rejected(plans.filters(name, usage)) is not None:
                break  # the copies so far used up the node's cpu, memory, pods or ports
            if allocator is None:
                model = "(device plugin)"
            else:
                outcome = allocator.run(view)
                if outcome.status != SUCCESS:
                    stopped = stopped or outcome.status == DEADLINE
                    break
                overlay.commit(allocator)
                first = next((p for picks in outcome.picks for p in picks), None)
                model = first.device.display_model() if first else "(no devices)"
            n += 1
            by_model[model] += 1
            if copy_fp is not None:
                usage = usage.plus(copy_fp)
        if n:
            by_node[name] = n
            by_pool[node_pool_of(view.labels, pool_label)] += n
        if n >= max_per_node:
            capped.append(name)
    return {
        "claims": [c.ref for c in claims],
        "copies": sum(by_node.values()),
        "byNodePool": dict(sorted(by_pool.items())),
        "byDeviceModel": dict(sorted(by_model.items())),
        "byNode": by_node,
        "cappedNodes": capped,
        "filteredNodes": filtered,
        "maxPerNode": max_per_node,
        "deadlineReached": stopped,
        "seconds": round(time.perf_counter() - started, 4),
    }


def allocate(inventory, claims, node, filter_timeout=FILTER_TIMEOUT_SECONDS, deadline=None):
    """One Allocate(node, claims) call, as the scheduler's Filter makes it (for tests and the CLI)."""
    from .search import Outcome

    try:
        plan = prepare(inventory, claims)
    except AllocationError as exc:
        return Outcome(node, ERROR, message=str(exc))
    return NodeAllocator(plan, deadline=Deadline.of(deadline), filter_timeout=filter_timeout).run(inventory.node(node))
