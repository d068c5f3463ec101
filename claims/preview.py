"""Django side of the allocation engine: build its input from the mirrored rows of one cluster.

The engine (dra) knows nothing about Django. Building an Inventory for a big cluster
costs seconds and its per-device CEL caches make later previews fast, so one Inventory is kept per
cluster and process and updated from the sync's change log, never rebuilt on churn
(claims/live_inventory.py).
"""

import logging

from django.conf import settings
from django.utils.translation import gettext

from claims.live_inventory import BuildInProgress, forget, live_inventory
from claims.preview_scope import OutOfScope, check_documents, check_namespace, redact_remedies, redact_result
from dra import Features, InputError, headroom, load_documents, preview, remedies, resolve_claims, verdict
from dra.deadline import Deadline
from dra.errors import AllocationError
from dra.model import ClaimSpec
from dra.nodefilters import scheduling_pod
from mirror.instruments import PREVIEW_SECONDS
from mirror.messages import grouped

__all__ = ["InventoryNotReady", "OutOfScope", "PreviewError", "cluster_inventory", "run_preview", "invalidate"]


class PreviewError(ValueError):
    """Bad preview input (YAML, kinds, claim choice, cluster settings); the message says what and where."""


class InventoryNotReady(PreviewError):
    """The cluster's preview inventory is still being built by another thread (the start-up warm-up)
    past the preview's deadline. `retry_after`: seconds worth waiting before asking again."""

    def __init__(self, cluster, busy):
        if busy.typical:
            left = max(1, round(busy.typical - busy.running))
            expect = f"the last build took {busy.typical:.1f} s"
        else:
            left, expect = 5, "no build has finished in this process yet"
        super().__init__(
            f"the preview inventory of cluster {cluster.name} is still being built ({busy.running:.1f} s so far; "
            f"{expect}): try again in about {left} s"
        )
        self.retry_after = left

    @classmethod
    def said(cls, message, retry_after):
        """The same error as a preview worker reported it (its message and wait)."""
        error = cls.__new__(cls)
        PreviewError.__init__(error, message)
        error.retry_after = retry_after
        return error


class EngineFailure(PreviewError):
    """The engine raised something it should not have on this input: logged as a bug, answered as an error."""


logger = logging.getLogger(__name__)


def _engine_failure(cluster, exc, what="preview"):
    logger.error("allocation engine failed in a %s of cluster %s", what, cluster.name, exc_info=exc)
    return EngineFailure(
        f"the allocation engine could not evaluate this input ({type(exc).__name__}: {str(exc)[:300]}); "
        "the failure was logged for the administrators"
    )


def features_of(cluster):
    try:
        return Features.from_dict(cluster.features)
    except ValueError as exc:
        raise PreviewError(f"cluster {cluster.name}: {exc}") from None


def cluster_inventory(cluster):
    """The Inventory of `cluster` with every change the sync committed before this call; built on
    first use, then updated from the rows the sync's change log names (one small query when idle).
    Treat it as read-only: the next update publishes a new one."""
    return _obtain(cluster)[0]


def _obtain(cluster, deadline=None):
    """(Inventory, live_inventory.Obtained); InventoryNotReady when another thread's build outlasts `deadline`."""
    features = features_of(cluster)
    try:
        return live_inventory(cluster.pk).obtain(cluster, features, deadline)
    except BuildInProgress as busy:
        raise InventoryNotReady(cluster, busy) from None


def redact_other_claims(result, visible_namespaces):
    """Hide the names of claims in namespaces the viewer may not see (the UI does the same on devices):
    example holders in every reason, summary and example, and mirrored claims named in `problems`."""
    return redact_result(result, visible_namespaces)


def invalidate(cluster=None):
    """Forget this process's inventories (all, or one cluster's): the next preview builds afresh.
    Only needed after writing mirrored rows outside mirror.sync.apply (which logs its changes)."""
    forget(None if cluster is None else cluster.pk)


