"""DRA CEL selectors: the Kubernetes environment as the scheduler sees it.

Cases mirror the behaviour of k8s.io/dynamic-resource-allocation/cel
(compile and match tables), the Kubernetes quantity/semver CEL libraries,
and ../shared/dra-cases.md C19/C20/C50. No database is needed.
"""

import pytest

from dra.cel import (
    MAX_EXPRESSION_BYTES,
    CelCompileError,
    CelRuntimeError,
    compile_selector,
    make_device,
)
from dra.semver import SemverError, parse_semver

DRIVER = "dra.example.com"


def device(attributes=None, capacity=None, driver=DRIVER, **kwargs):
    return make_device(driver, attributes or {}, capacity or {}, **kwargs)


def matches(expression, dev=None):
    return compile_selector(expression).evaluate(dev if dev is not None else device())


GPU = make_device(
    "gpu.nvidia.com",
    {
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "570.86.15"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "topology.k8s.io/numa": {"int": 1},
    },
    {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}, "example.com/bandwidth": {"value": "900G"}},
)


# --------------------------------------------------------------------------
# Matching: the upstream compile_test.go table, in our own words.

ALL_KINDS = {
    "bool": {"bool": True},
    "int": {"int": 1},
    "string": {"string": "fish"},
    "version": {"version": "1.0.0"},
}
ONE_MI = {"quantity": {"value": "1Mi"}}


@pytest.mark.parametrize(
    "expression, attributes, capacity, expected",
    [
        ("true", {}, {}, True),
        ("false", {}, {}, False),
        ('"no-such-domain" in device.attributes', {}, {}, False),
        ('"dra.example.com" in device.attributes', {"dra.example.com/something": {"bool": True}}, {}, True),
        ('device.driver == "dra.example.com"', {}, {}, True),
        ('device.attributes["dra.example.com"].name', {"name": {"bool": True}}, {}, True),
        ('device.attributes["dra.example.com"]["name"]', {"name": {"bool": True}}, {}, True),
        ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', {"name": {"bool": True}}, {}, True),
        ('device.attributes["other.example.com"].name', {"other.example.com/name": {"bool": True}}, {}, True),
        ('device.attributes["dra.example.com"].name > 0', {"name": {"int": 1}}, {}, True),
        ('device.attributes["dra.example.com"].name == "fish"', {"name": {"string": "fish"}}, {}, True),
        (
            'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
            {"name": {"version": "1.0.0"}},
            {},
            True,
        ),
        (
            'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
            {"name": {"version": "1.0.0"}},
            {},
            True,
        ),
        (
            'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
            {},
            {"name": {"value": "1Mi"}},
            True,
        ),
        (
            '"name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
            {},
            {"name": {"value": "1Mi"}},
            True,
        ),
        (
            '!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
            {},
            {},
            True,
        ),
        (
            """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""",
            ALL_KINDS,
            ONE_MI,
            True,
        ),
        ('device.attributes.exists_one(x, x == "dra.example.com")', {"services": {"string": "v"}}, {}, True),
        (
            'device.attributes["dra.example.com"].exists_one(x, x == "services")',
            {"services": {"string": "v"}},
            {},
            True,
        ),
        (
            'device.attributes["dra.example.com"].services.split("example").size() >= 2',
            {"services": {"string": "some_example_value"}},
            {},
            True,
        ),
        (
            'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
            {"services": {"string": "asymetric"}},
            {},
            True,
        ),
        ('device.capacity.exists_one(x, x == "dra.example.com")', {}, {"memory": {"value": "1Mi"}}, True),
        ('device.capacity["dra.example.com"].exists_one(x, x == "memory")', {}, {"memory": {"value": "1Mi"}}, True),
    ],
)
def test_upstream_match_table(expression, attributes, capacity, expected):
    assert matches(expression, device(attributes, capacity)) is expected


