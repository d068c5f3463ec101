"""Fleet-wide previews: place claims on every node, summarise, and count headroom."""

import time
from collections import Counter, defaultdict

from .errors import AllocationError, InputError
from .explain import explain
from .model import MAX_DEVICES_PER_CLAIM, ADMIN_ACCESS_LABEL, node_selector_matches
from .search import ERROR, NODE_FAILURE, SUCCESS, NodeAllocator, Overlay, Plan

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
        raise AllocationError(f"{owner}: selector #{index}: CEL compile error{where}: {getattr(exc, 'message', None) or exc}") from None


def prepare(inventory, claims):
    """Up-front checks shared by every node (brief 2.3); hard errors raise AllocationError."""
    f = inventory.features
    chains = {}
    class_chains = {}
    for claim in claims:
        if claim.uses_admin_access and inventory.admin_access_allowed(claim.namespace) is False:
            raise AllocationError(
                f"claim {claim.ref}: adminAccess needs namespace {claim.namespace} to have label "
                f"{ADMIN_ACCESS_LABEL}=true (the API server would reject this claim)"
            )
        fixed = 0
        for req in claim.requests:
            if req.prioritized and not f.prioritized_list:
                raise AllocationError(f"claim {claim.ref}, request {req.name}: has subrequests, but the DRAPrioritizedList feature is disabled")
            for v in req.variants:
                where = f"claim {claim.ref}, request {v.label}"
                if v.admin and not f.admin_access:
                    raise AllocationError(f"{where}: adminAccess requested, but the DRAAdminAccess feature is disabled")
                if v.capacity_requests and not f.consumable_capacity:
                    raise AllocationError(f"{where}: capacity requests, but the DRAConsumableCapacity feature is disabled")
                if not v.class_name:
                    raise AllocationError(f"{where}: missing device class name")
                cls = inventory.device_class(v.class_name)
                if cls is None:
                    raise AllocationError(f"{where}: could not retrieve device class {v.class_name} (no DeviceClass of that name)")
                if v.mode not in ("ExactCount", "All"):
                    raise AllocationError(f"{where}: unsupported count mode {v.mode}")
                if cls.name not in class_chains:
                    chain = []
                    for i, sel in enumerate(cls.selectors):
                        expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                        if not expr:
                            raise AllocationError(f"class {cls.name}: selector #{i}: CEL expression empty (unsupported selector type?)")
                        chain.append((f"class {cls.name}", i, _compile(expr, f"class {cls.name}", i), expr))
                    class_chains[cls.name] = chain
                chain = list(class_chains[cls.name])
                exprs = []
                for i, sel in enumerate(v.selectors):
                    expr = ((sel or {}).get("cel") or {}).get("expression") or ""
                    if not expr:
                        raise AllocationError(f"claim {claim.ref}: selector #{i}: CEL expression empty (unsupported selector type?)")
                    chain.append((f"claim {claim.ref}", i, _compile(expr, f"claim {claim.ref}", i), expr))
                    exprs.append(expr)
                chains[id(v)] = ((cls.name, tuple(exprs)), chain)
            counts = [v.count for v in req.variants if v.mode == "ExactCount"]
            if len(counts) == len(req.variants):
                fixed += min(counts) if counts else 0
        if fixed > MAX_DEVICES_PER_CLAIM:
            raise AllocationError(f"claim {claim.ref}: number of requested devices {fixed} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}")
        for c in claim.constraints:
            if not (c.match or (c.distinct and f.consumable_capacity)):
                raise AllocationError(f"claim {claim.ref}: empty constraint (unsupported constraint type?)")
    return Plan(inventory, claims, chains)


def _node_entry(outcome, reason=None):
    fits = outcome.status == SUCCESS
    return {
        "node": outcome.node,
        "fits": fits,
        "results": [p.to_dict() for picks in outcome.picks for p in picks] if fits else [],
        "reason": reason,
        "error": outcome.message if outcome.status == ERROR else None,
    }


