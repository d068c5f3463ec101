"""The AllocationResult the scheduler would write for one claim (brief 2.14)."""

from fractions import Fraction

from .matching import consumed_spelling
from .quantity import format_quantity


def _local(node):
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def node_selector(picks, node):
    """Node-local if any device is node-local or binds to the node; else the merged selectors; else None."""
    for p in picks:
        d, s = p.device, p.device.slice
        if s.node_name or (s.per_device and d.node_name) or d.binds_to_node:
            return _local(node)
    exprs, fields = [], []
    for p in picks:
        d, s = p.device, p.device.slice
        selector = d.node_selector if s.per_device else s.node_selector
        for term in (selector or {}).get("nodeSelectorTerms") or []:
            for e in term.get("matchExpressions") or []:
                if e not in exprs:
                    exprs.append(e)
            for e in term.get("matchFields") or []:
                if e not in fields:
                    fields.append(e)
    if not exprs and not fields:
        return None
    term = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def device_results(picks):
    out = []
    for p in picks:
        d, v = p.device, p.variant
        r = {"request": v.label, "driver": d.driver, "pool": d.pool, "device": d.name}
        if v.admin:
            r["adminAccess"] = True
        if v.tolerations:
            r["tolerations"] = list(v.tolerations)
        if d.binding_conditions:
            r["bindingConditions"] = list(d.binding_conditions)
            r["bindingFailureConditions"] = list(d.binding_failure_conditions)
        if p.share:
            r["shareID"] = "(assigned by the scheduler)"
            if d.capacity:
                r["consumedCapacity"] = {
                    k: format_quantity(Fraction(p.consumed.get(k, 0)), consumed_spelling(v, d, k)) for k in d.capacity
                }
        out.append(r)
    return out


def configs(inventory, claim, picks, duplicate_quirk=True):
    """Class configs first (grouped per class, in request order), then the claim's configs."""
    out = []
    by_class = {}
    order = []
    chosen = []  # (request name, label) per request in order
    for req in claim.requests:
        v = next((p.variant for p in picks if p.variant.request == req.name), None)
        if v is None:
            continue
        chosen.append((req.name, v.label))
        if v.class_name not in by_class:
            by_class[v.class_name] = []
            order.append(v.class_name)
        by_class[v.class_name].append(v.label)
    for cls_name in order:
        cls = inventory.classes.get(cls_name)
        for cfg in cls.config if cls else []:
            entry = {"source": "FromClass", "requests": by_class[cls_name]}
            entry.update({k: v for k, v in cfg.items() if k != "requests"})
            out.append(entry)
    for cfg in claim.config:
        names = cfg.get("requests") or []
        if not names:
            out.append(dict(cfg, source="FromClaim"))
            continue
        hits = sum(1 for req_name, label in chosen if req_name in names or label in names)
        if hits and not duplicate_quirk:
            hits = 1
        for _ in range(hits):
            out.append(dict(cfg, source="FromClaim"))
    return out


def allocation_result(inventory, claim, picks, node):
    return {
        "devices": {
            "results": device_results(picks),
            "config": configs(inventory, claim, picks, inventory.features.quirk_config_duplicates),
        },
        "nodeSelector": node_selector(picks, node),
    }