@pytest.mark.parametrize(
    "expression, message",
    [
        ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', "no such key: noSuchAttr"),
        ('device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', "no such key: noSuchAttr"),
        ('device.attributes["dra.example.com"].missing == 1', "no such key: missing"),
        ('device.capacity["dra.example.com"].memory.isGreaterThan(quantity("1"))', "no such key: memory"),
        ('device.attributes["dra.example.com"].n.exists(x, x > 0)', "expected iterable type"),
        ('device.attributes["dra.example.com"].n < "x"', "no such overload"),
        ('device.attributes["dra.example.com"].n', "CEL result of type int could not be converted to bool"),
        ('device.attributes["dra.example.com"].s', "CEL result of type string could not be converted to bool"),
    ],
)
def test_runtime_errors(expression, message):
    dev = device({"n": {"int": 1}, "s": {"string": "x"}})
    with pytest.raises(CelRuntimeError) as info:
        compile_selector(expression).evaluate(dev)
    assert message in str(info.value)
    assert info.value.expression == expression


def test_c19_missing_attribute_is_a_runtime_error():
    empty = make_device("driver-a", {}, {})
    with pytest.raises(CelRuntimeError, match="no such key: model"):
        matches('device.attributes["driver-a"].model == "x"', empty)


def test_domains_are_only_those_the_device_has():
    empty = make_device("driver-a", {}, {})
    assert matches("size(device.attributes) == 0 && size(device.capacity) == 0", empty)
    assert matches('!("driver-a" in device.attributes)', empty)
    assert matches('device.attributes["driver-a"] == {}', empty)


def test_c20_guarded_lookup_is_false():
    empty = make_device("driver-a", {}, {})
    guarded = [
        '"model" in device.attributes["driver-a"] && device.attributes["driver-a"].model == "x"',
        'has(device.attributes["driver-a"].model) && device.attributes["driver-a"].model == "x"',
        'device.attributes["driver-a"].?model.orValue("") == "x"',
    ]
    for expression in guarded:
        assert matches(expression, empty) is False, expression


@pytest.mark.parametrize(
    "expression, expected",
    [
        # Errors are absorbed by the side of && / || that decides.
        ('false && device.attributes["dra.example.com"].nope == 1', False),
        ('device.attributes["dra.example.com"].nope == 1 && false', False),
        ('true || device.attributes["dra.example.com"].nope == 1', True),
        ('device.attributes["dra.example.com"].nope == 1 || true', True),
        # Unknown domains are empty maps, never errors.
        ('"x" in device.attributes["other.domain"]', False),
        ('size(device.attributes["other.domain"]) == 0', True),
        ('device.attributes["other.domain"] == {}', True),
        ('size(device.capacity["other.domain"]) == 0', True),
        ('"other.domain" in device.attributes', False),
        ("size(device.attributes) == 1", True),  # only the driver's own domain
        # == across types is false; numbers compare across int and double.
        ('device.attributes["dra.example.com"].n == "1"', False),
        ('device.attributes["dra.example.com"].n == 1.0', True),
        ('device.attributes["dra.example.com"].n < 1.5', True),
    ],
)
def test_lookup_and_logic_semantics(expression, expected):
    assert matches(expression, device({"n": {"int": 1}})) is expected


def test_c50_allow_multiple_allocations():
    assert matches("device.allowMultipleAllocations == false", device()) is True
    assert matches("device.allowMultipleAllocations", device(allow_multiple_allocations=True)) is True
    assert (
        matches(
            'device.driver == "driver-a" && device.allowMultipleAllocations == false',
            make_device("driver-a", {}, {"capacity-0": {"value": "1"}}),
        )
        is True
    )


# --------------------------------------------------------------------------
# Quantity and semver functions


