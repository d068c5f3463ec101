"""Reading what drivers and the kubelet report about prepared devices: a claim's `status.devices[]`
(AllocatedDeviceStatus) and a pod's `allocatedResourcesStatus[]` (KEP-4680), into the column values
of claims.ClaimDeviceStatus and claims.PodResourceHealth.

Nothing here raises on bad input: the API server validates these fields, but gpudash also reads
servers that don't (older ones, fakes, snapshots), and one odd entry must not cost the claim or the
pod its row. What cannot be read is said in `error`, next to whatever could."""

import json

HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")

# Column sizes (claims.models); a longer value is cut and the cut said in `error`.
_LIMITS = {
    "driver": 253,
    "pool": 253,
    "device": 253,
    "share_id": 64,
    "interface_name": 256,
    "hardware_address": 128,
    "container": 253,
    "resource_name": 512,
    "claim_name": 253,
    "request": 253,
    "resource_claim_name": 253,
    "resource_id": 1024,
    "health": 16,
}


def _short(value, limit=200):
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Reader:
    """Collects the fields of one entry and the problems met reading them."""

    def __init__(self):
        self.fields = {}
        self.problems = []

    def text(self, column, holder, key, what=None):
        value = holder.get(key) if isinstance(holder, dict) else None
        if value is None:
            value = ""
        if not isinstance(value, str):
            self.problems.append(f"{what or key} is not a string: {_short(value)}")
            value = _short(value, _LIMITS.get(column, 200))
        limit = _LIMITS.get(column)
        if limit and len(value) > limit:
            self.problems.append(f"{what or key} longer than {limit} characters")
            value = value[:limit]
        self.fields[column] = value
        return value

    def entries(self, holder, key, what, wanted, kind, fix=None):
        """A list field: [] when absent or not a list (said); entries that are not `wanted` are said
        once, then replaced by fix(entry), or dropped without a fix."""
        value = holder.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problems.append(f"{what} is not a list: {_short(value)}")
            return []
        if all(isinstance(v, wanted) for v in value):
            return value
        self.problems.append(f"an entry of {what} is not {kind}")
        if fix is None:
            return [v for v in value if isinstance(v, wanted)]
        return [v if isinstance(v, wanted) else fix(v) for v in value]

    def done(self):
        self.fields["error"] = "; ".join(self.problems)
        return self.fields


def ready_of(conditions):
    """The Ready condition's status as a bool; None when there is no Ready condition (or it says Unknown)."""
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return {"True": True, "False": False}.get(cond.get("status"))
    return None


def device_status_fields(entry):
    """Column values for one `status.devices[]` entry (AllocatedDeviceStatus)."""
    r = _Reader()
    r.fields.update(conditions=[], data=None, ips=[], ready=None)
    if not isinstance(entry, dict):
        r.problems.append(f"device status entry is not an object: {_short(entry)}")
        for column in ("driver", "pool", "device", "share_id", "interface_name", "hardware_address"):
            r.fields[column] = ""
        return r.done()
    for column, key in (("driver", "driver"), ("pool", "pool"), ("device", "device"), ("share_id", "shareID")):
        r.text(column, entry, key)
    for key in ("driver", "pool", "device"):
        if not r.fields[key]:
            r.problems.append(f"{key} is missing")
    conditions = r.entries(entry, "conditions", "conditions", dict, "an object")
    r.fields["conditions"] = conditions
    r.fields["ready"] = ready_of(conditions)
    r.fields["data"] = entry.get("data")
    network = entry.get("networkData")
    if network is not None and not isinstance(network, dict):
        r.problems.append(f"networkData is not an object: {_short(network)}")
        network = None
    network = network or {}
    r.text("interface_name", network, "interfaceName", "networkData.interfaceName")
    r.text("hardware_address", network, "hardwareAddress", "networkData.hardwareAddress")
    r.fields["ips"] = r.entries(network, "ips", "networkData.ips", str, "a string", fix=_short)
    return r.done()


def parse_claim_resource_name(name):
    """("claim", "request") of "claim:<claim>/<request>" ("request" "" for "claim:<claim>"); None for
    a name that is not a claim's (a device plugin's resource)."""
    if not name.startswith("claim:"):
        return None
    claim, _, request = name[len("claim:") :].partition("/")
    return claim, request


def device_of_resource_id(resource_id):
    """(driver, pool, device) where the resource ID names the device itself: the kubelet's fallback
    "<driver>/<pool>/<device>" when the driver gave no CDI device ID (pool names may hold slashes;
    driver and device names never do). A CDI device ID ("vendor/class=name") gives ("", "", "")."""
    if "=" in resource_id:
        return "", "", ""
    parts = resource_id.split("/")
    if len(parts) < 3 or not all(parts):
        return "", "", ""
    return parts[0], "/".join(parts[1:-1]), parts[-1]


