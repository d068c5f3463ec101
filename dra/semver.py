"""Semantic versions as Kubernetes reads them (github.com/blang/semver/v4).

Hand-written because DRA `version` attributes and CEL `semver()` use that
library's strict parser and ordering, which Python packages differ from in
details (leading zeros, empty identifiers, normalisation rules).
"""

from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["SemverError", "Semver", "parse_semver"]

_NUMBERS = set("0123456789")
_ALPHANUM = set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_MAX_UINT64 = 2**64 - 1


class SemverError(ValueError):
    """A string that is not a valid semantic version."""

    def __init__(self, text, reason):
        self.text = text
        self.reason = reason
        super().__init__(f"invalid semantic version {text!r}: {reason}")


@dataclass(frozen=True, order=False)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple = ()
    build: tuple = field(default=(), compare=False)

    @property
    def sort_key(self):
        # A release sorts after its pre-releases; numeric identifiers sort
        # before alphanumeric ones; a shorter identifier list sorts first.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def compare(self, other):
        a, b = self.sort_key, other.sort_key
        return (a > b) - (a < b)

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _number(text, value, what):
    if not value or not set(value) <= _NUMBERS:
        raise SemverError(text, f"invalid character(s) found in {what} number {value!r}")
    if len(value) > 1 and value[0] == "0":
        raise SemverError(text, f"{what} number must not contain leading zeroes {value!r}")
    number = int(value)
    if number > _MAX_UINT64:
        raise SemverError(text, f"{what} number {value!r} is out of range")
    return number


def _strict(text):
    if not text:
        raise SemverError(text, "version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError(text, "no Major.Minor.Patch elements found")
    major = _number(text, parts[0], "major")
    minor = _number(text, parts[1], "minor")
    rest = parts[2]
    build = ()
    pre = ()
    if "+" in rest:
        rest, _, build_text = rest.partition("+")
        build = tuple(build_text.split("."))
        for item in build:
            if not item:
                raise SemverError(text, "build meta data is empty")
            if not set(item) <= _ALPHANUM:
                raise SemverError(text, f"invalid character(s) found in build meta data {item!r}")
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        parsed = []
        for item in pre_text.split("."):
            if not item:
                raise SemverError(text, "prerelease is empty")
            if set(item) <= _NUMBERS:
                if len(item) > 1 and item[0] == "0":
                    raise SemverError(text, f"prerelease number must not contain leading zeroes {item!r}")
                parsed.append(int(item))
            elif set(item) <= _ALPHANUM:
                parsed.append(item)
            else:
                raise SemverError(text, f"invalid character(s) found in prerelease {item!r}")
        pre = tuple(parsed)
    patch = _number(text, rest, "patch")
    return Semver(major, minor, patch, pre, build)


def _normalized(text):
    """Kubernetes' `semver(s, true)`: drop one "v", strip leading zeros, add
    missing minor/patch, then parse strictly."""
    body = text[1:] if text.startswith("v") else text
    parts = body.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _NUMBERS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError(text, "short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    try:
        return _strict(".".join(parts))
    except SemverError as exc:
        raise SemverError(text, exc.reason) from None


@lru_cache(maxsize=4096)
def parse_semver(text, normalize=False):
    """Parse `text` strictly (as DRA version attributes and `semver(s)` do),
    or with Kubernetes' normalisation when `normalize` is true."""
    if not isinstance(text, str):
        raise SemverError(text, f"expected a string, got {type(text).__name__}")
    return _normalized(text) if normalize else _strict(text)
