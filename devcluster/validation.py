"""What a v1.36 apiserver's status strategies do to the DRA health fields before storing them:
drop what a disabled feature gate hides, normalize what its types serialize differently, validate,
and answer a 422 `Invalid` Status of the same shape (message, causes) when validation fails.

Covered: ResourceClaim `status.devices[]` (the resourceclaims/status strategy: dropped for devices
no longer allocated, ValidateResourceClaimStatusUpdate's device-status part) and the Pod's
`allocatedResourcesStatus[]` of container and init container statuses (ValidatePodStatusUpdate's
part for them). The rules and message texts follow k8s.io/kubernetes pkg/apis/resource/validation,
pkg/apis/core/validation and k8s.io/apimachinery's field errors; the rest of a status is stored
as sent, as before."""

import datetime
import ipaddress
import json
import re

from .store import ApiError

# --- field errors, as k8s.io/apimachinery/pkg/util/validation/field renders them ----------------

_TYPE_WORDS = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
}
# Error types whose message leaves the value out.
_NO_VALUE = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"}


class GoString(str):
    """A value of a named Go string type (ResourceName, ResourceID, ...): field errors print it as
    JSON, not with %q as they do a plain string."""


def go_quote(text):
    """Go's strconv.Quote (what %q prints): printable runes as they are, the rest escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_json(value):
    """encoding/json's Marshal: compact, non-ASCII kept, <, > and & escaped (HTML-safe)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


class FieldError:
    def __init__(self, type_, field, value="", detail=""):
        self.type, self.field, self.value, self.detail = type_, field, value, detail

    def body(self):
        words = _TYPE_WORDS[self.type]
        if self.type in _NO_VALUE:
            text = words
        elif isinstance(self.value, bool):
            text = f"{words}: {'true' if self.value else 'false'}"
        elif isinstance(self.value, int | float):
            text = f"{words}: {self.value}"
        elif isinstance(self.value, str) and not isinstance(self.value, GoString):
            text = f"{words}: {go_quote(self.value)}"
        else:
            text = f"{words}: {go_json(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self):
        return f"{self.field}: {self.body()}"


def required(field, detail=""):
    return FieldError("FieldValueRequired", field, "", detail)


def invalid(field, value, detail):
    return FieldError("FieldValueInvalid", field, value, detail)


def duplicate(field, value):
    return FieldError("FieldValueDuplicate", field, value)


def not_supported(field, value, supported):
    return FieldError(
        "FieldValueNotSupported", field, value, "supported values: " + ", ".join(go_quote(v) for v in supported)
    )


def too_long(field, limit):
    return FieldError(
        "FieldValueTooLong", field, "", f"may not be more than {limit} {'byte' if limit == 1 else 'bytes'}"
    )


def too_many(field, count, limit):
    return FieldError(
        "FieldValueTooMany", field, count, f"must have at most {limit} {'item' if limit == 1 else 'items'}"
    )


def forbidden(field, detail):
    return FieldError("FieldValueForbidden", field, "", detail)


def invalid_error(kind, group, name, errors):
    """The apiserver's errors.NewInvalid: 422, reason Invalid, one cause per field error; the
    message joins the distinct errors ("[a, b]" for more than one)."""
    qualified = f"{kind}.{group}" if group else kind
    seen, texts = set(), []
    for err in errors:
        text = str(err)
        if text not in seen:
            seen.add(text)
            texts.append(text)
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(
        422,
        "Invalid",
        f"{qualified} {go_quote(name)} is invalid: {joined}",
        # StatusDetails and StatusCause leave out empty fields (omitempty): a core kind has no group.
        {
            k: v
            for k, v in (
                ("name", name),
                ("group", group),
                ("kind", kind),
                ("causes", [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]),
            )
            if v
        },
    )


# --- names (k8s.io/apimachinery/pkg/util/validation and .../api/validate/content) --------------

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_KEY_RE = re.compile(f"^{_KEY_FMT}$")
_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON_RE = re.compile(f"^{_REASON_FMT}$")
_REASON_MSG = (
    "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric "
    "characters or '_,:', and must end with an alphanumeric character or '_'"
)