@pytest.mark.parametrize(
    "expression, expected",
    [
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) == 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("81Gi")) == -1', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80G"))', True),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("80Gi"))', False),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("85899345920")', True),
        ('device.capacity["gpu.nvidia.com"].memory.asInteger() == 85899345920', True),
        ('device.capacity["gpu.nvidia.com"].memory.isInteger()', True),
        ('device.capacity["gpu.nvidia.com"].memory.sign() == 1', True),
        ('device.capacity["gpu.nvidia.com"].memory.add(quantity("1Gi")) == quantity("81Gi")', True),
        ('device.capacity["gpu.nvidia.com"].memory.add(1).asInteger() == 85899345921', True),
        ('device.capacity["gpu.nvidia.com"].memory.sub(quantity("80Gi")).sign() == 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.sub(85899345921).sign() == -1', True),
        ('device.capacity["example.com"].bandwidth.compareTo(quantity("0.9T")) == 0', True),
        ('device.capacity["gpu.nvidia.com"].multiprocessors.asApproximateFloat() == 132.0', True),
        ('quantity("1.5").asApproximateFloat() == 1.5', True),
        ('quantity("100m").isInteger()', False),
        ('quantity("-1").sign() == -1', True),
        ('isQuantity("1Gi") && isQuantity("1e3") && !isQuantity("1 Gi") && !isQuantity("1K")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isLessThan(semver("570.86.16"))', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.86.15")) == 0', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion == semver("570.86.15")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 570', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.minor() == 86', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.patch() == 15', True),
        ('device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))', True),
        ('semver("1.0.0+build.1") == semver("1.0.0+other")', True),  # build metadata is ignored
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('semver("v1.2", true) == semver("1.2.0")', True),
        ('semver("01.01.01", true) == semver("1.1.1")', True),
        ('isSemver("1.2.3") && !isSemver("1.2") && !isSemver("v1.2.3") && isSemver("v1.2", true)', True),
        ('device.attributes["topology.k8s.io"].numa == 1', True),
    ],
)
def test_quantity_and_semver_functions(expression, expected):
    assert matches(expression, GPU) is expected


@pytest.mark.parametrize(
    "expression, message",
    [
        ('quantity("lots").sign() == 1', "invalid quantity 'lots'"),
        ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
        ('semver("1.2").major() == 1', "invalid semantic version '1.2'"),
        ('semver("1.2-rc", true).major() == 1', "short version cannot contain PreRelease"),
    ],
)
def test_quantity_and_semver_errors(expression, message):
    with pytest.raises(CelRuntimeError) as info:
        matches(expression, GPU)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-alpha.beta", "1.0.0-beta"),
        ("1.0.0-beta", "1.0.0-beta.2"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-beta.11", "1.0.0-rc.1"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.9.0", "1.10.0"),
        ("1.10.0", "2.0.0"),
    ],
)
def test_semver_precedence(lower, higher):
    assert matches(f'semver("{lower}").compareTo(semver("{higher}")) == -1')
    assert matches(f'semver("{higher}").isGreaterThan(semver("{lower}"))')
    assert parse_semver(lower).compare(parse_semver(higher)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1.2",
        "v1.2.3",
        "01.2.3",
        "1.02.3",
        "1.2.03",
        "1.2.3-",
        "1.2.3-01",
        "1.2.3+",
        "1.2.3-a..b",
        "1.2.3-é",
        "a.b.c",
    ],
)
def test_semver_strict_rejects(text):
    with pytest.raises(SemverError):
        parse_semver(text)


@pytest.mark.parametrize(
    "text, expected",
    [("v1.2.3", "1.2.3"), ("1.2", "1.2.0"), ("1", "1.0.0"), ("01.01.01", "1.1.1"), ("v1.0.0-rc.1+b", "1.0.0-rc.1+b")],
)
def test_semver_normalized(text, expected):
    assert str(parse_semver(text, True)) == expected


