"""Searchable copies of a device's attributes and capacities, written next to the raw JSON.

Kubernetes lets a driver name its own attributes bare (`productName`) or qualified with its
domain (`gpu.nvidia.com/productName`); both mean the same. The copies use one spelling (bare
for the device's own driver domain, qualified otherwise) so a filter needs only fixed JSON keys.
Capacities are stored as JSON numbers in base units (bytes, cores...): an int when whole (so
exact up to 2**63), else the float whose shortest decimal text is the quantity; JSON numbers
compare numerically in SQL (PostgreSQL jsonb numbers are arbitrary-precision numeric).
"""

import functools
from fractions import Fraction

# SQLite integers are int64; bigger whole numbers go in as floats (no real device is that big).
_INT_LIMIT = 2**63


def normalize_name(name, driver):
    domain, sep, ident = name.rpartition("/")
    return ident if sep and domain == driver else name


def plain_attributes(attributes, driver):
    """{normalised name: plain value} from a device's `attributes` map (string/int/bool/version)."""
    out = {}
    for name, attr in (attributes or {}).items():
        if not isinstance(attr, dict):
            continue
        for key in ("string", "int", "bool", "version"):
            if key in attr:
                out[normalize_name(name, driver)] = attr[key]
                break
    return out


@functools.lru_cache(maxsize=4096)  # a fleet repeats a few capacity texts ("80Gi", "132") on every device
def quantity_number(text):
    """A Kubernetes quantity string as a JSON-ready number; ValueError when it is not a quantity."""
    from dra.quantity import parse_quantity

    value = Fraction(parse_quantity(text))
    if value.denominator == 1 and abs(value.numerator) < _INT_LIMIT:
        return value.numerator
    return float(value)


def capacity_values(capacity, driver):
    """{normalised name: number}; malformed quantities are left out (raw still has them)."""
    out = {}
    for name, cap in (capacity or {}).items():
        value = cap.get("value") if isinstance(cap, dict) else None
        try:
            out[normalize_name(name, driver)] = quantity_number(str(value))
        except (ValueError, TypeError, ArithmeticError):
            continue
    return out