def pod_claim_names(raw):
    """{pod-level claim name: ResourceClaim name} from status.resourceClaimStatuses, else spec."""
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    names = {}
    for ref in spec.get("resourceClaims") or []:
        if isinstance(ref, dict) and ref.get("name") and isinstance(ref.get("resourceClaimName"), str):
            names[ref["name"]] = ref["resourceClaimName"]
    for entry in status.get("resourceClaimStatuses") or []:
        if isinstance(entry, dict) and entry.get("name") and isinstance(entry.get("resourceClaimName"), str):
            names[entry["name"]] = entry["resourceClaimName"]
    return names


def pod_health_fields(raw):
    """Column values for every resource of every container's allocatedResourcesStatus[] (init
    containers included), in the order served."""
    status = raw.get("status") if isinstance(raw, dict) else None
    if not isinstance(status, dict):
        return []
    claims = pod_claim_names(raw)
    out = []
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        statuses = status.get(key)
        if not isinstance(statuses, list):
            continue
        for cstatus in statuses:
            if not isinstance(cstatus, dict) or cstatus.get("allocatedResourcesStatus") is None:
                continue
            out.extend(_container_health(cstatus, init, claims))
    return out


def _container_health(cstatus, init, claims):
    container = cstatus.get("name")
    entries = cstatus.get("allocatedResourcesStatus")
    if not isinstance(entries, list):
        return [
            _health_row(
                container, init, None, None, claims, f"allocatedResourcesStatus is not a list: {_short(entries)}"
            )
        ]
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            out.append(
                _health_row(container, init, None, None, claims, f"resource status is not an object: {_short(entry)}")
            )
            continue
        resources = entry.get("resources")
        if resources is None:
            continue  # the kubelet drops an entry with no resources; nothing to say
        if not isinstance(resources, list):
            out.append(
                _health_row(container, init, entry, None, claims, f"resources is not a list: {_short(resources)}")
            )
            continue
        for resource in resources:
            if not isinstance(resource, dict):
                out.append(
                    _health_row(container, init, entry, None, claims, f"resource is not an object: {_short(resource)}")
                )
            else:
                out.append(_health_row(container, init, entry, resource, claims))
    return out


def _health_row(container, init, entry, resource, claims, problem=""):
    r = _Reader()
    if problem:
        r.problems.append(problem)
    r.text("container", {"name": container}, "name", "container name")
    r.fields["init_container"] = init
    name = r.text("resource_name", entry, "name", "resource status name")
    parsed = parse_claim_resource_name(name)
    if entry is not None and not name:
        r.problems.append("resource status name is missing")
    claim, request = parsed or ("", "")
    if parsed is not None and not claim:
        r.problems.append(f"no claim in resource name {name!r}")
    r.text("claim_name", {"v": claim}, "v", "claim name")
    r.text("request", {"v": request}, "v", "request name")
    r.text("resource_claim_name", {"v": claims.get(claim, "") if claim else ""}, "v", "claim name")
    resource_id = r.text("resource_id", resource, "resourceID")
    if resource is not None and not resource_id:
        r.problems.append("resourceID is missing")
    health = resource.get("health") if isinstance(resource, dict) else None
    if resource is not None and health not in HEALTH_VALUES:
        r.problems.append(f"health is not one of {', '.join(HEALTH_VALUES)}: {_short(health)}")
    r.text("health", {"v": health if isinstance(health, str) else ""}, "v", "health")
    message = resource.get("message") if isinstance(resource, dict) else None
    if message is not None and not isinstance(message, str):
        r.problems.append(f"message is not a string: {_short(message)}")
        message = _short(message)
    r.fields["message"] = message or ""
    r.fields["driver"], r.fields["pool"], r.fields["device"] = device_of_resource_id(resource_id)
    return r.done()


# --- resource ID -> device ----------------------------------------------------------------------


def device_of_cdi_id(resource_id, results):
    """The allocation result a CDI device ID ("vendor/class=name") stands for, among `results` (the
    claim's results for the reported request): the one whose device is the CDI name, or whose
    device ends the name after a dash ("<claim uid>-gpu-0", a claim-specific CDI device); else the
    only result there is. None when that leaves no single answer."""
    _, eq, name = resource_id.partition("=")
    if not eq:
        return None
    exact = [r for r in results if r.device == name]
    if len(exact) == 1:
        return exact[0]
    suffix = [r for r in results if name.endswith("-" + r.device)]
    if len(suffix) == 1:
        return suffix[0]
    return results[0] if len(results) == 1 else None
