"""Reading what users hand in: claim/template/pod YAML and kubectl-style cluster dumps."""

import json

import yaml

from .errors import InputError, SnapshotError, shown
from .inventory import KIND_ALIASES, Inventory
from .limits import MAX_ALIASES, MAX_DOCUMENTS, MAX_LIST_ITEMS, MAX_NODES
from .model import ClaimSpec, repeated
from .shapes import check_object, check_text

CLAIM_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")
PLACEABLE_KINDS = ("ResourceClaim", "ResourceClaimTemplate", "Pod")


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting while it composes: documents, alias uses, and nodes as they
    would be after alias expansion (an alias adds the whole size of the node it names). It stops at
    the first limit passed, so a billion-laughs text costs no more than its first MAX_NODES nodes."""

    def __init__(self, text, where):
        super().__init__(text)
        self.where = where
        self.documents = self.aliases = self.nodes = 0
        self.sizes = {}  # id(anchored node) -> its expanded size, once composed

    def compose_document(self):
        self.documents += 1
        if self.documents > MAX_DOCUMENTS:
            raise self.refusal(f"more than {MAX_DOCUMENTS:,} YAML documents (the limit per input)", self.peek_event())
        self.sizes = {}  # anchors belong to one document; ids of freed nodes may come back
        return super().compose_document()

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            return self._alias(super().compose_node(parent, index), event)
        start = self.nodes
        self._grow(1, event)
        node = super().compose_node(parent, index)
        if event.anchor is not None:
            self.sizes[id(node)] = self.nodes - start
        return node

    def _alias(self, node, event):
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise self.refusal(f"more than {MAX_ALIASES:,} alias uses (*name) (the limit per input)", event)
        size = self.sizes.get(id(node))
        if size is None:  # still being composed: the node would contain itself
            raise self.refusal(f"alias *{shown(event.anchor, quote=False)} is used inside the node it names", event)
        self._grow(size, event)
        return node

    def _grow(self, count, event):
        self.nodes += count
        if self.nodes > MAX_NODES:
            raise self.refusal(
                f"more than {MAX_NODES:,} YAML nodes, each alias counted at the full size of what it names (the limit per input)",
                event,
            )

    def refusal(self, text, event):
        mark = event.start_mark
        return InputError(f"{self.where}: {text}, at line {mark.line + 1}, column {mark.column + 1}")


def _parse(text, where):
    """The documents of `text` (None for empty ones), within the limits of _BoundedLoader."""
    loader = _BoundedLoader(text, where)
    try:
        docs = []
        while loader.check_data():
            docs.append(loader.get_data())
        return docs
    finally:
        loader.dispose()


def load_documents(text, where="input"):
    """All objects in a YAML/JSON text (multi-document, `kind: List` expanded)."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: empty; paste a ResourceClaim, ResourceClaimTemplate or Pod")
    try:
        docs = [d for d in _parse(text, where) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: malformed YAML{pos}: {problem}") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise InputError(f"{where}: nested too deeply to be a Kubernetes object") from None
    except ValueError as exc:  # a scalar PyYAML resolves but cannot build: `2024-02-30`, an int of 5,000 digits
        raise InputError(f"{where}: a value cannot be read: {shown(str(exc), 120, quote=False)}") from None
    out = []
    for i, doc in enumerate(docs, 1):
        if not isinstance(doc, dict):
            raise InputError(f"{where}: document {i} is a {type(doc).__name__}, not a Kubernetes object")
        check_text(doc, f"{where}: document {i}")
        kind = doc.get("kind")
        if kind is not None and not isinstance(kind, str):
            raise InputError(f"{where}: document {i}: kind: must be a string, not {type(kind).__name__} {shown(kind)}")
        if kind and kind.endswith("List"):
            out.extend(_list_items(doc, f"{where}: document {i}"))
        else:
            out.append(doc)
    for i, obj in enumerate(out, 1):
        if isinstance(obj, dict) and not obj.get("kind") and isinstance(obj.get("devices"), dict):
            # A bare claim spec (`devices: {requests: ...}`) is previewed as a claim named "preview".
            out[i - 1] = obj = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "preview"},
                "spec": obj,
            }
        if not isinstance(obj, dict) or not obj.get("kind"):
            raise InputError(
                f"{where}: object {i} has no `kind` (expected a ResourceClaim, ResourceClaimTemplate, Pod or a bare claim spec with `devices:`)"
            )
        check_object(obj, _document(i, obj))  # here already: callers read namespaces before resolve_claims
    return out


