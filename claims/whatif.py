"""What-if capacity planning: a scenario (dra/whatif.py lines) applied to a copy of a cluster's live
preview inventory, and its effect on every pending pod and claim the user may see.

Run by a preview worker (claims/preview_service: a job with `what: "whatif"`), under the previews'
admission control and deadline; `run_whatif` is that worker's side. Nothing is written anywhere: the
live inventory is copied (Inventory.with_changes) and the copy is dropped with the answer.
"""

from claims import live_inventory
from claims.preview import PreviewError, _engine_failure, _obtain, engine_limits
from claims.preview_scope import OutOfScope, check_namespace, redact_result
from dra import whatif
from dra.errors import InputError

OTHER_POD = "a pod in another namespace"


class ScenarioInvalid(PreviewError):
    """A change or shape that cannot be applied: `field` ("changes" or "shapes") and `index` (0-based)
    say which one (the API's 400 names `changes[2]`, the page marks the line)."""

    def __init__(self, message, field="changes", index=None):
        super().__init__(message)
        self.field, self.index = field, index

    @property
    def where(self):
        return self.field if self.index is None else f"{self.field}[{self.index}]"


def parse_scenario(changes, shapes):
    """(Changes, shapes) parsed, or ScenarioInvalid naming the line. Checked in the web process before
    a job is queued (bad input never waits for a worker) and again by the worker."""
    try:
        return whatif.parse_changes(list(changes or [])), whatif.parse_shapes(list(shapes or []))
    except whatif.ScenarioError as exc:
        raise ScenarioInvalid(str(exc), exc.field, exc.index) from None


def check_scope(changes, visible):
    """A change that names a claim outside the user's namespaces is refused before any lookup."""
    for change in changes:
        if change.namespace:
            check_namespace(change.namespace, visible)


def pending_workloads(cluster, visible=None):
    """Workloads (dra.whatif.Workload) of `cluster` in `visible` (None: all): every Pod the mirror shows
    Pending and not bound, with DRA claims (the pending pods' list, claims/views.py), then every
    pending claim that none of those pods uses (placed for a would-be pod). Oldest first."""
    from claims.models import Pod, ResourceClaim

    pods = Pod.objects.filter(cluster=cluster, phase="Pending", node_name="")
    claims = ResourceClaim.objects.pending().filter(cluster=cluster)
    if visible is not None:
        pods, claims = pods.filter(namespace__in=visible), claims.filter(namespace__in=visible)
    out, used = [], set()
    for ns, name, raw in pods.order_by("creation_timestamp", "namespace", "name").values_list(
        "namespace", "name", "raw"
    ):
        if not Pod.uses_dra(raw):
            continue
        out.append(whatif.Workload("pod", ns, name, raw))
        statuses = {
            s.get("name"): s.get("resourceClaimName")
            for s in (raw.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for ref in (raw.get("spec") or {}).get("resourceClaims") or []:
            used.add((ns, ref.get("resourceClaimName") or statuses.get(ref.get("name")) or ""))
    rows = claims.order_by("creation_timestamp", "namespace", "name").values_list(
        "namespace", "name", "raw", "owner_pod_name"
    )
    pending_pods = {(w.namespace, w.name) for w in out}
    for ns, name, raw, owner in rows:
        if (ns, name) in used or (owner and (ns, owner) in pending_pods):
            continue
        out.append(whatif.Workload("claim", ns, name, raw))
    return out


def node_objects(cluster, changes):
    """{name: raw Node} of the nodes the changes name (the inventory keeps only what filters read)."""
    names = {c.node for c in changes if c.node}
    return live_inventory.node_raws(cluster, names) if names else {}


def capacity_rows(capacity):
    """The capacity answer as rows for the page and the CLI: whole GPUs, free, stranded, then one row
    per partition profile ({"kind", "profile", "before", "after"})."""
    if not capacity:
        return []
    before, after = capacity["before"], capacity["after"]
    rows = [
        {"kind": k, "profile": "", "before": before[k], "after": after[k]} for k in ("gpus", "gpusFree", "stranded")
    ]
    for profile in sorted(set(before["profiles"]) | set(after["profiles"])):
        rows.append(
            {
                "kind": "profile",
                "profile": profile,
                "before": before["profiles"].get(profile, 0),
                "after": after["profiles"].get(profile, 0),
            }
        )
    return rows


def run_whatif(cluster, *, changes=(), shapes=(), visible_namespaces=None, deadline=None):
    """The what-if answer (JSON-ready): every pending pod and claim in `visible_namespaces` before and
    after the changes, the pods the changes displace, headroom of each shape before and after.
    Raises ScenarioInvalid (bad or unknown input), OutOfScope, InventoryNotReady, EngineFailure."""
    parsed, parsed_shapes = parse_scenario(changes, shapes)
    check_scope(parsed, visible_namespaces)
    limits = engine_limits(deadline)
    inv, obtained = _obtain(cluster, limits["deadline"])
    try:
        applied = whatif.apply(inv, parsed, node_objects(cluster, parsed))
    except whatif.ScenarioError as exc:
        raise ScenarioInvalid(str(exc), exc.field, exc.index) from None
    workloads = pending_workloads(cluster, visible_namespaces)
    try:
        entries = whatif.evaluate(inv, applied, workloads, deadline=limits["deadline"])
        room = whatif.headroom_of(inv, applied, parsed_shapes, deadline=limits["deadline"])
        capacity = whatif.capacity_of(inv, applied)
    except InputError as exc:
        raise PreviewError(str(exc)) from None
    except Exception as exc:  # an engine bug on this input: logged, answered as an error, never a 500
        raise _engine_failure(cluster, exc, "what-if") from exc
    summary = whatif.summary(entries, applied)
    summary.update(cluster=cluster.name, changes=[c.text for c in parsed], inventory=obtained.as_dict())
    displaced = [_displaced(d, visible_namespaces) for d in applied.displaced]
    result = {"summary": summary, "workloads": entries, "displaced": displaced, "headroom": room, "capacity": capacity}
    if visible_namespaces is not None:
        redact_result(result, visible_namespaces)
    return result


def _displaced(item, visible):
    """A displaced pod, named only where the user may see its namespace."""
    if visible is not None and item["namespace"] not in visible:
        return {"pod": OTHER_POD, "node": item["node"], "why": item["why"], "dra": item.get("dra", True)}
    return {
        "pod": f"{item['namespace']}/{item['name']}",
        "node": item["node"],
        "why": item["why"],
        "dra": item.get("dra", True),
    }


__all__ = ["OutOfScope", "ScenarioInvalid", "check_scope", "parse_scenario", "pending_workloads", "run_whatif"]
