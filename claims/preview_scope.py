"""Namespace scope for what a preview reads and what an engine answer names.

A namespace-scoped user may preview only in their namespaces. Every namespace a preview would read
(the pasted objects' own namespaces, which are also where a pod's claims and templates are looked
up, and an existing claim's) is checked *before* anything is looked up, and refused with one answer
that does not depend on whether the object exists. What the engine says about other namespaces
(example holders of taken devices, mirrored objects it could not use) is hidden from the answer.

Plain Python: no Django imports, so the detector, the API and the page share it.
"""

import re

OTHER_CLAIM = "a claim in another namespace"

# The engine names one holder of a taken device as an example: "(e.g. NAMESPACE/NAME)". The namespace
# decides; the name runs to the first ")" whatever characters a mirrored name holds.
_EXAMPLE_HOLDER = re.compile(r"\(e\.g\. ([^/\s()]+)/[^)]*\)")
# The engine's list of mirrored objects it could not use: "ResourceClaim NAMESPACE/NAME: why".
_CLAIM_PROBLEM = re.compile(r"^ResourceClaim ([^/\s]*)/")


class OutOfScope(ValueError):
    """A preview touches a namespace outside the user's scope (decided before any lookup)."""

    def __init__(self, namespace):
        self.namespace = namespace
        super().__init__(f"namespace {namespace} is outside your scope")


def check_namespace(namespace, visible):
    """Raise OutOfScope unless `visible` (a set, None = every namespace) holds `namespace`."""
    if visible is not None and namespace not in visible:
        raise OutOfScope(namespace)


def document_namespaces(objects, namespace):
    """Every namespace the pasted objects live in, in order; an object without one is in `namespace`
    (the engine places it there, and a pod's claims and templates are looked up in the pod's)."""
    seen = {}  # a dict keeps the order and finds a namespace in one step (thousands of objects may come)
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        ns = meta.get("namespace") if isinstance(meta, dict) else None
        seen.setdefault(ns or namespace or "default")
    return list(seen)


def check_documents(objects, namespace, visible):
    """Refuse the pasted objects if any of them is outside `visible` (the first such namespace is named)."""
    if visible is None:
        return
    for ns in document_namespaces(objects, namespace):
        check_namespace(ns, visible)


def hide_other_claims(text, visible):
    """`text` with example holders outside `visible` replaced by "a claim in another namespace"."""
    if visible is None or not isinstance(text, str) or "(e.g. " not in text:
        return text
    return _EXAMPLE_HOLDER.sub(lambda m: m.group(0) if m.group(1) in visible else f"(e.g. {OTHER_CLAIM})", text)


def hide_problem(text, visible):
    """An engine `problems` entry about a mirrored claim of another namespace, without its name or details."""
    m = _CLAIM_PROBLEM.match(text) if isinstance(text, str) else None
    if visible is None or m is None or m.group(1) in visible:
        return text
    return "ResourceClaim in another namespace: could not be used (details hidden)"


def redact_result(value, visible):
    """An engine answer (or any JSON-like part of one, such as a stored finding explanation) with every
    string scrubbed of other namespaces' claims, in place where it can be; returns it."""
    if visible is None:
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "problems" and isinstance(item, list):
                value[key] = [hide_problem(p, visible) for p in item]
            else:
                value[key] = redact_result(item, visible)
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = redact_result(item, visible)
        return value
    return hide_other_claims(value, visible)


# Lists of "namespace/name" refs in a verdict or remedy (dra.verdict, dra.remedies) that name other
# people's claims or pods.
_REF_LISTS = ("owners", "stuck", "deleting", "claims", "affects", "victims", "pods")
OTHER_POD = "a pod in another namespace"


def _hide_ref(ref, visible, other):
    return ref if not isinstance(ref, str) or ref.split("/", 1)[0] in visible else other


def _redact_refs(value, visible):
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _REF_LISTS and isinstance(item, list):
                other = OTHER_POD if key in ("affects", "victims", "pods") else OTHER_CLAIM
                value[key] = [_hide_ref(r, visible, other) for r in item]
            else:
                _redact_refs(item, visible)
    elif isinstance(value, list):
        for item in value:
            _redact_refs(item, visible)


def redact_remedies(result, visible):
    """The verdict and remedies of a preview without the names of claims and pods outside `visible`."""
    if visible is None:
        return result
    for key in ("verdict", "remedies"):
        if key in result:
            _redact_refs(result[key], visible)
    return result