def engine_limits(deadline=None):
    """The engine's time limits from settings.GPUDASH_ENGINE_LIMITS; `deadline` (seconds, or a Deadline
    that a preview worker may cancel) overrides the preview deadline. One Deadline object: a preview
    and its headroom share it."""
    limits = settings.GPUDASH_ENGINE_LIMITS
    if not isinstance(deadline, Deadline):
        deadline = Deadline((limits["PREVIEW_DEADLINE"] if deadline is None else deadline) or None)
    return {"deadline": deadline, "filter_timeout": limits["FILTER_TIMEOUT"] or None}


def load_documents_or_error(yaml_text):
    try:
        return load_documents(yaml_text, "YAML")
    except InputError as exc:
        raise PreviewError(str(exc)) from None


@PREVIEW_SECONDS.time()  # gpudash_preview_duration_seconds on /metrics
def run_preview(
    cluster,
    *,
    yaml_text=None,
    claim=None,
    namespace=None,
    with_headroom=False,
    nodes=None,
    reason_codes=False,
    visible_namespaces=None,
    deadline=None,
    pod=None,
    tolerations=None,
    node_selector=None,
    node_filters=True,
    with_remedies=False,
):
    """Preview `yaml_text` (claims, templates or one pod) or an existing pending `claim` row on every
    node of `cluster`. Returns the engine's JSON dict; raises PreviewError for bad input.
    The kube-scheduler's node filters run first (dra/nodefilters.py) for the pod of the
    YAML, or `pod` (a Pod object, e.g. the Pending pod of `claim`), or else a would-be pod with
    `tolerations` (a list) and `node_selector` (a map or `k=v,...`); `node_filters=False` skips them.
    `reason_codes` adds each failing node's reason code to its entry (the UI groups by it).
    `visible_namespaces` (a set, or None for all): the user's scope. Every namespace the preview would
    read (`namespace`, the objects' own, the claim's) must be in it, checked before anything is looked
    up (OutOfScope otherwise, the same answer whether the objects exist or not); claims of other
    namespaces named in the answer are hidden. `with_remedies` adds `verdict` (dra.verdict: the nodes
    that could serve each request and what blocks them now) and `remedies` (the changes the engine
    verified would make it fit) when no node fits."""
    if (yaml_text is None) == (claim is None):
        raise PreviewError("give either YAML (a claim, template or pod) or an existing claim, not both")
    limits = engine_limits(deadline)
    if namespace is not None:
        check_namespace(namespace, visible_namespaces)
    if claim is not None:
        check_namespace(claim.namespace, visible_namespaces)
    if yaml_text is not None:
        documents = load_documents_or_error(yaml_text)  # bad input is said at once, not after waiting for a build
    # The preview's deadline also bounds waiting for another thread's build (the start-up warm-up).
    inv, obtained = _obtain(cluster, limits["deadline"])
    try:
        if claim is not None:
            if claim.cluster_id != cluster.pk:
                raise PreviewError(f"claim {claim} belongs to another cluster")
            if (claim.raw.get("status") or {}).get("allocation"):
                raise PreviewError(
                    f"claim {claim.namespace}/{claim.name} is already allocated{' on ' + claim.node_name if claim.node_name else ''}; pick a pending claim"
                )
            claims, bound = [ClaimSpec(claim.namespace, claim.name, claim.raw.get("spec"))], []
        else:
            check_documents(documents, namespace, visible_namespaces)  # before resolve_claims looks anything up
            claims, bound = resolve_claims(inv, documents, namespace=namespace)
        placed = (
            scheduling_pod(
                documents if claim is None else (),
                namespace=namespace,
                pod=pod,
                tolerations=tolerations,
                node_selector=node_selector,
            )
            if node_filters
            else None
        )
        result = preview(
            inv,
            claims,
            bound=bound,
            nodes=nodes,
            reason_codes=reason_codes,
            pod=placed,
            node_filters=node_filters,
            **limits,
        )
    except InputError as exc:
        raise PreviewError(str(exc)) from None
    except (PreviewError, OutOfScope):
        raise
    except Exception as exc:  # e.g. a CEL library error on an odd expression: never a 500 page
        raise _engine_failure(cluster, exc) from exc
    if with_remedies:
        _add_remedies(cluster, inv, claims, bound, placed, result, limits["deadline"])
    result["summary"]["cluster"] = cluster.name
    result["summary"]["inventory"] = obtained.as_dict()  # how long this preview waited for its inventory, and why
    if visible_namespaces is not None:
        redact_other_claims(result, visible_namespaces)
        redact_remedies(result, visible_namespaces)
    if with_headroom:
        try:
            result["headroom"] = headroom(
                inv, claims, pod=placed, node_filters=node_filters, **limits
            )  # what the preview left of the deadline
        except AllocationError as exc:
            result["headroom"] = {"error": str(exc)}
        except Exception as exc:  # as above: the preview itself stands, the headroom says why it is missing
            result["headroom"] = {"error": str(_engine_failure(cluster, exc, "headroom count"))}
    return result