def preview(inventory, claims, *, bound=(), nodes=None, explain_failures=True, reason_codes=False):
    """Place `claims` on every node (or `nodes`). `bound` = [(ref, nodeSelector)] of already-allocated
    claims of the same pod, which must be usable on the node.

    Returns the documented JSON shape: {"nodes": [...], "summary": {...}}. With `reason_codes` each
    node entry also carries `code` (the summary's reason code, None where it fits), which the UI
    needs to group thousands of failing nodes by reason.
    """
    started = time.perf_counter()
    names = list(nodes) if nodes is not None else inventory.node_names
    unknown = [n for n in names if n not in inventory.nodes]
    if unknown:
        raise InputError(f"unknown node(s): {', '.join(unknown[:5])}")
    try:
        plan = prepare(inventory, claims)
    except AllocationError as exc:
        entries = [{"node": n, "fits": False, "results": [], "reason": None, "error": str(exc)} for n in names]
        codes = ["error"] * len(entries)
        return _with_codes(entries, codes, reason_codes, summarize(entries, claims, inventory, started, codes=codes))
    allocator = NodeAllocator(plan)
    entries, codes = [], []
    for name in names:
        view = inventory.node(name)
        blocked = next((ref for ref, sel in bound if sel and not node_selector_matches(sel, name, view.labels)), None)
        if blocked:
            entries.append({"node": name, "fits": False, "results": [], "reason": f"claim {blocked} is allocated and not available on this node (resourceclaim not available on the node)", "error": None})
            codes.append("unavailable")
            continue
        outcome = allocator.run(view)
        if outcome.status == SUCCESS:
            entries.append(_node_entry(outcome))
            codes.append(None)
        elif outcome.status == ERROR:
            entries.append(_node_entry(outcome))
            codes.append("error")
        else:
            code, text = explain(plan, view) if explain_failures else ("unschedulable", "cannot allocate all claims")
            if outcome.status == NODE_FAILURE:
                text, code = f"{outcome.message}; {text}", "invalid-pools"
            entries.append(_node_entry(outcome, text))
            codes.append(code)
    return _with_codes(entries, codes, reason_codes, summarize(entries, claims, inventory, started, codes))


def _with_codes(entries, codes, wanted, summary):
    if wanted:
        for entry, code in zip(entries, codes):
            entry["code"] = code
    return {"nodes": entries, "summary": summary}


def summarize(entries, claims, inventory, started, codes):
    fits = sum(1 for e in entries if e["fits"])
    errors = sum(1 for e in entries if e["error"])
    by_code = Counter(c for c in codes if c)
    examples = {}
    for entry, code in zip(entries, codes):
        if code and code not in examples:
            examples[code] = entry["reason"] or entry["error"]
    reasons = [{"code": code, "nodes": n, "example": examples[code]} for code, n in by_code.most_common()]
    scheduler = Counter(SCHEDULER_REASONS.get(c, "cannot allocate all claims") for c in codes if c and c != "error")
    return {
        "claims": [c.ref for c in claims],
        "nodes": len(entries),
        "fits": fits,
        "errors": errors,
        "mostCommonReason": reasons[0] if reasons else None,
        "reasons": reasons,
        "problems": list(inventory.problems),
        "schedulerMessage": scheduler_message(entries, scheduler),
        "seconds": round(time.perf_counter() - started, 4),
    }


SCHEDULER_REASONS = {"invalid-pools": "invalid resource pools were encountered", "unavailable": "resourceclaim not available on the node"}


def scheduler_message(entries, counts):
    """What `kubectl describe pod` would show if no node fits (brief 6.1), else None."""
    if not entries or any(e["fits"] for e in entries):
        return None
    error = next((e["error"] for e in entries if e["error"]), None)
    if error:
        return f'running "DynamicResources" filter plugin: {error}'
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{len(entries)} nodes are available: {', '.join(parts)}."


def node_pool_of(labels, label=None):
    for key in ((label,) if label else NODE_POOL_LABELS):
        if key and labels.get(key):
            return labels[key]
    return "(no node pool label)"


def headroom(inventory, claims, *, max_per_node=64, pool_label=None, nodes=None):
    """How many more copies of `claims` fit right now: greedy, node after node, each copy placed on
    top of the previous ones (devices, shares, counters), like the scheduler would one pod at a time.
    """
    started = time.perf_counter()
    plan = prepare(inventory, claims)  # hard errors raise: there is no headroom to speak of
    overlay = Overlay()
    allocator = NodeAllocator(plan, extra=overlay)
    by_node, by_pool, by_model = {}, defaultdict(int), defaultdict(int)
    capped = []
    for name in (nodes if nodes is not None else inventory.node_names):
        view = inventory.node(name)
        n = 0
        while n < max_per_node:
            outcome = allocator.run(view)
            if outcome.status != SUCCESS:
                break
            overlay.commit(allocator)
            n += 1
            first = next((p for picks in outcome.picks for p in picks), None)
            by_model[first.device.display_model() if first else "(no devices)"] += 1
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
        "maxPerNode": max_per_node,
        "seconds": round(time.perf_counter() - started, 4),
    }


def allocate(inventory, claims, node):
    """One Allocate(node, claims) call, as the scheduler's Filter makes it (for tests and the CLI)."""
    from .search import Outcome

    try:
        plan = prepare(inventory, claims)
    except AllocationError as exc:
        return Outcome(node, ERROR, message=str(exc))
    return NodeAllocator(plan).run(inventory.node(node))
