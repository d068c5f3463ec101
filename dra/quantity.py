"""Kubernetes resource.Quantity values as exact fractions.

Hand-written because no Python library parses quantities the way
k8s.io/apimachinery/pkg/api/resource does (suffix table, exponent forms,
rounding up to 1n, the int64 cap). The scanner follows the upstream
parser's acceptance rules so that strings accepted or rejected by the API
server are accepted or rejected here too.
"""

from fractions import Fraction
from functools import lru_cache

__all__ = [
    "QuantityError",
    "parse_quantity",
    "format_quantity",
    "compare",
    "MAX_QUANTITY",
]

# Upstream caps binary-suffixed magnitudes at the largest int64.
MAX_QUANTITY = Fraction(2**63 - 1)
NANO = Fraction(1, 10**9)

_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = set("eEinumkKMGTP")
_DIGITS = set("0123456789")
# Upstream keeps any int32 exponent as a scale; exact fractions cannot, and
# no real device publishes such numbers.
_MAX_EXPONENT = 1000

# Messages of the upstream errors, so users recognise them.
_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""

    def __init__(self, text, reason):
        self.text = text
        self.reason = reason
        super().__init__(f"invalid quantity {text!r}: {reason}")


def _scan(text):
    """Split `text` into (negative, digits, fraction digits, number text, suffix).

    Mirrors upstream parseQuantityString, quirks included: leading zeros
    are dropped and an empty integer part counts as "0" (so "1." and ".5"
    are numbers, and "-" alone is zero).
    """
    end = len(text)
    pos = 0
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return negative, "0", "", "0", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    number = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(text, _ERR_FORMAT)
    return negative, whole, fraction, number, text[suffix_start:]


def _interpret_suffix(text, suffix):
    """Return (base, exponent, format) for a suffix, as upstream does."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and set(body) <= _DIGITS:
            exponent = int(digits)
            if -(2**63) <= exponent < 2**63:
                # Upstream narrows the exponent to int32 without a check.
                exponent = (exponent + 2**31) % 2**32 - 2**31
                if abs(exponent) > _MAX_EXPONENT:
                    raise QuantityError(text, f"exponent beyond ±{_MAX_EXPONENT} is not supported")
                return 10, exponent, "DecimalExponent"
    raise QuantityError(text, _ERR_SUFFIX)


def quantity_format_of(text):
    """ "BinarySI", "DecimalSI" or "DecimalExponent": how `text` was written."""
    suffix = _scan(text)[4]
    return _interpret_suffix(text, suffix)[2]


@lru_cache(maxsize=4096)
def _parse_text(text):
    if not text:
        raise QuantityError(text, "empty string")
    if text == "0":
        return Fraction(0)
    negative, whole, fraction, number, suffix = _scan(text)
    base, exponent, style = _interpret_suffix(text, suffix)
    digits = int(whole + fraction)
    # Upstream's int64 fast path: taken when the digits fit comfortably; its
    # results are exact and never rounded or capped.
    if style == "BinarySI":
        if exponent >= 0 and not fraction:
            precision = 15 - len(whole) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        precision = 18 - len(whole) - len(fraction)
    if precision >= 0:
        if style == "BinarySI":
            result = digits << exponent
            if result <= MAX_QUANTITY:
                return Fraction(-result if negative else result)
        elif exponent - len(fraction) >= -9:
            value = Fraction(digits) * Fraction(10) ** (exponent - len(fraction))
            return -value if negative else value
    # The arbitrary-precision path needs digits in the number part: "-Ei"
    # and ".Pi" fail here while "Gi" (zero by the fast path) does not.
    if not any(c in _DIGITS for c in number):
        raise QuantityError(text, _ERR_NUMERIC)
    value = Fraction(digits, 10 ** len(fraction))
    if base == 2:
        value *= 2**exponent
    else:
        value *= Fraction(10) ** exponent
    if value:
        # Round the magnitude up to whole nanos ("if you want some
        # resources, you should get some").
        nanos = value / NANO
        if nanos.denominator != 1:
            value = Fraction(-(-nanos.numerator // nanos.denominator)) * NANO
    if style == "BinarySI":
        value = min(value, MAX_QUANTITY)
    return -value if negative else value


def parse_quantity(s):
    """Parse a Kubernetes quantity ("80Gi", "1.5", "100m", "1e3") exactly.

    Integers are taken as they are. Raises QuantityError on bad input.
    """
    if isinstance(s, bool):
        raise QuantityError(s, "a boolean is not a quantity")
    if isinstance(s, int):
        return Fraction(s)
    if isinstance(s, Fraction):
        return s
    if not isinstance(s, str):
        raise QuantityError(s, f"expected a string or an integer, got {type(s).__name__}")
    return _parse_text(s)


def compare(a, b):
    """-1, 0 or 1 as quantity `a` is below, equal to or above `b`."""
    a = parse_quantity(a)
    b = parse_quantity(b)
    return (a > b) - (a < b)


def _decimal_canonical(value, exponent_style):
    """Mantissa and power-of-ten exponent (a multiple of 3 for SI)."""
    # Values carry at most nine decimals, so an integer count of nanos exists.
    mantissa = int(value * 10**9) if value.denominator != 1 else int(value) * 10**9
    exponent = -9
    while mantissa % 1000 == 0 and mantissa != 0:
        mantissa //= 1000
        exponent += 3
    if exponent_style:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    suffix = {v: k for k, v in _DECIMAL_SUFFIXES.items()}.get(exponent)
    if suffix is None:  # beyond "E": keep the mantissa whole
        return f"{mantissa * 10 ** (exponent - 18)}E"
    return f"{mantissa}{suffix}"


def format_quantity(value, like=None):
    """Canonical string for `value` in the style of `like` (a quantity string).

    Follows upstream CanonicalizeBytes: binary suffixes only for whole
    numbers of at least 1024 in magnitude, otherwise SI suffixes with an
    exponent that is a multiple of three ("1500m", "80Gi", "1k"). Without
    `like`, the shorter of the two spellings ("40G", "80Gi").
    """
    value = parse_quantity(value)
    if value == 0:
        return "0"
    if like is None:
        # No original spelling: take the shorter of the SI and binary forms.
        decimal = format_quantity(value, "0")
        binary = format_quantity(value, "0Ki")
        return binary if len(binary) <= len(decimal) else decimal
    style = quantity_format_of(like) if isinstance(like, str) else "DecimalSI"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if style == "BinarySI" and (magnitude < 1024 or magnitude.denominator != 1):
        style = "DecimalSI"
    if style != "BinarySI":
        return sign + _decimal_canonical(magnitude, style == "DecimalExponent")
    whole = int(magnitude)
    power = 0
    while whole % 1024 == 0 and power < 60:
        whole //= 1024
        power += 10
    suffix = {v: k for k, v in _BINARY_SUFFIXES.items()}.get(power, "")
    return f"{sign}{whole}{suffix}"