# --------------------------------------------------------------------------
# Other libraries of the environment


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")',
        'device.attributes["gpu.nvidia.com"].productName.endsWith("HBM3")',
        'device.attributes["gpu.nvidia.com"].productName.contains("80GB")',
        'device.attributes["gpu.nvidia.com"].productName.matches("^NVIDIA H(100|200)")',
        'device.attributes["gpu.nvidia.com"].productName.lowerAscii() == "nvidia h100 80gb hbm3"',
        'device.attributes["gpu.nvidia.com"].productName.upperAscii().contains("HBM3")',
        'device.attributes["gpu.nvidia.com"].productName.split(" ")[1] == "H100"',
        'device.attributes["gpu.nvidia.com"].productName.replace("NVIDIA ", "") == "H100 80GB HBM3"',
        'device.attributes["gpu.nvidia.com"].productName.indexOf("H100") == 7',
        'device.attributes["gpu.nvidia.com"].productName.lastIndexOf("H") == 17',
        'device.attributes["gpu.nvidia.com"].productName.charAt(0) == "N"',
        'device.attributes["gpu.nvidia.com"].productName.substring(7, 11) == "H100"',
        '"  x ".trim() == "x"',
        '["a", "b"].join("-") == "a-b"',
        '"%s-%d".format(["gpu", 3]) == "gpu-3"',
        "[1, 2, 3].all(x, x > 0) && [1, 2].exists(x, x == 2) && [1, 2].exists_one(x, x > 1)",
        "[1, 2].map(x, x * 2) == [2, 4] && [1, 2, 3].filter(x, x > 1) == [2, 3]",
        'device.attributes["gpu.nvidia.com"].all(k, k != "")',
        "[1, 2, 3].isSorted() && ![3, 1].isSorted()",
        "[1, 2, 3].sum() == 6 && [1, 2, 3].min() == 1 && [1, 2, 3].max() == 3",
        "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
        '"abc 123 456".find("[0-9]+") == "123" && "abc 123 456".findAll("[0-9]+") == ["123", "456"]',
        '"a1b2".findAll("[0-9]", 1) == ["1"]',
        "sets.contains([1, 2, 3], [1, 2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 4])",
        'device.attributes["gpu.nvidia.com"].?productName.hasValue()',
        '!device.attributes["gpu.nvidia.com"].?nope.hasValue()',
        'cel.bind(g, device.attributes["gpu.nvidia.com"], g.index == 3 && g.healthy)',
        'device.attributes["gpu.nvidia.com"].index.includes(3)',
    ],
)
def test_environment_functions(expression):
    assert matches(expression, GPU) is True


def test_list_attributes_follow_the_feature_gate():
    raw = {"names": {"strings": ["fish", "bird"]}, "ids": {"ints": [1, 2]}}
    off = device(raw)
    with pytest.raises(
        CelRuntimeError, match="attribute names: unsupported attribute value|attribute ids: unsupported attribute value"
    ):
        matches("true", off)  # every selector fails on such a device
    on = device(raw, list_attributes=True)
    assert matches('device.attributes["dra.example.com"].names.includes("fish")', on)
    assert not matches('device.attributes["dra.example.com"].names.includes("cat")', on)
    assert matches('1 in device.attributes["dra.example.com"].ids', on)
    assert matches('device.attributes["dra.example.com"].ids.exists(x, x > 1)', on)
    with pytest.raises(CelRuntimeError, match="CEL result of type list"):
        matches('device.attributes["dra.example.com"].names', on)


# --------------------------------------------------------------------------
# make_device


def test_make_device_groups_names_by_domain():
    assert GPU.attribute("productName") == "NVIDIA H100 80GB HBM3"
    assert GPU.attribute("gpu.nvidia.com/index") == 3
    assert GPU.attribute("topology.k8s.io/numa") == 1
    assert GPU.attribute("nope") is None
    assert str(GPU.attribute("driverVersion")) == "570.86.15"
    assert GPU.capacity_value("memory") == 80 * 2**30
    assert GPU.capacity_value("example.com/bandwidth") == 900 * 10**9
    assert GPU.attributes["topology.k8s.io"] == {"numa": 1}