def _regex_error(msg, fmt, *examples):
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # As Go builds it: "(e.g. 'a',  or 'b', regex used ...)", the double space included.
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def _nbytes(text):
    return len(text.encode("utf-8", "surrogatepass"))


def _fullmatch(regex, text):
    # Go's $ matches only at the very end (Python's would also before a final newline).
    return regex.match(text) is not None and "\n" not in text


def dns1123_label(value, max_len_unit="characters"):
    errs = []
    if _nbytes(value) > 63:
        errs.append(f"must be no more than 63 {max_len_unit}")
    if not _fullmatch(_LABEL_RE, value):
        if _fullmatch(_SUBDOMAIN_RE, value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value, max_len_unit="characters"):
    errs = []
    if _nbytes(value) > 253:
        errs.append(f"must be no more than 253 {max_len_unit}")
    if not _fullmatch(_SUBDOMAIN_RE, value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name(value):
    """content.IsLabelKey (a condition type)."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix, "bytes"))
    else:
        return [
            "a valid label key "
            + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _nbytes(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _fullmatch(_KEY_RE, name):
        errs.append("name part " + _regex_error(_KEY_MSG, _KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def _driver_name(value, path):
    if not value:
        return [required(path)]
    errs = []
    if _nbytes(value) > 63:
        errs.append(too_long(path, 63))
    errs.extend(invalid(path, value, m) for m in dns1123_subdomain(value.lower()))
    return errs


def _pool_name(value, path):
    if not value:
        return [required(path)]
    errs = []
    if _nbytes(value) > 253:
        errs.append(too_long(path, 253))
    for part in value.split("/"):
        errs.extend(invalid(path, part, m) for m in dns1123_subdomain(part))
    return errs


_HEX = set("0123456789abcdefABCDEF")


def _uuid_problem(text):
    """google/uuid's Validate: None when it parses, else its error text."""
    n = len(text)
    if n == 36 + 9:
        if text[:9].lower() != "urn:uuid:":
            return f"invalid urn prefix: {go_quote(text[:9])}"
        text = text[9:]
    elif n == 36 + 2:
        if text[0] != "{" or text[-1] != "}":
            return "invalid bracketed UUID format"
        text = text[1:-1]
    elif n == 32:
        return None if all(c in _HEX for c in text) else "invalid UUID format"
    elif n != 36:
        return f"invalid UUID length: {n}"
    if len(text) == 36:
        if any(text[i] != "-" for i in (8, 13, 18, 23)):
            return "invalid UUID format"
        if any(c not in _HEX for i, c in enumerate(text) if i not in (8, 13, 18, 23)):
            return "invalid UUID format"
    return None


def _share_id(value, path):
    problem = _uuid_problem(value)
    if problem:
        return [invalid(path, value, f"error validating uid: {problem}")]
    if len(value) != 36 or value != value.lower():
        return [
            invalid(
                path,
                value,
                "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
                "hexadecimal characters",
            )
        ]
    return []


def _sloppy_ipv4(text):
    """netutils.ParseCIDRSloppy takes IPv4 octets with leading zeros as decimal."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isascii() and p.isdigit() and p for p in parts):
        return None
    values = [int(p) for p in parts]
    if any(v > 255 for v in values):
        return None
    return ipaddress.IPv4Address(".".join(str(v) for v in values))


def interface_address(value, path):
    """IsValidInterfaceAddress: an IP in CIDR form (the host's address and its prefix), canonical."""
    bad = [invalid(path, value, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)")]
    address, slash, mask = value.rpartition("/")
    if not slash or not mask.isascii() or not mask.isdigit() or len(mask) > 10:
        return bad
    ip = _sloppy_ipv4(address)
    if ip is None:
        if ":" not in address or "%" in address:
            return bad
        try:
            ip = ipaddress.IPv6Address(address)
        except ValueError:
            return bad
    bits = int(mask)
    if bits > ip.max_prefixlen:
        return bad
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        # Go prints an IPv4-mapped address as IPv4, with the prefix of the IPv4 part.
        canonical_ip, bits = ip.ipv4_mapped, bits - 96 if bits > 32 else bits
    else:
        canonical_ip = ip
    canonical = f"{canonical_ip.compressed}/{bits}"
    if value != canonical:
        return [invalid(path, value, f"must be in canonical form ({go_quote(canonical)})")]
    return []


# --- metav1.Condition -------------------------------------------------------------------------

_TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(text):
    """An RFC 3339 time as metav1.Time reads it; None when it does not parse."""
    if not isinstance(text, str):
        return None
    m = _TIME_RE.match(text)
    if not m:
        return None
    try:
        zone = m.group(8)
        tz = (
            datetime.UTC
            if zone in ("Z", "z")
            else datetime.timezone(
                (1 if zone[0] == "+" else -1) * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
            )
        )
        return datetime.datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=tz)
    except ValueError:
        return None


def format_time(when):
    """metav1.Time as served: UTC, whole seconds."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(conditions, path):
    errs, first = [], {}
    for i, cond in enumerate(conditions):
        p = f"{path}[{i}]"
        ctype = cond.get("type") or ""
        if ctype in first:
            errs.append(duplicate(f"{p}.type", ctype))
        else:
            first[ctype] = i
        errs.extend(invalid(f"{p}.type", ctype, m) for m in qualified_name(ctype))
        status = cond.get("status") or ""
        if status not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{p}.status", GoString(status), ["False", "True", "Unknown"]))
        generation = cond.get("observedGeneration") or 0
        if generation < 0:
            errs.append(invalid(f"{p}.observedGeneration", generation, "must be greater than or equal to zero"))
        if not cond.get("lastTransitionTime"):
            errs.append(required(f"{p}.lastTransitionTime"))
        reason = cond.get("reason") or ""
        if not reason:
            errs.append(required(f"{p}.reason"))
        else:
            if not _fullmatch(_REASON_RE, reason):
                errs.append(
                    invalid(
                        f"{p}.reason",
                        reason,
                        _regex_error(
                            _REASON_MSG,
                            _REASON_FMT,
                            "my_name",
                            "MY_NAME",
                            "MyName",
                            "ReasonA,ReasonB",
                            "ReasonA:ReasonB",
                        ),
                    )
                )
            if _nbytes(reason) > 1024:
                errs.append(too_long(f"{p}.reason", 1024))
        if _nbytes(cond.get("message") or "") > 32 * 1024:
            errs.append(too_long(f"{p}.message", 32 * 1024))
    return errs


# --- decoding: what the typed structs accept ------------------------------------------------------


class DecodeError(Exception):
    """A value of the wrong JSON type for its Go field: the apiserver answers 400 BadRequest."""


def _go_type(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _expect(value, types, where, go_type):
    if value is None or isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
        return value
    raise DecodeError(f"json: cannot unmarshal {_go_type(value)} into Go struct field {where} of type {go_type}")


def _keep(obj, keys):
    """Only the fields the Go struct has: unknown ones are dropped, as a default (non-strict) decode does."""
    return {k: obj[k] for k in keys if k in obj}


# --- ResourceClaim status.devices -------------------------------------------------------------

CONDITION_KEYS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
DEVICE_STATUS_KEYS = ("driver", "pool", "device", "shareID", "conditions", "data", "networkData")
NETWORK_KEYS = ("interfaceName", "ips", "hardwareAddress")


def _normalize_condition(cond, where):
    _expect(cond, (dict,), where, "v1.Condition")
    cond = _keep(cond, CONDITION_KEYS)
    for key in ("type", "status", "reason", "message"):
        _expect(cond.get(key), (str,), f"{where}.{key}", "string")
    generation = _expect(cond.get("observedGeneration"), (int,), f"{where}.observedGeneration", "int64")
    when = cond.get("lastTransitionTime")
    _expect(when, (str,), f"{where}.lastTransitionTime", "v1.Time")
    parsed = parse_time(when) if when else None
    if when and parsed is None:
        raise DecodeError(f'parsing time {go_quote(when)} as "2006-01-02T15:04:05Z07:00": cannot parse')
    out = {"type": cond.get("type") or "", "status": cond.get("status") or ""}
    if generation:
        out["observedGeneration"] = generation
    # metav1.Condition serializes lastTransitionTime, reason and message even when empty.
    out["lastTransitionTime"] = format_time(parsed) if parsed else None
    out["reason"] = cond.get("reason") or ""
    out["message"] = cond.get("message") or ""
    return out


def normalize_device_status(entry, index):
    where = "AllocatedDeviceStatus.status.devices"
    _expect(entry, (dict,), "ResourceClaimStatus.status.devices", "[]v1.AllocatedDeviceStatus")
    entry = _keep(entry, DEVICE_STATUS_KEYS)
    for key in ("driver", "pool", "device", "shareID"):
        _expect(entry.get(key), (str,), f"{where}.{key}", "string")
    conditions = _expect(entry.get("conditions"), (list,), f"{where}.conditions", "[]v1.Condition")
    network = _expect(entry.get("networkData"), (dict,), f"{where}.networkData", "v1.NetworkDeviceData")
    out = {"driver": entry.get("driver") or "", "pool": entry.get("pool") or "", "device": entry.get("device") or ""}
    if entry.get("shareID") is not None:
        out["shareID"] = entry["shareID"]
    # `conditions` has no omitempty: a status without them is served with "conditions": null.
    out["conditions"] = (
        None if conditions is None else [_normalize_condition(c, f"{where}.conditions") for c in conditions]
    )
    if entry.get("data") is not None:
        out["data"] = entry["data"]
    if network is not None:
        where_net = "NetworkDeviceData.status.devices.networkData"
        network = _keep(network, NETWORK_KEYS)
        for key in ("interfaceName", "hardwareAddress"):
            _expect(network.get(key), (str,), f"{where_net}.{key}", "string")
        ips = _expect(network.get("ips"), (list,), f"{where_net}.ips", "[]string")
        for ip in ips or []:
            _expect(ip, (str,), f"{where_net}.ips", "string")
        out["networkData"] = {k: network[k] for k in NETWORK_KEYS if network.get(k)}
    return out


def _shared_id(driver, pool, device, share_id):
    """structured.SharedDeviceID as a field error prints it (its JSON)."""
    return {"Driver": driver, "Pool": pool, "Device": device, "ShareID": share_id or ""}


def _allocated(status):
    results = (((status or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return {
        (r.get("driver") or "", r.get("pool") or "", r.get("device") or "", r.get("shareID") or "")
        for r in results
        if isinstance(r, dict)
    }


def _device_key(entry):
    return (entry.get("driver") or "", entry.get("pool") or "", entry.get("device") or "", entry.get("shareID") or "")


def _data_errors(data, path):
    raw = go_json(data)
    if _nbytes(raw) > 10 * 1024:
        return [too_long(path, 10 * 1024)]
    if not isinstance(data, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


def validate_device_statuses(devices, allocated):
    errs, path = [], "status.devices"
    for i, entry in enumerate(devices):
        p = f"{path}[{i}]"
        errs.extend(_driver_name(entry["driver"], f"{p}.driver"))
        errs.extend(_pool_name(entry["pool"], f"{p}.pool"))
        errs.extend(invalid(f"{p}.device", entry["device"], m) for m in dns1123_label(entry["device"]))
        if "shareID" in entry:
            errs.extend(_share_id(entry["shareID"], f"{p}.shareID"))
        if _device_key(entry) not in allocated:
            errs.append(invalid(p, _shared_id(*_device_key(entry)), "must be an allocated device in the claim"))
        conditions = entry.get("conditions") or []
        if len(conditions) > 8:
            errs.append(too_many(f"{p}.conditions", len(conditions), 8))
        errs.extend(_conditions(conditions, f"{p}.conditions"))
        if "data" in entry:
            errs.extend(_data_errors(entry["data"], f"{p}.data"))
        network = entry.get("networkData")
        if network is not None:
            n = f"{p}.networkData"
            if _nbytes(network.get("interfaceName") or "") > 256:
                errs.append(too_long(f"{n}.interfaceName", 256))
            if _nbytes(network.get("hardwareAddress") or "") > 128:
                errs.append(too_long(f"{n}.hardwareAddress", 128))
            ips = network.get("ips") or []
            if len(ips) > 16:
                errs.append(too_many(f"{n}.ips", len(ips), 16))
            else:
                for j, ip in enumerate(ips):
                    errs.extend(interface_address(ip, f"{n}.ips[{j}]"))
                seen = set()
                for j, ip in enumerate(ips):
                    if ip in seen:
                        errs.append(duplicate(f"{n}.ips[{j}]", ip))
                    seen.add(ip)
    seen = set()
    for i, entry in enumerate(devices):
        key = _device_key(entry)
        if key in seen:
            errs.append(duplicate(f"{path}[{i}]", _shared_id(*key)))
        seen.add(key)
    return errs


def claim_status_update(new, old, gates):
    """resourceclaims/status: drop, normalize and validate status.devices of `new` (in place);
    raises ApiError (400 for a value of the wrong type, 422 for an invalid one)."""
    status = new.get("status")
    if not isinstance(status, dict) or status.get("devices") is None:
        return
    old_status = old.get("status") or {}
    in_use = bool(old_status.get("devices"))
    name = (new.get("metadata") or {}).get("name") or ""
    if not gates.get("DRAResourceClaimDeviceStatus", True) and not in_use:
        status.pop("devices", None)
        return
    try:
        devices = status["devices"]
        _expect(devices, (list,), "ResourceClaimStatus.status.devices", "[]v1.AllocatedDeviceStatus")
        devices = [normalize_device_status(d, i) for i, d in enumerate(devices)]
    except DecodeError as exc:
        raise _bad_request("ResourceClaim", "resource.k8s.io/v1", exc) from None
    # Entries of devices the update deallocates go (dropDeallocatedStatusDevices).
    gone = _allocated(old_status) - _allocated(status)
    devices = [d for d in devices if _device_key(d) not in gone]
    if devices:
        status["devices"] = devices
    else:
        status.pop("devices", None)
    errs = validate_device_statuses(devices, _allocated(status))
    if errs:
        raise invalid_error("ResourceClaim", "resource.k8s.io", name, errs)


def _bad_request(kind, api_version, exc):
    return ApiError(
        400,
        "BadRequest",
        f"{kind} in version {go_quote(api_version.split('/')[-1])} cannot be handled as a {kind}: {exc}",
    )


# --- Pod allocatedResourcesStatus ---------------------------------------------------------------

HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")
# encoding/json never leaves out a struct (state, lastState), nor fields without omitempty.
CONTAINER_STATUS_DEFAULTS = (
    ("state", {}),
    ("lastState", {}),
    ("ready", False),
    ("restartCount", 0),
    ("image", ""),
    ("imageID", ""),
)


def _normalize_resource_statuses(entries, where):
    _expect(entries, (list,), f"ContainerStatus.status.{where}.allocatedResourcesStatus", "[]v1.ResourceStatus")
    out = []
    for entry in entries:
        _expect(entry, (dict,), f"ContainerStatus.status.{where}.allocatedResourcesStatus", "v1.ResourceStatus")
        _expect(
            entry.get("name"), (str,), f"ResourceStatus.status.{where}.allocatedResourcesStatus.name", "v1.ResourceName"
        )
        resources = _expect(
            entry.get("resources"),
            (list,),
            f"ResourceStatus.status.{where}.allocatedResourcesStatus.resources",
            "[]v1.ResourceHealth",
        )
        item = {"name": entry.get("name") or ""}
        health = []
        for r in resources or []:
            rwhere = f"ResourceHealth.status.{where}.allocatedResourcesStatus.resources"
            _expect(r, (dict,), rwhere, "v1.ResourceHealth")
            _expect(r.get("resourceID"), (str,), f"{rwhere}.resourceID", "v1.ResourceID")
            _expect(r.get("health"), (str,), f"{rwhere}.health", "v1.ResourceHealthStatus")
            _expect(r.get("message"), (str,), f"{rwhere}.message", "string")
            one = {"resourceID": r.get("resourceID") or ""}
            if r.get("health"):
                one["health"] = r["health"]
            if r.get("message") is not None:
                one["message"] = r["message"]
            health.append(one)
        if health:
            item["resources"] = health
        out.append(item)
    return out


def _container_claim_names(container):
    names = set()
    for c in ((container.get("resources") or {}).get("claims")) or []:
        if isinstance(c, dict):
            names.add("claim:" + (c.get("name") or "") + ("/" + c["request"] if c.get("request") else ""))
    return names


def validate_allocated_resources(statuses, containers, path):
    errs = []
    by_name = {c.get("name"): c for c in containers if isinstance(c, dict)}
    for i, cstatus in enumerate(statuses):
        entries = cstatus.get("allocatedResourcesStatus")
        if entries is None:
            continue
        container = by_name.get(cstatus.get("name"))
        for j, entry in enumerate(entries):
            p = f"{path}[{i}].allocatedResourcesStatus[{j}]"
            name = entry["name"]
            if container is not None:  # a status of a container not in the spec is not checked
                if name.startswith("claim:"):
                    found = name in _container_claim_names(container)
                    detail = (
                        "must match one of the container's resource claims in a format 'claim:<claimName>/<request>' "
                        "or 'claim:<claimName>' if request is empty"
                    )
                else:
                    found = name in ((container.get("resources") or {}).get("requests") or {})
                    detail = "must match one of the container's resource requests"
                if not found:
                    errs.append(invalid(f"{p}.name", GoString(name), detail))
            seen = set()
            for k, r in enumerate(entry.get("resources") or []):
                rp = f"{p}.resources[{k}]"
                if r.get("health", "") not in HEALTH_VALUES:
                    errs.append(not_supported(f"{rp}.health", GoString(r.get("health", "")), HEALTH_VALUES))
                if "message" in r:
                    if not r["message"]:
                        errs.append(required(f"{rp}.message", "must be non-empty if specified"))
                    elif _nbytes(r["message"]) > 1024:
                        errs.append(too_long(f"{rp}.message", 1024))
                if r["resourceID"] in seen:
                    errs.append(duplicate(f"{rp}.resourceID", GoString(r["resourceID"])))
                seen.add(r["resourceID"])
    return errs


def _health_in_use(status, message=False):
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in (status or {}).get(key) or []:
            for entry in (cs or {}).get("allocatedResourcesStatus") or []:
                if not message:
                    return True
                if any("message" in (r or {}) for r in entry.get("resources") or []):
                    return True
    return False


def pod_status_update(new, old, gates):
    """pods/status: drop, normalize and validate allocatedResourcesStatus (in place)."""
    status = new.get("status")
    if not isinstance(status, dict):
        return
    old_status = old.get("status") or {}
    keys = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
    health_on = gates.get("ResourceHealthStatus", True) or _health_in_use(old_status)
    message_on = gates.get("ResourceHealthStatusMessage", True) or _health_in_use(old_status, message=True)
    try:
        for key in keys:
            statuses = status.get(key)
            if not isinstance(statuses, list):
                continue
            for cs in statuses:
                if not isinstance(cs, dict):
                    continue
                # ContainerStatus fields without omitempty are always served (clients rely on them).
                for field, default in CONTAINER_STATUS_DEFAULTS:
                    cs.setdefault(field, default)
                if cs.get("allocatedResourcesStatus") is None:
                    continue
                if not health_on:
                    cs.pop("allocatedResourcesStatus")
                    continue
                entries = _normalize_resource_statuses(cs["allocatedResourcesStatus"], key)
                if not message_on:
                    for entry in entries:
                        for r in entry.get("resources") or []:
                            r.pop("message", None)
                cs["allocatedResourcesStatus"] = entries
    except DecodeError as exc:
        raise _bad_request("Pod", "v1", exc) from None
    spec = new.get("spec") or {}
    errs = []
    errs += validate_allocated_resources(
        status.get("containerStatuses") or [], spec.get("containers") or [], "status.containerStatuses"
    )
    errs += validate_allocated_resources(
        status.get("initContainerStatuses") or [], spec.get("initContainers") or [], "status.initContainerStatuses"
    )
    for i, cs in enumerate(status.get("ephemeralContainerStatuses") or []):
        if isinstance(cs, dict) and cs.get("allocatedResourcesStatus"):
            errs.append(
                forbidden(
                    f"status.ephemeralContainerStatuses[{i}].allocatedResourcesStatus",
                    "must not be specified in container status",
                )
            )
    if errs:
        raise invalid_error("Pod", "", (new.get("metadata") or {}).get("name") or "", errs)


STATUS_UPDATES = {"resourceclaims": claim_status_update, "pods": pod_status_update}
