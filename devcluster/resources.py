"""The resource types the devcluster serves, keyed by plural name (as in URLs)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceInfo:
    plural: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    has_status: bool = False
    immutable_spec: bool = False
    short_names: tuple = ()
    singular: str = ""
    verbs: tuple = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    extra_versions: tuple = field(default=())

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource_label(self):
        """How the apiserver names the resource in messages, e.g. resourceclaims.resource.k8s.io."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCE_GROUP = "resource.k8s.io"

RESOURCES = {
    info.plural: info
    for info in (
        ResourceInfo("namespaces", "Namespace", "", "v1", False, has_status=True, short_names=("ns",)),
        ResourceInfo("nodes", "Node", "", "v1", False, has_status=True, short_names=("no",)),
        ResourceInfo("pods", "Pod", "", "v1", True, has_status=True, short_names=("po",)),
        ResourceInfo("events", "Event", "", "v1", True, short_names=("ev",)),
        # Driver DaemonSets (desired vs ready per node, for the readiness check of drivers).
        ResourceInfo("daemonsets", "DaemonSet", "apps", "v1", True, has_status=True, short_names=("ds",)),
        ResourceInfo("deviceclasses", "DeviceClass", RESOURCE_GROUP, "v1", False),
        ResourceInfo("resourceslices", "ResourceSlice", RESOURCE_GROUP, "v1", False),
        ResourceInfo(
            "resourceclaims", "ResourceClaim", RESOURCE_GROUP, "v1", True, has_status=True, immutable_spec=True
        ),
        ResourceInfo(
            "resourceclaimtemplates", "ResourceClaimTemplate", RESOURCE_GROUP, "v1", True, immutable_spec=True
        ),
        # Only beta/alpha in 1.36: served when enabled on the DevCluster (see server.py).
        ResourceInfo("devicetaintrules", "DeviceTaintRule", RESOURCE_GROUP, "v1beta2", False, has_status=True),
    )
}

KIND_TO_PLURAL = {info.kind: plural for plural, info in RESOURCES.items()}


def resource_info(plural):
    try:
        return RESOURCES[plural]
    except KeyError:
        raise KeyError(f"unknown resource {plural!r}; known: {', '.join(sorted(RESOURCES))}") from None
