"""Parsing of the API's structured query parameters (`attribute=`, `capacity=`) into form fields.

django-filter turns a form field's ValidationError into a 400 naming the parameter, so syntax
errors are caught here; whether a name exists in the inventory is checked by the filtersets.
"""

import re

from django import forms

from mirror.normalize import quantity_number

# Search boxes (`q`, pages and API alike) take at most this many characters (the pages' inputs say so
# too): names are shorter, and SQLite refuses LIKE patterns over 50,000 bytes ("pattern too complex").
MAX_SEARCH_LENGTH = 1000

# Kubernetes QualifiedName: C identifier (<= 32 chars), optionally prefixed by a DNS subdomain and "/".
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = rf"(?:{_DNS_LABEL}(?:\.{_DNS_LABEL})*/)?[A-Za-z_][A-Za-z0-9_]{{0,31}}"
QUALIFIED_NAME_RE = re.compile(rf"^{_QUALIFIED_NAME}$")
# Longest operators first so ">=" is not read as ">" followed by "=40Gi"; a value never starts with
# an operator character, so "memory>=" is a syntax error rather than a bad quantity "=".
CAPACITY_RE = re.compile(rf"^(?P<name>{_QUALIFIED_NAME})\s*(?P<op>>=|<=|!=|==|=|<|>)\s*(?P<value>[^\s=<>!].*)$")
_INT_RE = re.compile(r"^[-+]?\d+$")

# The largest integer a row id, a count or an OFFSET can be (PostgreSQL's bigint, SQLite's INTEGER):
# a larger page, offset or id in a query fails inside the database driver instead of matching nothing.
DB_INT_MAX = 2**63 - 1


def whole_number(text, low=0, high=DB_INT_MAX):
    """`text` as an int when it is ASCII digits with a value in [low, high], else None.

    The digits are counted before int() sees them: CPython refuses to convert more than 4,300 digits
    (a ValueError nobody expects from isdigit() text), and str.isdigit() also accepts digits such as
    '²' that int() does not read."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(high)):
        return None
    value = int(text)
    return value if low <= value <= high else None


def typed_candidates(text):
    """The JSON values an attribute given as text could be stored as (string, int, bool)."""
    values = [text]
    # Kubernetes int attributes are int64: a larger number can only match as a string.
    if _INT_RE.match(text) and whole_number(text.lstrip("+-")) is not None:
        values.append(int(text))
    if text in ("true", "false"):
        values.append(text == "true")
    return values


class _RepeatableField(forms.Field):
    """A query parameter that may be given several times (`?attribute=a&attribute=b`), all ANDed."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value):
        if value in (None, "", []):
            return []
        items = value if isinstance(value, (list, tuple)) else [value]
        return [self.parse_one(str(item)) for item in items]

    def parse_one(self, text):
        raise NotImplementedError


class AttributeFilterField(_RepeatableField):
    """`NAME:VALUE`, NAME bare (the driver's own domain) or `domain/id`."""

    def parse_one(self, text):
        name, sep, value = text.partition(":")
        name = name.strip()
        if not sep:
            raise forms.ValidationError(
                f"{text!r}: expected NAME:VALUE, e.g. gpu.nvidia.com/productName:NVIDIA H100 80GB HBM3."
            )
        if not QUALIFIED_NAME_RE.match(name):
            raise forms.ValidationError(
                f"{name!r} is not an attribute name (C identifier, optionally prefixed by a domain and '/')."
            )
        return name, typed_candidates(value)


class CapacityFilterField(_RepeatableField):
    """`NAME OP QUANTITY` with OP one of = != < <= > >= and a Kubernetes quantity (40Gi, 1.5, 100m)."""

    def parse_one(self, text):
        match = CAPACITY_RE.match(text.strip())
        if not match:
            raise forms.ValidationError(
                f"{text!r}: expected NAME OP QUANTITY with OP one of = != < <= > >=, e.g. gpu.nvidia.com/memory>=40Gi."
            )
        op = "=" if match["op"] == "==" else match["op"]
        try:
            number = quantity_number(match["value"].strip())
        except (ValueError, ArithmeticError) as exc:
            raise forms.ValidationError(f"{match['value'].strip()!r} is not a Kubernetes quantity: {exc}") from exc
        return match["name"], op, number


class StrictBooleanField(forms.Field):
    """true/false (also 1/0, yes/no); unlike Django's NullBooleanField, junk is an error, not 'no filter'."""

    widget = forms.TextInput
    _VALUES = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def to_python(self, value):
        if value in (None, ""):
            return None
        try:
            return self._VALUES[str(value).lower()]
        except KeyError:
            raise forms.ValidationError(f"{value!r}: expected true or false.") from None
