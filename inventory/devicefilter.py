"""The devices list's filter language: `productName = NVIDIA H100 80GB HBM3; memory >= 40Gi`.

Clauses are separated by `;`, a newline or the word `and`. Each clause is `name op value` with
op one of = == != >= <= > < ~ (contains). `name` is an attribute or a capacity, bare (looked up in
the device's driver domain) or qualified (`resource.kubernetes.io/pcieRoot`); `driver`, `pool`,
`node` and `device` name the identity columns. Capacities compare as Kubernetes quantities,
int attributes as numbers, version attributes as versions, strings as text.

Hand-written because this is a tiny, UI-specific grammar; the quantity parsing comes from the
kubernetes client. Bad input raises FilterError naming the clause, never silently matches all.
"""

import operator
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from packaging.version import InvalidVersion, Version

from dra.quantity import parse_quantity

OPS = {
    "==": operator.eq,
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "~": lambda a, b: str(b).lower() in str(a).lower(),
}
IDENTITY = {"driver": "driver", "pool": "pool", "node": "node_name", "device": "name", "name": "name"}
_CLAUSE = re.compile(r"^\s*([A-Za-z0-9_.\-/]+)\s*(==|!=|>=|<=|=|>|<|~)\s*(.+?)\s*$")
_SPLIT = re.compile(r";|\n|\s+and\s+", re.IGNORECASE)


class FilterError(ValueError):
    pass


@dataclass(frozen=True)
class Clause:
    name: str
    op: str
    value: str

    def __str__(self):
        return f"{self.name} {self.op} {self.value}"


def parse(text):
    """Clauses of a filter expression; FilterError on the first bad one."""
    clauses = []
    for i, part in enumerate(p for p in _SPLIT.split(text or "") if p.strip()):
        m = _CLAUSE.match(part)
        if not m:
            raise FilterError(
                f"clause {i + 1} {part.strip()!r}: expected `name op value` with op one of {' '.join(OPS)}"
            )
        name, op, value = m.groups()
        if value[0] in "=<>!~":
            raise FilterError(
                f"clause {i + 1} {part.strip()!r}: expected `name op value` with op one of {' '.join(OPS)}"
            )
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if name in IDENTITY and op not in ("=", "==", "!=", "~"):
            raise FilterError(f"clause {i + 1} {part.strip()!r}: {name} only supports = != ~")
        clauses.append(Clause(name, op, value))
    return clauses


def _lookup(mapping, name, driver):
    if name in mapping:
        return mapping[name]
    if "/" in name:
        domain, _, ident = name.partition("/")
        if domain == driver:
            return mapping.get(ident)
    return None


def _typed_attribute(attr):
    for kind in ("int", "bool", "version", "string"):
        if kind in attr:
            return kind, attr[kind]
    return None, None


def _coerce(kind, value, clause):
    try:
        if kind == "quantity":
            return parse_quantity(value)
        if kind == "int":
            return Decimal(value)
        if kind == "version":
            return Version(value)
        if kind == "bool":
            if value.lower() not in ("true", "false"):
                raise ValueError
            return value.lower() == "true"
    except (ValueError, InvalidOperation, InvalidVersion, TypeError):
        raise FilterError(f"{clause}: {value!r} is not a valid {kind}") from None
    return value


def clause_matches(clause, device):
    """Does one Device (model instance or dict with driver/attributes/capacity) satisfy the clause?"""
    get = device.get if isinstance(device, dict) else lambda k: getattr(device, k)
    fn = OPS[clause.op]
    if clause.name in IDENTITY:
        return fn(get(IDENTITY[clause.name]) or "", clause.value)
    driver = get("driver")
    attr = _lookup(get("attributes") or {}, clause.name, driver)
    if isinstance(attr, dict):
        kind, actual = _typed_attribute(attr)
        if kind is None:
            return False
        if clause.op == "~":
            return fn(actual, clause.value)
        expected = _coerce(kind, clause.value, clause)
        if kind == "int":
            actual = Decimal(actual)
        elif kind == "version":
            try:
                actual = Version(str(actual))
            except InvalidVersion:
                return False
        return fn(actual, expected)
    cap = _lookup(get("capacity") or {}, clause.name, driver)
    if isinstance(cap, dict) and "value" in cap:
        if clause.op == "~":
            return fn(cap["value"], clause.value)
        try:
            actual = parse_quantity(cap["value"])
        except ValueError:
            return False
        return fn(actual, _coerce("quantity", clause.value, clause))
    return False


def _attribute_candidates(value):
    """The typed values a literal may mean for an attribute (the API's searchable copy is typed)."""
    out = [value]
    if re.fullmatch(r"-?\d+", value):
        out.append(int(value))
    if value.lower() in ("true", "false"):
        out.append(value.lower() == "true")
    return out


def apply_sql(queryset, clauses):
    """(queryset, residual clauses): narrow `queryset` in SQL with what the searchable columns answer
    exactly (the same queryset methods as the API, inventory/querysets.py); the residual clauses
    must still be checked in Python with `filter_devices`.
    Raises FilterError for a name no device publishes, so a typo is not an empty list."""
    from mirror.normalize import quantity_number

    residual = []
    for n, c in enumerate(clauses):
        if c.name in IDENTITY:
            if c.op in ("=", "=="):
                queryset = queryset.filter(**{IDENTITY[c.name]: c.value})
            else:
                residual.append(c)
            continue
        if queryset.model.objects.attribute_known(c.name):
            if c.op in ("=", "=="):
                queryset = queryset.with_attribute(c.name, _attribute_candidates(c.value), n=n)
            elif c.op == "~":
                # The plain copy as text holds what str(value) shows (true, 3, 1.2.3): the same test.
                queryset = queryset.with_attribute_containing(c.name, c.value, n=n)
            else:
                residual.append(c)
        elif queryset.model.objects.capacity_known(c.name):
            if c.op == "~":
                residual.append(c)
            else:
                try:
                    number = quantity_number(c.value)
                except (ValueError, TypeError, ArithmeticError):
                    raise FilterError(f"{c}: {c.value!r} is not a quantity") from None
                queryset = queryset.with_capacity(
                    c.name, "!=" if c.op == "!=" else ("=" if c.op == "==" else c.op), number, n=n
                )
        else:
            raise FilterError(f"{c}: no device publishes an attribute or capacity named {c.name!r}")
    return queryset, residual


def filter_devices(devices, clauses):
    """Devices (with attributes/capacity) satisfying every clause."""
    return [d for d in devices if all(clause_matches(c, d) for c in clauses)]
