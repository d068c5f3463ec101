"""What every object page shares: the mirrored object as YAML, the `kubectl` commands that show it,
its mirrored Events and breadcrumbs. The detail views of inventory/ and claims/ build on this."""

import yaml
from django.urls import reverse
from django.utils.translation import gettext as _

# Top-level keys in the order `kubectl get -o yaml` users read them; nested maps keep the order the
# API server wrote them in (Go struct order), which the mirror stores unchanged.
TOP_LEVEL_ORDER = ("apiVersion", "kind", "metadata", "spec", "status")
METADATA_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)

# kubectl resource names per kind (the full resource.group form: unambiguous next to CRDs of the same name).
KUBECTL_RESOURCE = {
    "Node": "node",
    "Pod": "pod",
    "DeviceClass": "deviceclasses.resource.k8s.io",
    "ResourceSlice": "resourceslices.resource.k8s.io",
    "ResourceClaim": "resourceclaims.resource.k8s.io",
    "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
}


def k8s_ordered(raw):
    """A copy of `raw` with the top-level and metadata keys in Kubernetes order (values untouched)."""
    if not isinstance(raw, dict):
        return raw
    out = {k: raw[k] for k in TOP_LEVEL_ORDER if k in raw}
    out.update((k, v) for k, v in raw.items() if k not in out)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        ordered = {k: meta[k] for k in METADATA_ORDER if k in meta}
        ordered.update((k, v) for k, v in meta.items() if k not in ordered)
        out["metadata"] = ordered
    return out


def to_yaml(raw):
    """The object as block YAML that `yaml.safe_load` reads back to the same value.

    PyYAML's safe dumper: quotes what would otherwise read back as another type ("true", "1.0",
    timestamps stay strings), never folds long lines (width: the page wraps them), keeps unicode."""
    return yaml.safe_dump(
        k8s_ordered(raw), sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 20
    )


def _context_flag(cluster):
    return f" --context {cluster.context}" if getattr(cluster, "context", "") else ""


def kubectl_commands(cluster, kind, name, namespace=""):
    """[(label, command)] showing the object with kubectl against the cluster's own context."""
    resource = KUBECTL_RESOURCE.get(kind)
    if resource is None:
        return []
    ns = f" -n {namespace}" if namespace else ""
    ctx = _context_flag(cluster)
    return [
        (_("YAML"), f"kubectl{ctx} get {resource} {name}{ns} -o yaml"),
        (_("Describe"), f"kubectl{ctx} describe {resource} {name}{ns}"),
    ]


def device_kubectl_commands(cluster, slice_name, device_name):
    """A device is an entry of its ResourceSlice: the slice, and the entry alone with a JSONPath."""
    ctx = _context_flag(cluster)
    return [
        (_("YAML of the slice"), f"kubectl{ctx} get resourceslices.resource.k8s.io {slice_name} -o yaml"),
        (
            _("This device"),
            f"kubectl{ctx} get resourceslices.resource.k8s.io {slice_name} -o jsonpath='{{.spec.devices[?(@.name==\"{device_name}\")]}}'",
        ),
    ]


def events_for(cluster_id, kind, name, namespace="", uid=""):
    """The mirrored Events about one object, newest first (bounded by the mirror, see docs/sync.md)."""
    from mirror.models import KubeEvent

    return KubeEvent.objects.about(cluster_id, kind, name, namespace, uid)


def crumb(label, url_name=None, *args, query=""):
    """One breadcrumb: (label, url or None for the current page)."""
    url = reverse(url_name, args=args) + (f"?{query}" if query else "") if url_name else None
    return (label, url)


def object_page(cluster, kind, raw, name, namespace="", uid="", crumbs=(), yaml_raw=None, kubectl=None, events=True):
    """The context every object page adds: YAML of the mirrored raw object (or `yaml_raw`), kubectl
    commands, the mirrored Events about it, breadcrumbs."""
    return {
        "yaml_text": to_yaml(raw if yaml_raw is None else yaml_raw),
        "kubectl": kubectl_commands(cluster, kind, name, namespace) if kubectl is None else kubectl,
        "events": list(events_for(cluster.id, kind, name, namespace, uid)[:50]) if events else None,
        "crumbs": list(crumbs),
    }