@pytest.mark.parametrize(
    "attributes, capacity, message",
    [
        ({"empty": {}}, {}, "attribute empty: unsupported attribute value"),
        ({"v": {"version": "1.0"}}, {}, "attribute v: parse semantic version"),
        ({"n": {"int": "3"}}, {}, "attribute n: int value '3' has the wrong type"),
        ({}, {"memory": {"value": "lots"}}, "capacity memory: invalid quantity 'lots'"),
    ],
)
def test_bad_device_values_fail_every_evaluation(attributes, capacity, message):
    dev = device(attributes, capacity)
    for expression in ("true", 'device.driver == "x"'):
        with pytest.raises(CelRuntimeError) as info:
            matches(expression, dev)
        assert message in str(info.value)


# --------------------------------------------------------------------------
# Compilation


@pytest.mark.parametrize(
    "expression, message, line, column",
    [
        ("?!", "Syntax error", 1, 1),
        ("1", "must evaluate to bool or the unknown type, not int", 1, 1),
        ("device.driver", "must evaluate to bool or the unknown type, not string", 1, 1),
        ('device.drivr == "a"', "undefined field 'drivr'", 1, 7),
        ('device.driver == "a" &&\n  device.attributes["d"].x ==', "Syntax error", 2, 30),
        ('semver("1.0.0").compareTo(quantity("1")) == 0', "no matching overload for 'compareTo'", 1, 26),
        ('isURL("https://example.com")', "function 'isURL' (Kubernetes URL library) is not supported", 1, 6),
        ('device.attributes["d"].ip.isIP()', "function 'isIP' (Kubernetes IP library)", 1, 31),
        ("unknownFunction(1)", "undeclared reference to 'unknownFunction'", 1, 16),
    ],
)
def test_compile_errors_have_positions(expression, message, line, column):
    with pytest.raises(CelCompileError) as info:
        compile_selector(expression)
    error = info.value
    assert message in error.message
    assert (error.line, error.column) == (line, column)
    assert error.expression == expression
    text = str(error)
    assert text.startswith(f"line {line}, column {column}: ")
    caret_line = text.splitlines()[-1]
    assert caret_line.endswith("^") and caret_line.index("^") == len(" | ") + column - 1


def test_expression_size_limit():
    body = " && ".join(["true"] * (MAX_EXPRESSION_BYTES // 8 + 1))
    assert len(body) > MAX_EXPRESSION_BYTES
    with pytest.raises(CelCompileError, match="more than the limit of 10240 bytes"):
        compile_selector(body)
    at_limit = "true" + " " * (MAX_EXPRESSION_BYTES - 4)
    assert matches(at_limit) is True


def test_cost_limit_rejects_runaway_comprehensions():
    ten = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
    nested = f"{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, {ten}.all(e, {ten}.all(f, {ten}.all(g, int('1'.find('[0-9]*')) < 100)))))))"
    with pytest.raises(CelCompileError, match="too complex, exceeds cost limit"):
        compile_selector(nested)
    # Realistic comprehensions stay well inside the limit.
    assert matches('device.attributes.all(d, device.attributes[d].all(k, k != ""))', GPU)


def test_empty_and_non_string_expressions():
    with pytest.raises(CelCompileError, match="empty"):
        compile_selector("   ")
    with pytest.raises(CelCompileError, match="must be a string"):
        compile_selector(None)


def test_compiled_selectors_are_cached():
    expression = 'device.driver == "cache.example.com"'
    assert compile_selector(expression) is compile_selector(expression)


@pytest.mark.parametrize(
    "expression, expected",
    [
        # The default-domain rewrite must not touch strings or comments...
        ("device.driver != 'device.attributes[\"x\"]'", True),
        ('device.driver != "device.attributes[\\"x\\"]" // device.attributes["y"]', True),
        # ...and must cope with nested brackets and explicit optionals.
        ('"k" in device.attributes[["nope", "x"][0]]', False),
        ('device.attributes[?"nope"].orValue({"a": 1}).a == 1', True),
        ("device.attributes[device.driver].n == 1", True),
        ("device.capacity['other'] == {}", True),
    ],
)
def test_default_domain_rewrite_edge_cases(expression, expected):
    assert matches(expression, device({"n": {"int": 1}})) is expected
