"""Label and field selector parsing (the subset of the apiserver grammar clients send).

Hand-written because no maintained Python library implements Kubernetes selectors.
Each parser returns a predicate, or None for an empty selector.
"""

import re


class SelectorError(ValueError):
    pass


_SET_RE = re.compile(r"^\s*([A-Za-z0-9_.\-/]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_requirements(selector):
    # commas inside "in (a,b)" do not separate requirements
    parts, depth, current = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(selector):
    if not selector:
        return None
    checks = []
    for req in _split_requirements(selector):
        m = _SET_RE.match(req)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif req.startswith("!"):
            checks.append(lambda labels, k=req[1:].strip(): k not in labels)  # noqa: B008 (binds the key now)
        elif re.fullmatch(r"[A-Za-z0-9_.\-/]+", req):
            checks.append(lambda labels, k=req: k in labels)
        else:
            raise SelectorError(f"unable to parse requirement {req!r} in labelSelector {selector!r}")
    return lambda labels: all(check(labels) for check in checks)


def _field_value(obj, path):
    value = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(selector):
    """Fields are dotted paths into the object (metadata.name, spec.nodeName, spec.driver...)."""
    if not selector:
        return None
    checks = []
    for req in _split_requirements(selector):
        if "!=" in req:
            path, value = (s.strip() for s in req.split("!=", 1))
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) != v)
        elif "=" in req:
            path, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            checks.append(lambda obj, p=path, v=value: _field_value(obj, p) == v)
        else:
            raise SelectorError(f"invalid field selector requirement {req!r} in {selector!r}")
    return lambda obj: all(check(obj) for check in checks)