def stuck_claim_refs(cluster):
    """ "ns/name" of the claims the stuck detector holds stuck now (their devices are what a release frees)."""
    from claims.models import Finding

    return {
        f"{ns}/{name}"
        for ns, name in Finding.objects.stuck()
        .filter(cluster=cluster)
        .exclude(remedy="")
        .values_list("namespace", "claim_name")
        .distinct()
    }


def _add_remedies(cluster, inv, claims, bound, pod, result, deadline):
    """The verdict and the verified remedies (dra.verdict, dra.remedies), on the same inventory and
    under the same deadline as the preview; an engine failure here leaves the preview standing."""
    try:
        stuck = stuck_claim_refs(cluster)
        answer = verdict(inv, claims, result, stuck=stuck)
        result["verdict"] = answer
        result["remedies"] = (
            remedies(inv, claims, pod, result, answer, bound=bound, stuck=stuck, deadline=deadline)
            if pod is not None
            else []
        )
    except Exception as exc:
        logger.exception("remedies failed")
        result["remedies"] = []
        result.setdefault("verdict", {"error": str(_engine_failure(cluster, exc, "remedy search"))})


# The engine's summary in words, for the preview page and the Pending explainer (ops/pending.py).
def post_filter_text(summary):
    """What the scheduler does next when no node fits (summary.postFilter): deallocate a claim of the
    pod that is allocated where the pod cannot run, and/or evict lower-priority pods; "" if neither."""
    post = summary.get("postFilter") or {}
    parts = []
    freed = (post.get("dynamicResources") or {}).get("deallocates") or []
    if freed:
        parts.append(
            gettext(
                "The scheduler deallocates claim %(claim)s (allocated where this pod cannot run) so that it can be allocated again."
            )
            % {"claim": freed[0]}
        )
    candidates = (post.get("preemption") or {}).get("candidates") or []
    if candidates:
        parts.append(
            gettext(
                "Preemption: evicting lower-priority pods would make room on %(nodes)s; the scheduler nominates one of them."
            )
            % {"nodes": ", ".join(c["node"] for c in candidates[:5]) + (", ..." if len(candidates) > 5 else "")}
        )
    return " ".join(parts)


def filter_rejections_text(summary):
    """'First failing filter: TaintToleration on 1 node (gpu-h100-04: node(s) had untolerated taint(s)); ...'"""
    parts = []
    for item in (summary.get("nodeFilters") or {}).get("rejections") or []:
        nodes = ", ".join(item["exampleNodes"]) + (", ..." if item["nodes"] > len(item["exampleNodes"]) else "")
        parts.append(
            gettext("%(plugin)s on %(count)s node(s) (%(nodes)s: %(reasons)s)")
            % {
                "plugin": item["plugin"],
                "count": grouped(item["nodes"]),
                "nodes": nodes,
                "reasons": ", ".join(item["reasons"]),
            }
        )
    return (gettext("First failing filter: %(filters)s.") % {"filters": "; ".join(parts)}) if parts else ""
