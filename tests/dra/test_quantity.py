"""Kubernetes resource.Quantity parsing, formatting and comparison.

Expected values follow k8s.io/apimachinery/pkg/api/resource (ParseQuantity,
CanonicalizeBytes), including its documented quirks.
"""

from fractions import Fraction

import pytest

from dra.quantity import (
    MAX_QUANTITY,
    QuantityError,
    compare,
    format_quantity,
    parse_quantity,
)

F = Fraction


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0", F(0)),
        ("-0", F(0)),
        ("000", F(0)),
        ("1", F(1)),
        ("+5", F(5)),
        ("-5", F(-5)),
        ("1.5", F(3, 2)),
        (".5", F(1, 2)),
        ("1.", F(1)),
        ("100m", F(1, 10)),
        ("1m", F(1, 1000)),
        ("1u", F(1, 10**6)),
        ("1n", F(1, 10**9)),
        ("1k", F(1000)),
        ("40G", F(40 * 10**9)),
        ("1M", F(10**6)),
        ("1T", F(10**12)),
        ("1P", F(10**15)),
        ("1E", F(10**18)),
        ("1Ki", F(1024)),
        ("1Mi", F(2**20)),
        ("80Gi", F(80 * 2**30)),
        ("1Ti", F(2**40)),
        ("1Pi", F(2**50)),
        ("1Ei", F(2**60)),
        ("1.5Gi", F(3 * 2**29)),
        ("0.5Ki", F(512)),
        ("-1Ki", F(-1024)),
        ("1e3", F(1000)),
        ("1E3", F(1000)),
        ("1e+3", F(1000)),
        ("1e-3", F(1, 1000)),
        ("1E-3", F(1, 1000)),
        ("12e6", F(12 * 10**6)),
        ("1.5e2", F(150)),
        ("1.G", F(10**9)),  # upstream: "we currently allow 1.G"
        # Precision beyond nano rounds the magnitude up to the next nano.
        ("0.1n", F(1, 10**9)),
        ("1.0000000001", F(1000000001, 10**9)),
        ("-0.1n", F(-1, 10**9)),
        ("1e-20", F(1, 10**9)),
        # Binary suffixes are capped at the largest int64; decimal ones are not.
        ("8Ei", MAX_QUANTITY),
        ("16Ei", MAX_QUANTITY),
        ("10E", F(10**19)),
        # Quirks of the upstream scanner: an empty number is zero when the
        # int64 fast path applies.
        ("-", F(0)),
        ("Gi", F(0)),
        ("m", F(0)),
        (".", F(0)),
    ],
)
def test_parse_valid(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty string"),
        ("1K", "suffix"),  # kilo is lower-case k
        ("1i", "suffix"),
        ("1Ki3", "suffix"),
        ("0.1mi", "suffix"),
        ("0.1am", "regular expression"),
        ("1e", "suffix"),
        ("-3.01e-", "suffix"),
        ("1.1.M", "regular expression"),
        ("1+1.0M", "regular expression"),
        ("aoeu", "regular expression"),
        ("1 ", "regular expression"),
        (" 1", "regular expression"),
        ("1 Gi", "regular expression"),
        ("0x10", "regular expression"),
        ("Ei", "numeric"),  # slow path: no digits at all
        ("-Pi", "numeric"),
        ("1e100000", "not supported"),
    ],
)
def test_parse_invalid(text, reason):
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert reason in str(info.value)
    assert repr(text) in str(info.value)  # the message names the input


@pytest.mark.parametrize("bad", [None, 1.5, [1], True])
def test_parse_rejects_non_strings(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_parse_int_and_fraction_pass_through():
    assert parse_quantity(7) == 7
    assert parse_quantity(F(3, 2)) == F(3, 2)


@pytest.mark.parametrize(
    "value, like, expected",
    [
        ("80Gi", "80Gi", "80Gi"),
        ("1536", "1Ki", "1536"),  # not a whole number of Ki
        ("1.5Gi", "1Gi", "1536Mi"),
        ("512", "1Ki", "512"),  # under 1Ki: shown as decimal
        ("1000", "1", "1k"),
        ("1500", "1", "1500"),
        ("1.5", "1", "1500m"),
        ("0.5", "1", "500m"),
        ("1n", "1", "1n"),
        ("1e3", "1e3", "1e3"),
        ("1500", "1e3", "1500"),
        ("0", "1Gi", "0"),
        ("-2Ki", "1Ki", "-2Ki"),
        ("-1500m", "1", "-1500m"),
    ],
)
def test_format_like(value, like, expected):
    assert format_quantity(parse_quantity(value), like) == expected


@pytest.mark.parametrize(
    "value, expected",
    [("80Gi", "80Gi"), ("40G", "40G"), ("1024", "1Ki"), ("1000", "1k"), ("1.5", "1500m"), ("7", "7")],
)
def test_format_default_picks_shorter_spelling(value, expected):
    assert format_quantity(parse_quantity(value)) == expected


@pytest.mark.parametrize("text", ["80Gi", "40G", "100m", "1.5Gi", "1n", "123456789", "-3Ki", "2e10"])
def test_format_round_trips(text):
    value = parse_quantity(text)
    assert parse_quantity(format_quantity(value)) == value
    assert parse_quantity(format_quantity(value, text)) == value


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("1Gi", "1073741824", 0),
        ("1G", "1Gi", -1),
        ("80Gi", "40Gi", 1),
        ("100m", "0.1", 0),
        ("-1", "0", -1),
        (1024, "1Ki", 0),
    ],
)
def test_compare(a, b, expected):
    assert compare(a, b) == expected
    assert compare(b, a) == -expected


def test_compare_rejects_bad_input():
    with pytest.raises(QuantityError):
        compare("1Gi", "lots")
