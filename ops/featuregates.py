"""Which DRA feature gates a cluster's API server has on: read from its /metrics (the
`kubernetes_feature_enabled` gauge, one series per gate) where RBAC allows GET /metrics, else inferred
from what the cluster serves (API versions) and what its objects carry (fields the API server drops
while their gate is off). Used by the readiness page's first check."""

from prometheus_client.parser import text_string_to_metric_families

from mirror.kube import KubeError

METRIC = "kubernetes_feature_enabled"
MAX_METRIC_LINES = 500_000  # an API server's /metrics runs to a few MB; the gauge is read as it streams past

# The DRA gates of v1.36 in the order an admin meets them (../shared/dra-brief.md, "Feature maturity").
DRA_GATES = (
    "DynamicResourceAllocation",
    "DRAPrioritizedList",
    "DRAAdminAccess",
    "DRAResourceClaimDeviceStatus",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRAExtendedResource",
    "DRASchedulerFilterTimeout",
    "DRAResourceClaimGranularStatusAuthorization",
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAResourcePoolStatus",
    "DRAWorkloadResourceClaims",
)

# Gates a used feature proves on: the API server drops a gated field on write while its gate is off,
# so an object carrying the field was written with the gate on. Keys are features_in_use's names.
PROVEN_BY_USE = {
    "partitionable devices (shared counters)": "DRAPartitionableDevices",
    "per-device node selection": "DRAPartitionableDevices",
    "consumable capacity": "DRAConsumableCapacity",
    "binding conditions": "DRADeviceBindingConditions",
    "device taints": "DRADeviceTaints",
    "DeviceTaintRules": "DRADeviceTaintRules",
    "admin access": "DRAAdminAccess",
    "prioritized list (firstAvailable)": "DRAPrioritizedList",
    "extended resources backed by DRA": "DRAExtendedResource",
}


def from_metrics(client, timeout):
    """{gate: (enabled, stage)} for every gate the API server reports, read from GET /metrics.
    Raises KubeError when the server refuses (usually 403: RBAC grants /metrics to few)."""
    raw, lines = client.stream_lines("/metrics", timeout=(timeout, timeout), accept="text/plain")
    wanted, seen = [], False
    try:
        for n, line in enumerate(lines):
            text = line.decode("utf-8", "replace")
            mine = text.startswith(METRIC + "{") or text.startswith(f"# TYPE {METRIC} ")
            if mine:
                wanted.append(text)
                seen = True
            elif seen and not text.startswith("#"):
                break  # one family's series are written together: the rest is other metrics
            if n > MAX_METRIC_LINES:
                break
    finally:
        raw.close()
    gates = {}
    try:
        families = text_string_to_metric_families("\n".join(wanted) + "\n")
        for family in families:
            for sample in family.samples:
                if sample.name == METRIC and "name" in sample.labels:
                    gates[sample.labels["name"]] = (sample.value == 1, sample.labels.get("stage", ""))
    except ValueError as exc:
        raise KubeError(f"GET /metrics: {METRIC} could not be read: {exc}") from exc
    return gates


def inferred(resource_versions, served_kinds, features):
    """{gate: True} for the gates what the cluster serves or its objects carry prove on; the rest stay
    unknown (an unused feature says nothing about its gate)."""
    gates = {}
    if "v1" in resource_versions or resource_versions:
        gates["DynamicResourceAllocation"] = True
    if "DeviceTaintRule" in served_kinds:
        gates["DRADeviceTaintRules"] = True
    if "ResourcePoolStatusRequest" in served_kinds:
        gates["DRAResourcePoolStatus"] = True
    for feature in features:
        if feature in PROVEN_BY_USE:
            gates[PROVEN_BY_USE[feature]] = True
    return gates


def read_gates(reader, resource_versions, served_kinds, features):
    """(gates, source, error): source "metrics" when /metrics answered, else "inferred" (error says why)."""
    if reader.live:
        try:
            return from_metrics(reader.client, reader.timeout), "metrics", ""
        except KubeError as exc:
            error = str(exc)
    else:
        error = reader.error or "snapshot"
    return inferred(resource_versions, served_kinds, features), "inferred", error