def _list_items(doc, where):
    items = doc.get("items")
    if not isinstance(items, list):
        raise InputError(f"{where}: a List needs an `items` array")
    if len(items) > MAX_LIST_ITEMS:
        raise InputError(
            f"{where}: a List of {len(items):,} items; at most {MAX_LIST_ITEMS:,} items per List (the limit per input)"
        )
    return items


def _document(i, obj):
    """How messages name the i-th object: "document 2 (ResourceClaim gpu-x)"."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return (
        f"document {i} ({obj.get('kind')} {name})"
        if isinstance(name, str) and name
        else f"document {i} ({obj.get('kind')})"
    )


def snapshot_inventory(path_or_text, features=None, where=None):
    """An Inventory from `kubectl get deviceclasses,resourceslices,resourceclaims,nodes -A -o json`."""
    where = where or str(path_or_text)
    if isinstance(path_or_text, str) and not path_or_text.lstrip().startswith(("{", "[")):
        try:
            with open(path_or_text, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise SnapshotError(f"cannot read snapshot {where}: {exc.strerror}") from None
    else:
        text = path_or_text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"snapshot {where}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
    elif isinstance(data, list):
        items = data
    else:
        raise SnapshotError(f'snapshot {where}: expected a kubectl List (`{{"kind": "List", "items": [...]}}`)')
    grouped = {}
    for _i, obj in enumerate(items):
        kind = (obj or {}).get("kind") if isinstance(obj, dict) else None
        plural = KIND_ALIASES.get(kind)
        if plural is None:
            continue  # other kinds (events, pods without claims...) are not needed for a preview
        grouped.setdefault(plural, []).append(obj)
    missing = [
        k
        for k, p in (("Node", "nodes"), ("ResourceSlice", "resourceslices"), ("DeviceClass", "deviceclasses"))
        if not grouped.get(p)
    ]
    if missing:
        raise SnapshotError(
            f"snapshot {where} has no {', '.join(missing)} objects; dump them with "
            "`kubectl get deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,nodes -A -o json`"
        )
    return Inventory.from_objects(grouped, features=features)


def _meta(obj):
    return obj.get("metadata") or {}


def resolve_claims(inventory, objects, namespace=None):
    """The claims to place, and already-allocated claims they depend on.

    `objects`: ResourceClaims and ResourceClaimTemplates (each placed as one claim), or one Pod whose
    `spec.resourceClaims` are resolved from the same documents first, then from the inventory.
    Returns (claims: [ClaimSpec], bound: [(ref, allocation nodeSelector)]).
    """
    for i, obj in enumerate(objects, 1):
        kind = obj.get("kind")
        if kind not in PLACEABLE_KINDS:
            raise InputError(
                f"object {i}: unsupported kind {shown(kind)}; expected ResourceClaim, ResourceClaimTemplate or Pod"
            )
        check_object(obj, _document(i, obj))
        api = obj.get("apiVersion")
        if kind != "Pod" and api and api not in CLAIM_API_VERSIONS:
            raise InputError(
                f"{kind} {_meta(obj).get('name')}: apiVersion {api} is not supported; use resource.k8s.io/v1"
            )
    pods = [o for o in objects if o.get("kind") == "Pod"]
    if len(pods) > 1:
        raise InputError(f"{len(pods)} Pods given; a preview places the claims of one pod")
    if pods:
        return _pod_claims(inventory, pods[0], objects, namespace)
    claims = []
    for obj in objects:
        meta = _meta(obj)
        ns = meta.get("namespace") or namespace or "default"
        name = meta.get("name") or meta.get("generateName") or ""
        if obj.get("kind") == "ResourceClaim":
            if (obj.get("status") or {}).get("allocation"):
                raise InputError(f"ResourceClaim {ns}/{name} is already allocated; a preview places unallocated claims")
            claims.append(ClaimSpec(ns, name, obj.get("spec"), "ResourceClaim"))
        else:
            claims.append(ClaimSpec(ns, name, (obj.get("spec") or {}).get("spec"), "ResourceClaimTemplate"))
    _check_unique(claims)
    return claims, []


def _check_unique(claims):
    dupes = repeated(c.ref for c in claims)
    if dupes:
        raise InputError(f"claim(s) given twice: {', '.join(dupes)}")


def _pod_claims(inventory, pod, objects, namespace):
    meta, spec = _meta(pod), pod.get("spec") or {}
    ns = meta.get("namespace") or namespace or "default"
    pod_name = meta.get("name") or meta.get("generateName") or "pod"
    local = {
        (o.get("kind"), _meta(o).get("namespace") or ns, _meta(o).get("name")): o
        for o in objects
        if o.get("kind") != "Pod"
    }
    refs = spec.get("resourceClaims") or []
    extended = extended_resource_claim(inventory, pod, ns)
    if not refs and extended is None:
        raise InputError(
            f"Pod {ns}/{pod_name} has no spec.resourceClaims and no DRA-backed extended resources; nothing to place"
        )
    claims, bound = [], []
    for i, ref in enumerate(refs):
        entry = ref.get("name") or f"#{i}"
        claim_name, template = ref.get("resourceClaimName"), ref.get("resourceClaimTemplateName")
        if bool(claim_name) == bool(template):
            raise InputError(
                f"Pod {ns}/{pod_name}: resourceClaims[{entry}]: exactly one of resourceClaimName and resourceClaimTemplateName must be set"
            )
        if claim_name:
            raw = local.get(("ResourceClaim", ns, claim_name)) or inventory.claims.get((ns, claim_name))
            if raw is None:
                raise InputError(
                    f'Pod {ns}/{pod_name}: could not find ResourceClaim "{ns}/{claim_name}" (not in the YAML nor in the cluster)'
                )
            allocation = (raw.get("status") or {}).get("allocation")
            if allocation:
                bound.append((f"{ns}/{claim_name}", allocation.get("nodeSelector")))
                continue
            claims.append(ClaimSpec(ns, claim_name, raw.get("spec"), "ResourceClaim"))
        else:
            raw = local.get(("ResourceClaimTemplate", ns, template)) or inventory.templates.get((ns, template))
            if raw is None:
                raise InputError(
                    f'Pod {ns}/{pod_name}: could not find ResourceClaimTemplate "{ns}/{template}" (not in the YAML nor in the cluster)'
                )
            claims.append(
                ClaimSpec(ns, f"{pod_name}-{entry}", (raw.get("spec") or {}).get("spec"), "ResourceClaimTemplate")
            )
    if extended is not None:
        claims.append(extended)
    _check_unique(claims)
    return claims, bound


EXTENDED_CLAIM_NAME = "<extended-resources>"
IMPLICIT_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_claim(inventory, pod, namespace, served=frozenset()):
    """The scheduler's in-memory claim for extended resources backed by DeviceClasses (KEP 5004).

    Init containers come first in the index space; `j` is the resource's position among the
    container's sorted request names. `served`: resources the node's device plugin advertises
    (status.allocatable > 0); NodeResourcesFit checks those and the node's claim leaves them out
    (filterExtendedResources), so each such node gets its own variant.
    """
    by_resource = {}
    for name in sorted(inventory.classes):
        ext = (inventory.classes[name].raw.get("spec") or {}).get("extendedResourceName")
        if ext:
            by_resource.setdefault(ext, name)
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    requests = []
    for i, container in enumerate(containers):
        resources = container.get("resources") or {}
        wanted = dict(resources.get("limits") or {})
        wanted.update(resources.get("requests") or {})
        for j, res_name in enumerate(sorted(wanted)):
            cls = by_resource.get(res_name)
            if cls is None and res_name.startswith(IMPLICIT_CLASS_PREFIX):
                cand = res_name[len(IMPLICIT_CLASS_PREFIX) :]
                cls = cand if cand in inventory.classes else None
            if cls is None or res_name in served:
                continue
            try:
                count = int(str(wanted[res_name]))
            except ValueError:
                raise InputError(
                    f"container {container.get('name')}: {res_name} must be a whole number, got {shown(wanted[res_name])}"
                ) from None
            requests.append(
                {
                    "name": f"container-{i}-request-{j}",
                    "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count},
                }
            )
    if not requests:
        return None
    requests.sort(key=lambda r: r["name"])
    return ClaimSpec(namespace, EXTENDED_CLAIM_NAME, {"devices": {"requests": requests}}, "extended resources")
