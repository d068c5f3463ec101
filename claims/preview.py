"""Django side of the allocation engine: build its input from the mirrored rows of one cluster.

The engine (claims.allocator) knows nothing about Django. Building an Inventory for a big cluster
costs a second or two and its per-device CEL caches make later previews fast, so one Inventory is
kept per cluster and process, and rebuilt when the cluster's data changed (a cheap fingerprint of
counts and newest resourceVersions/sync times per kind, one aggregate query per kind).
"""

import logging
import threading

from django.db.models import Count, Max

from claims.allocator import Features, InputError, Inventory, headroom, load_documents, preview, resolve_claims
from claims.allocator.errors import AllocationError
from claims.allocator.model import ClaimSpec
from claims.models import ResourceClaim, ResourceClaimTemplate
from claims.preview_scope import OutOfScope, check_documents, check_namespace, redact_result
from inventory.models import DeviceClass, DeviceTaintRule, Namespace, Node, ResourceSlice

__all__ = ["OutOfScope", "PreviewError", "cluster_inventory", "run_preview", "invalidate"]

# Kind -> model, in the order the Inventory wants them.
SOURCES = (
    ("device_classes", DeviceClass),
    ("resource_slices", ResourceSlice),
    ("resource_claims", ResourceClaim),
    ("resource_claim_templates", ResourceClaimTemplate),
    ("nodes", Node),
    ("device_taint_rules", DeviceTaintRule),
    ("namespaces", Namespace),
)

_cache = {}
_lock = threading.Lock()


class PreviewError(ValueError):
    """Bad preview input (YAML, kinds, claim choice, cluster settings); the message says what and where."""


class EngineFailure(PreviewError):
    """The engine raised something it should not have on this input: logged as a bug, answered as an error."""


logger = logging.getLogger(__name__)


def _engine_failure(cluster, exc, what="preview"):
    logger.error("allocation engine failed in a %s of cluster %s", what, cluster.name, exc_info=exc)
    return EngineFailure(f"the allocation engine could not evaluate this input ({type(exc).__name__}: {str(exc)[:300]}); "
                         "the failure was logged for the administrators")


def _fingerprint(cluster):
    parts = []
    for _, model in SOURCES:
        agg = model.objects.filter(cluster=cluster).aggregate(n=Count("id"), rv=Max("resource_version_num"), at=Max("synced_at"))
        parts.append((agg["n"], agg["rv"], agg["at"]))
    parts.append(tuple(sorted((cluster.features or {}).items())))
    return tuple(parts)


def features_of(cluster):
    try:
        return Features.from_dict(cluster.features)
    except ValueError as exc:
        raise PreviewError(f"cluster {cluster.name}: {exc}") from None


def cluster_inventory(cluster):
    """The Inventory of `cluster`, rebuilt only when its mirrored data changed."""
    fp = _fingerprint(cluster)
    with _lock:
        hit = _cache.get(cluster.pk)
        if hit and hit[0] == fp:
            return hit[1]
    objects = {kind: list(model.objects.filter(cluster=cluster).order_by("namespace", "name").values_list("raw", flat=True)) for kind, model in SOURCES}
    inv = Inventory(features=features_of(cluster), **objects)
    with _lock:
        _cache[cluster.pk] = (fp, inv)
    return inv


def redact_other_claims(result, visible_namespaces):
    """Hide the names of claims in namespaces the viewer may not see (the UI does the same on devices):
    example holders in every reason, summary and example, and mirrored claims named in `problems`."""
    return redact_result(result, visible_namespaces)


def invalidate(cluster=None):
    """Forget cached inventories (all, or one cluster's)."""
    with _lock:
        if cluster is None:
            _cache.clear()
        else:
            _cache.pop(cluster.pk, None)


def run_preview(cluster, *, yaml_text=None, claim=None, namespace=None, with_headroom=False, nodes=None, reason_codes=False,
                visible_namespaces=None):
    """Preview `yaml_text` (claims, templates or one pod) or an existing pending `claim` row on every
    node of `cluster`. Returns the engine's JSON dict; raises PreviewError for bad input.
    `reason_codes` adds each failing node's reason code to its entry (the UI groups by it).
    `visible_namespaces` (a set, or None for all): the user's scope. Every namespace the preview would
    read (`namespace`, the objects' own, the claim's) must be in it, checked before anything is looked
    up (OutOfScope otherwise, the same answer whether the objects exist or not); claims of other
    namespaces named in the answer are hidden."""
    if (yaml_text is None) == (claim is None):
        raise PreviewError("give either YAML (a claim, template or pod) or an existing claim, not both")
    if namespace is not None:
        check_namespace(namespace, visible_namespaces)
    if claim is not None:
        check_namespace(claim.namespace, visible_namespaces)
    inv = cluster_inventory(cluster)
    try:
        if claim is not None:
            if claim.cluster_id != cluster.pk:
                raise PreviewError(f"claim {claim} belongs to another cluster")
            if (claim.raw.get("status") or {}).get("allocation"):
                raise PreviewError(f"claim {claim.namespace}/{claim.name} is already allocated{' on ' + claim.node_name if claim.node_name else ''}; pick a pending claim")
            claims, bound = [ClaimSpec(claim.namespace, claim.name, claim.raw.get("spec"))], []
        else:
            documents = load_documents(yaml_text, "YAML")
            check_documents(documents, namespace, visible_namespaces)  # before resolve_claims looks anything up
            claims, bound = resolve_claims(inv, documents, namespace=namespace)
        result = preview(inv, claims, bound=bound, nodes=nodes, reason_codes=reason_codes)
    except InputError as exc:
        raise PreviewError(str(exc)) from None
    except (PreviewError, OutOfScope):
        raise
    except Exception as exc:  # e.g. a CEL library error on an odd expression: never a 500 page
        raise _engine_failure(cluster, exc) from exc
    result["summary"]["cluster"] = cluster.name
    if visible_namespaces is not None:
        redact_other_claims(result, visible_namespaces)
    if with_headroom:
        try:
            result["headroom"] = headroom(inv, claims)
        except AllocationError as exc:
            result["headroom"] = {"error": str(exc)}
        except Exception as exc:  # as above: the preview itself stands, the headroom says why it is missing
            result["headroom"] = {"error": str(_engine_failure(cluster, exc, "headroom count"))}
    return result
