"""Why a pod (or claim) fits nowhere, in one sentence over the nodes that matter.

The engine's per-node verdicts (fleet.preview) stay as they are; this module only sorts the nodes
that rejected the pod, per request, into two groups:

- **never**: the node can never serve the request as written: it publishes no device of the
  request's class, the request's own selectors leave none of them, or a node filter the pod cannot
  pass whatever happens to the cluster (its node selector or affinity, spec.nodeName);
- **blocked**: the node could serve it but not now: devices allocated (to whom, stuck or not),
  devices tainted, shared counters used by partitions, a constraint no set of free devices meets,
  fewer matching devices than the count, or the node NotReady, cordoned, tainted or full.

The answer is JSON-ready data (`verdict`) plus its sentence (`headline`), which takes a translation
function so that the web tier can say it in the reader's language. No Django here.
"""

from collections import Counter

from .errors import AllocationError
from .explain import request_funnels
from .fleet import prepare
from .nodefilters import NOT_READY_KEY, UNREACHABLE_KEY

# Node filters whose rejection no change in the cluster's state cures: only the pod's spec does.
PERMANENT_FILTERS = ("NodeName", "NodeAffinity")
NOT_READY_KEYS = (NOT_READY_KEY, UNREACHABLE_KEY)
MAX_NAMED = 3  # names listed per group before "and N more"


