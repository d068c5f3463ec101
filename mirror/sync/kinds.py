"""The Kubernetes kinds gpudash mirrors: where the API serves them and which model stores them."""

from dataclasses import dataclass

from django.apps import apps


@dataclass(frozen=True)
class Kind:
    kind: str  # "ResourceSlice"
    group: str  # "" for the core group
    version: str  # preferred version; fallbacks in `alt_versions`
    plural: str  # "resourceslices"
    namespaced: bool
    model_label: str  # "inventory.ResourceSlice"
    alt_versions: tuple = ()

    @property
    def model(self):
        return apps.get_model(self.model_label)

    @property
    def group_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    def list_path(self, version=None):
        """Cluster-wide collection path (all namespaces) for list and watch."""
        gv = f"{self.group}/{version or self.version}" if self.group else (version or self.version)
        prefix = "/apis/" if self.group else "/api/"
        return f"{prefix}{gv}/{self.plural}"


KINDS = (
    Kind("Node", "", "v1", "nodes", False, "inventory.Node"),
    # For their labels: the allocator refuses admin access outside namespaces labelled for it.
    Kind("Namespace", "", "v1", "namespaces", False, "inventory.Namespace"),
    Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False, "inventory.DeviceClass"),
    Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False, "inventory.ResourceSlice"),
    Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, "claims.ResourceClaim"),
    Kind(
        "ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True, "claims.ResourceClaimTemplate"
    ),
    Kind("Pod", "", "v1", "pods", True, "claims.Pod"),
    # Only served where the DRADeviceTaintRules gate is on (v1beta2 in 1.36, v1 later).
    Kind(
        "DeviceTaintRule",
        "resource.k8s.io",
        "v1",
        "devicetaintrules",
        False,
        "inventory.DeviceTaintRule",
        ("v1beta2", "v1alpha3"),
    ),
    # Events about the objects above, kept bounded (mirror/sync/events.py); shown on the object pages.
    Kind("Event", "", "v1", "events", True, "mirror.KubeEvent"),
)
KINDS_BY_NAME = {k.kind: k for k in KINDS}
