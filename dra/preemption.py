"""DefaultPreemption's PostFilter (kube-scheduler v1.36), as far as a preview's verdict needs it: the
second sentence the scheduler adds to "0/N nodes are available: ..." when no node fits, and the nodes
where evicting lower-priority pods would make room.

Read from pkg/scheduler/framework/plugins/defaultpreemption and framework/preemption. When every
node rejects a pod, the scheduler runs DefaultPreemption: a pod with `preemptionPolicy: Never` is not
eligible at all. Otherwise it tries only the nodes whose rejection was Unschedulable, not
UnschedulableAndUnresolvable (FilterResult.resolvable: NodePorts and most of NodeResourcesFit; taints,
affinity, cordons, a PreFilter rejection and every DynamicResources rejection are unresolvable). On
each it takes away every pod of lower priority and runs all filters again: no such pod gives "No
preemption victims found for incoming pod", a filter that still rejects gives its own reasons, and
a node where the pod then fits is a candidate: the scheduler evicts pods there and nominates it, and
its message has no second sentence. Nodes not tried count as "Preemption is not helpful for
scheduling". The sentence is "preemption: " and a FitError text over all nodes.

Left out: PodDisruptionBudgets and the choice among candidates (they decide which node and which
victims, not whether preemption helps), nominated pods, extenders, the pod's own nominated node
holding a terminating victim, and PriorityClass objects (the priority of a pasted pod whose
priorityClassName is not a system class is unknown: the verdict then says so instead of guessing).
"""

from collections import Counter

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
PREFIX = "preemption: "
MAX_CANDIDATES_LISTED = 10


def fit_error_message(total, counts):
    """FitError.Error's text: every "<count> <reason>" sorted as Go's sort.Strings sorts (by bytes,
    so "10 …" comes before "2 …")."""
    parts = sorted((f"{n} {reason}" for reason, n in counts.items()), key=lambda s: s.encode())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def postfilter(pod, total, potential, pods_on, recheck):
    """What DefaultPreemption answers for `pod` (nodefilters.SchedulingPod) when none of the `total`
    nodes fits.

    `potential`: the nodes whose rejection was resolvable, in node order. `pods_on(node)`: the pod
    footprints bound there (nodefilters.pod_footprint). `recheck(node, evicted)`: every filter and
    DynamicResources again with the `evicted` footprints gone, as (fits, scheduler reasons, error,
    undecided): `error` the text of a Filter that fails with an error there (status Error, e.g. a CEL
    runtime error), `undecided` why the preview cannot tell (its own deadline).

    A node whose dry run fails with an error is no candidate, and the error does not stop the others:
    if some node is a candidate, preemption goes ahead and the errors are dropped. If none is, the
    preemption's answer is that error (status Error) instead of a FitError text: "preemption: " and
    the errors joined as an error aggregate prints them (one distinct text: the text alone; several:
    "[a, b]" in the order the parallel dry runs finished, which a preview cannot know: undecided).

    Returns {"eligible", "message", "candidates", "undecided", "error"}: `message` is the sentence the
    scheduler appends (None when preemption would succeed or cannot be decided), `candidates` the
    nodes where it would make room (with how many lower-priority pods run there), `undecided` why the
    sentence is not given, `error` whether the sentence is an error (the scheduler then appends it
    alone, without DynamicResources' PostFilter text)."""
    verdict = {"eligible": pod.preempts, "message": None, "candidates": [], "undecided": None, "error": False}
    if not pod.preempts:
        verdict["message"] = PREFIX + NOT_ELIGIBLE_NEVER
        return verdict
    if not potential:
        verdict["message"] = PREFIX + fit_error_message(total, {NOT_HELPFUL: total})
        return verdict
    if pod.priority is None:
        verdict["undecided"] = (
            f"the pod's priorityClassName {pod.priority_class!r} is not a system class and gpudash does not mirror "
            "PriorityClasses: its priority decides which pods it may evict (set spec.priority to preview it)"
        )
        return verdict
    statuses, unknown, errors = Counter(), [], {}
    for node in potential:
        pods = pods_on(node)
        if any(fp.get("priority") is None for fp in pods):
            unknown.append(node)
            continue
        lower = [fp for fp in pods if fp["priority"] < pod.priority]
        if not lower:
            statuses[NO_VICTIMS] += 1
            continue
        fits, reasons, error, undecided = recheck(node, lower)
        if undecided:
            verdict["undecided"] = f"node {node}, with its lower-priority pods evicted: {undecided}"
            return verdict
        if error:
            errors.setdefault(error, node)
            continue
        if fits:
            verdict["candidates"].append({"node": node, "lowerPriorityPods": len(lower)})
            if len(verdict["candidates"]) >= MAX_CANDIDATES_LISTED:
                break  # preemption succeeds: the rest changes nothing the scheduler prints
            continue
        for reason in reasons:
            statuses[reason] += 1
    if verdict["candidates"]:
        return verdict  # the scheduler would preempt: no second sentence
    if unknown:
        verdict["undecided"] = (
            f"{len(unknown)} node(s) that preemption would try (e.g. {unknown[0]}) run pods whose priority gpudash "
            "has not read yet (mirrored by an older version; the next relist of Pods reads it)"
        )
        return verdict
    if len(errors) == 1:
        verdict["message"], verdict["error"] = PREFIX + next(iter(errors)), True
        return verdict
    if errors:
        first = ", ".join(f"node {node}: {text}" for text, node in errors.items())
        verdict["undecided"] = (
            f"the dry runs fail with {len(errors)} different errors ({first}); the scheduler lists them "
            "in the order its parallel dry runs finish"
        )
        return verdict
    if total > len(potential):  # only nodes that were not tried say so (never "0 Preemption is …")
        statuses[NOT_HELPFUL] += total - len(potential)
    verdict["message"] = PREFIX + fit_error_message(total, statuses)
    return verdict