def node_state_block(inventory, entry):
    """(kind, detail) of a node filter's rejection that is "blocked now", or ("never", plugin) for a
    permanent one, or None when no node filter rejected the node."""
    filters = entry.get("filters") or []
    failed = filters[-1] if filters and filters[-1]["passed"] is False else None
    if failed is None or failed["plugin"] == "DynamicResources":
        return None
    plugin = failed["plugin"]
    if plugin in PERMANENT_FILTERS:
        return "never", plugin
    if plugin == "NodeUnschedulable":
        return "cordoned", None
    if plugin == "TaintToleration":
        facts = inventory.node_facts.get(entry["node"])
        taints = list(getattr(facts, "taints", None) or ())
        if any(t.get("key") in NOT_READY_KEYS for t in taints) or (facts is not None and facts.ready is False):
            return "not-ready", None
        return "node-taint", [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
    if plugin == "NodeResourcesFit":
        return "node-resources", failed["reason"]
    if plugin == "NodePorts":
        return "node-ports", failed["reason"]
    return "node-filter", f"{plugin}: {failed['reason']}"


def _device_block(funnel, code):
    """(kind, detail) of why the node's devices do not serve one request variant now."""
    if funnel.v.mode != "All" and funnel.n_sel < funnel.need:
        return "too-few", funnel.n_sel
    if funnel.n_alloc:
        return "allocated", funnel.n_alloc
    if funnel.n_taint:
        return "device-taint", funnel.n_taint
    if funnel.n_counter:
        return "counters", funnel.n_counter
    if funnel.n_cap:
        return "capacity", funnel.n_cap
    if code == "invalid-pools":
        return "invalid-pools", None
    return "constraint", None  # every request could be served alone: their constraints or combination fail


def verdict(inventory, claims, result, *, stuck=(), deleting=None):
    """Per request: the never / blocked split over the preview `result` (fleet.preview's answer for
    `claims` on `inventory`), with counts and names. `stuck`: refs ("ns/name") of claims the stuck
    detector holds stuck; `deleting`: refs of claims being deleted (default: read from the inventory).

    Returns {"fits": [nodes], "requests": [...], "schedulerMessage", "error"}; a request's entry:
    {"claim", "request", "count" (None for All), "class", "model", "never": {reason: [nodes]},
    "blocked": {kind: [{"node", ...}]}, "maxMatching", "serving": [nodes with enough devices]}."""
    entries = result.get("nodes") or []
    summary = result.get("summary") or {}
    out = {
        "fits": [e["node"] for e in entries if e["fits"]],
        "requests": [],
        "schedulerMessage": summary.get("schedulerMessage"),
        "error": next((e["error"] for e in entries if e.get("error")), None),
        "nodes": len(entries),
    }
    if out["fits"] or out["error"] or not claims:
        return out
    if deleting is None:
        deleting = {
            f"{ns}/{name}"
            for (ns, name), raw in inventory.claims.items()
            if ((raw or {}).get("metadata") or {}).get("deletionTimestamp")
        }
    stuck = set(stuck)
    try:
        plan = prepare(inventory, claims)
    except AllocationError as exc:
        out["error"] = str(exc)
        return out
    per_request = {}
    order = []
    for entry in entries:
        name = entry["node"]
        if name not in inventory.nodes:
            continue
        node_block = node_state_block(inventory, entry)
        for claim, req, funnels in request_funnels(plan, inventory.node(name)):
            key = (claim.ref, req.name)
            item = per_request.get(key)
            if item is None:
                v = req.variants[0]
                item = per_request[key] = {
                    "claim": claim.ref,
                    "request": req.name,
                    "count": v.count if v.mode != "All" else None,
                    "class": v.class_name,
                    "model": None,
                    "variants": [f.v.label for f in funnels] if len(funnels) > 1 else [],
                    "never": {},
                    "blocked": {},
                    "maxMatching": 0,
                    "serving": [],
                }
                order.append(key)
            _sort_node(item, name, entry, node_block, funnels, stuck, deleting)
    for key in order:
        item = per_request[key]
        # Only requests that some node cannot serve now matter; a request every candidate serves is no blocker.
        if item["blocked"] or item["never"] and not item["serving"]:
            out["requests"].append(item)
    if not out["requests"] and order:
        out["requests"].append(per_request[order[0]])
    return out


def _sort_node(item, name, entry, node_block, funnels, stuck, deleting):
    best = max(funnels, key=lambda f: (f.n_sel, len(f.free)))
    if item["model"] is None and best.sample is not None:
        item["model"] = device_model(best.sample)
    if all(f.n_class == 0 for f in funnels):
        item["never"].setdefault("no-device", []).append(name)
        return
    if all(f.n_sel == 0 for f in funnels):
        item["never"].setdefault("selector", []).append(name)
        return
    if node_block is not None and node_block[0] == "never":
        item["never"].setdefault(f"filter:{node_block[1]}", []).append(name)
        return
    item["maxMatching"] = max(item["maxMatching"], best.n_sel)
    enough = best.v.mode == "All" or best.n_sel >= best.need
    if enough:
        item["serving"].append(name)
    if node_block is not None:
        kind, detail = node_block
        item["blocked"].setdefault(kind, []).append(
            {"node": name, "detail": detail, "matching": best.n_sel, "free": len(best.free), "need": best.need}
        )
        return
    served = any(f.enough for f in funnels)
    if served and not enough:
        return  # another variant (firstAvailable) serves it here: this request is not what blocks the node
    kind, n = _device_block(best, entry.get("code"))
    if served and kind != "constraint":
        kind = "constraint"
    node = {"node": name, "devices": n, "matching": best.n_sel, "free": len(best.free), "need": best.need}
    if kind == "allocated":
        node["owners"] = list(best.owners)
        node["stuck"] = [o for o in best.owners if o in stuck]
        node["deleting"] = [o for o in best.owners if o in deleting]
    if kind == "device-taint":
        node["taints"] = [dict(t) for t in best.taints]
    item["blocked"].setdefault(kind, []).append(node)


def device_model(device):
    """What to call a device in a sentence: its model, and its partition profile where it has one."""
    model = device.display_model()
    profile = device.attribute(f"{device.driver}/profile")
    if profile and profile[1] not in (None, "") and str(profile[1]) != model:
        return f"{model} {profile[1]}"
    return model


def _identity(text):
    return text


def _names(names, gettext):
    shown = ", ".join(names[:MAX_NAMED])
    if len(names) > MAX_NAMED:
        shown += " " + gettext("and %(count)s more") % {"count": len(names) - MAX_NAMED}
    return shown


def _owner_names(nodes, gettext):
    owners = []
    for n in nodes:
        for o in n.get("owners") or ():
            if o not in owners:
                owners.append(o)
    return _names(owners, gettext)


def headline(answer, gettext=_identity, ngettext=None):
    """The verdict as one sentence per blocking request (a list of strings, most often one).
    `gettext`/`ngettext`: the translation functions (the web tier passes Django's)."""
    if ngettext is None:

        def ngettext(one, many, n):
            return one if n == 1 else many

    if answer.get("fits"):
        return [
            ngettext("It fits now on %(count)s node.", "It fits now on %(count)s nodes.", len(answer["fits"]))
            % {"count": len(answer["fits"])}
        ]
    if answer.get("error"):
        return [gettext("The request cannot be allocated anywhere: %(error)s") % {"error": answer["error"]}]
    return [_request_sentence(item, answer, gettext, ngettext) for item in answer.get("requests") or []]


def _request_sentence(item, answer, gettext, ngettext):
    what = item["model"] or item["class"]
    if item["count"] is None:
        need = gettext("needs every %(what)s device on one node") % {"what": what}
    else:
        need = gettext("needs %(count)s × %(what)s on one node") % {"count": item["count"], "what": what}
    prefix = gettext("Request %(request)s %(need)s") % {"request": item["request"], "need": need}
    blocked = item["blocked"]
    candidates = {n["node"] for nodes in blocked.values() for n in nodes}
    if not candidates:
        never = item["never"]
        if set(never) == {"no-device"}:
            return gettext("%(prefix)s: no node publishes a device of class %(cls)s.") % {
                "prefix": prefix,
                "cls": item["class"],
            }
        if "selector" in never and not any(k.startswith("filter:") for k in never):
            return gettext("%(prefix)s: its selectors match no device of class %(cls)s on any node.") % {
                "prefix": prefix,
                "cls": item["class"],
            }
        return gettext("%(prefix)s: no node that the pod may run on has such devices.") % {"prefix": prefix}
    if item["count"] is not None and item["maxMatching"] < item["count"]:
        return gettext("%(prefix)s: no node has more than %(max)s matching devices.") % {
            "prefix": prefix,
            "max": item["maxMatching"],
        }
    parts = []
    serving = len(item["serving"])
    if item["count"] is not None:
        parts.append(
            ngettext("%(count)s node has %(need)s or more", "%(count)s nodes have %(need)s or more", serving)
            % {"count": serving, "need": item["count"]}
        )
    for kind in BLOCK_ORDER:
        nodes = blocked.get(kind)
        if nodes:
            parts.append(_block_phrase(kind, nodes, item, gettext, ngettext))
    return gettext("%(prefix)s: %(parts)s.") % {"prefix": prefix, "parts": "; ".join(parts)}


BLOCK_ORDER = (
    "allocated",
    "device-taint",
    "counters",
    "capacity",
    "constraint",
    "too-few",
    "invalid-pools",
    "not-ready",
    "cordoned",
    "node-taint",
    "node-resources",
    "node-ports",
    "node-filter",
)


def _block_phrase(kind, nodes, item, gettext, ngettext):
    n = len(nodes)
    names = _names([x["node"] for x in nodes], gettext)
    if kind == "allocated":
        all_taken = all(x["devices"] == x["matching"] for x in nodes)
        text = (
            ngettext(
                "%(count)s has all its matching devices allocated (to %(owners)s",
                "%(count)s have all their matching devices allocated (to %(owners)s",
                n,
            )
            if all_taken
            else ngettext(
                "%(count)s has too few free devices (the others allocated to %(owners)s",
                "%(count)s have too few free devices (the others allocated to %(owners)s",
                n,
            )
        ) % {"count": n, "owners": _owner_names(nodes, gettext)}
        held_stuck = sum(1 for x in nodes if x.get("stuck"))
        if held_stuck:
            text += "; " + ngettext(
                "%(count)s node has devices held by a stuck claim",
                "%(count)s nodes have devices held by a stuck claim",
                held_stuck,
            ) % {"count": held_stuck}
        held_deleting = sum(1 for x in nodes if x.get("deleting"))
        if held_deleting:
            text += "; " + ngettext(
                "%(count)s node has devices held by a claim being deleted",
                "%(count)s nodes have devices held by a claim being deleted",
                held_deleting,
            ) % {"count": held_deleting}
        return text + ")"
    if kind == "device-taint":
        keys = sorted({f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for x in nodes for t in x["taints"]})
        return ngettext(
            "%(names)s has tainted devices (%(taints)s)", "%(names)s have tainted devices (%(taints)s)", n
        ) % {"names": names, "taints": ", ".join(keys)}
    if kind == "counters":
        return ngettext(
            "on %(names)s partitions already use the devices' shared counters",
            "on %(names)s partitions already use the devices' shared counters",
            n,
        ) % {"names": names}
    if kind == "capacity":
        return gettext("on %(names)s the devices lack the requested capacity") % {"names": names}
    if kind == "constraint":
        return gettext("on %(names)s no set of free devices meets the claim's constraints") % {"names": names}
    if kind == "too-few":
        return ngettext(
            "%(names)s has fewer matching devices than that", "%(names)s have fewer matching devices than that", n
        ) % {"names": names}
    if kind == "invalid-pools":
        return gettext("%(names)s publish invalid pools") % {"names": names}
    if kind == "not-ready":
        return ngettext("%(names)s is NotReady", "%(names)s are NotReady", n) % {"names": names}
    if kind == "cordoned":
        return ngettext("%(names)s is cordoned", "%(names)s are cordoned", n) % {"names": names}
    if kind == "node-taint":
        return ngettext(
            "%(names)s has a taint the pod does not tolerate", "%(names)s have taints the pod does not tolerate", n
        ) % {"names": names}
    if kind == "node-resources":
        return ngettext(
            "%(names)s lacks the pod's cpu, memory or pods", "%(names)s lack the pod's cpu, memory or pods", n
        ) % {"names": names}
    if kind == "node-ports":
        return gettext("on %(names)s the pod's host ports are taken") % {"names": names}
    return gettext("%(names)s rejected by a node filter") % {"names": names}


def never_summary(item):
    """Counter of why nodes can never serve the request ({reason: node count})."""
    return Counter({reason: len(nodes) for reason, nodes in item["never"].items()})
