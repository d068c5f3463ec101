"""CEL limits like Kubernetes: RE2, the estimated and the runtime cost limit, size and nesting
limits, and that nothing but a CelError ever comes out of compiling or evaluating a selector.

The cost table is upstream's (dynamic-resource-allocation/cel/compile_test.go, expectCost):
the estimate must be the same number, not just under the limit. No database is needed.
"""

import pytest

from dra import celcost
from dra.cel import (
    _CHECK_ENV,
    ENGINE_MAX_NESTING,
    MAX_COST,
    MAX_EXPRESSION_BYTES,
    CelCompileError,
    CelError,
    CelRuntimeError,
    compile_selector,
    make_device,
)

DRIVER = "dra.example.com"
LIST_MAX = 64  # maxElementsListTypeEnabled upstream: max(64 characters, 48 values)
TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
UPSTREAM_EXPENSIVE = (
    f"{TEN}.all(x, {TEN}.all(y, {TEN}.all(z, {TEN}.all(z2, {TEN}.all(z3, {TEN}.all(z4, "
    f"{TEN}.all(z5, int('1'.find('[0-9]*')) < 100)))))))"
)


def device(attributes=None, capacity=None, driver=DRIVER):
    return make_device(driver, attributes or {}, capacity or {}, list_attributes=True)


def evaluate(expression, dev=None, **kwargs):
    return compile_selector(expression, **kwargs).evaluate(dev if dev is not None else device())


@pytest.mark.parametrize(
    "expression, cost",
    [
        ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', 6),
        ('device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', 6),
        ('"no-such-domain" in device.attributes', 3),
        ('device.driver == ""', 2),
        ('device.driver == "dra.example.com"', 4),
        ('device.attributes["dra.example.com"].name', 4),
        ('device.attributes["dra.example.com"]["name"]', 4),
        ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', 15),
        ('device.attributes["dra.example.com"].name > 0', 5),
        ('device.attributes["dra.example.com"].name == "fish"', 5),
        ('device.attributes["dra.example.com"].name.exists(x, x > 0)', 5 + (3 + 3) * LIST_MAX),
        ('device.attributes["dra.example.com"].names.size() == 2', 6),
        ('device.attributes["dra.example.com"].names.all(x, x != "")', 5 + (2 + 2) * LIST_MAX),
        ('device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))', 5 + (2 + 4) * LIST_MAX),
        ('device.attributes["dra.example.com"].name.includes("fish")', 4 + 48),
        ('device.attributes["dra.example.com"].name.includes(semver("1.0.0"))', 4 + 48 + 1),
        ('1 in device.attributes["dra.example.com"].names', 4 + 64),
        ('device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))', 6),
        (
            'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
            7,
        ),
        ('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 6),
        (
            '"name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
            10,
        ),
        (
            '!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
            11,
        ),
        (
            'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c',
            12,
        ),
        ('device.attributes.exists_one(x, x == "dra.example.com")', 164),
        ('device.attributes["dra.example.com"].exists_one(x, x == "services")', 133),
        ('device.attributes["dra.example.com"].services.split("example").size() >= 2', 19),
        ('device.attributes["dra.example.com"].services.matches("[^a]?sym")', 18),
        ('device.capacity.exists_one(x, x == "dra.example.com")', 164),
        ('device.capacity["dra.example.com"].exists_one(x, x == "memory")', 133),
        ("device.allowMultipleAllocations == true", 3),
        (UPSTREAM_EXPENSIVE, 85555551),
    ],
)
def test_estimated_cost_is_upstreams(expression, cost):
    ast = celcost.CheckedAst(_CHECK_ENV.compile(expression).serialize())
    assert celcost.estimate_cost(ast) == cost
    if cost <= MAX_COST:
        assert compile_selector(expression).max_cost == cost


def test_over_the_estimated_limit_is_refused_with_kubernetes_wording():
    with pytest.raises(CelCompileError) as caught:
        compile_selector(UPSTREAM_EXPENSIVE)
    assert str(caught.value) == "too complex, exceeds cost limit"
    # Just over and just under the limit, through the string-equality cost (length x 0.1):
    # 9,000 iterations of one string comparison each.
    seventy = "[" + ", ".join(['"a"'] * 70) + "]"
    thousand = "[" + ", ".join(["1"] * 1000) + "]"
    assert compile_selector(f"{seventy}.all(s, {seventy}.all(t, s == t))").max_cost < MAX_COST
    with pytest.raises(CelCompileError, match="^too complex, exceeds cost limit$"):
        compile_selector(f"{thousand}.all(i, {thousand}.all(j, i == j))")


def test_over_the_runtime_limit_fails_at_evaluation_like_upstream():
    # Stored objects are compiled as the scheduler does (no estimate check); the evaluation then stops.
    selector = compile_selector(UPSTREAM_EXPENSIVE, stored=True)
    assert selector.max_cost == 85555551
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        selector.evaluate(device())
    # A stored selector over the estimate but cheap on the device at hand still runs: the runtime
    # bound uses the device's actual sizes (here: no attributes to iterate).
    cheap_here = 'device.attributes.all(d, device.attributes[d].all(a, a.matches("' + "x" * 1200 + '")))'
    stored = compile_selector(cheap_here, stored=True)
    assert stored.max_cost > MAX_COST
    assert stored.evaluate(device()) is True
    with pytest.raises(CelCompileError, match="too complex"):
        compile_selector(cheap_here)


@pytest.mark.parametrize(
    "expression",
    [
        '"aaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""',
        '"' + "a" * 4000 + '!".find("(a+)+$") == ""',
        '"' + "a" * 4000 + '!".findAll("(a|aa)+$") == []',
        '!("' + "a" * 4000 + '!".matches("^(a+)+$"))',
        '"' + "x" * 3000 + '".find("(x+x+)+y") == ""',
    ],
)
def test_catastrophic_patterns_are_linear(expression):
    # Backtracking engines take exponential time on these; RE2 answers right away.
    assert evaluate(expression) is True


@pytest.mark.parametrize(
    "expression, expected",
    [
        ('"abc".findAll("b*") == ["", "b", ""]', True),  # Go's FindAllString skips an empty match after a match
        ('"aaa".findAll("a*?") == ["", "", "", ""]', True),
        ('"héllo wörld".findAll("[^ ]+") == ["héllo", "wörld"]', True),
        ('"ab".find("^b") == ""', True),
        ('"a\\nb".find("(?m)^b") == "b"', True),
    ],
)
def test_find_all_follows_go(expression, expected):
    assert evaluate(expression) is expected


@pytest.mark.parametrize(
    "expression, message",
    [
        ('"x".matches("(a)\\\\1")', "invalid matches argument"),
        ('"x".matches("(?=a)")', "invalid matches argument"),
        ('"x".find("[") == ""', "program instantiation failed: error parsing regexp: missing ]: ["),
        (
            '"x".findAll("a{2000}").size() == 0',
            "program instantiation failed: error parsing regexp: invalid repetition size",
        ),
    ],
)
def test_invalid_literal_patterns_fail_to_compile(expression, message):
    with pytest.raises(CelCompileError, match=message.replace("[", r"\[").replace("(", r"\(")) as caught:
        compile_selector(expression)
    assert caught.value.line == 1 and caught.value.column > 1


def test_invalid_runtime_pattern_is_a_runtime_error():
    dev = device({"pattern": {"string": "(a"}})
    with pytest.raises(CelRuntimeError, match="Illegal regex: error parsing regexp: missing \\)"):
        evaluate('"a".find(device.attributes["dra.example.com"].pattern) == "a"', dev)
    with pytest.raises(CelRuntimeError, match="invalid regular expression"):
        evaluate('"a".matches(device.attributes["dra.example.com"].pattern)', dev)


def test_nested_all_over_100_by_100_items_which_kubernetes_accepts():
    hundred = "[" + ", ".join(str(i) for i in range(100)) + "]"
    # 10,100 iterations: more than the engine's own budget of 10,000 per evaluation.
    assert evaluate(f"{hundred}.all(x, {hundred}.all(y, x + y >= 0))") is True
    assert evaluate(f"{hundred}.all(x, {hundred}.all(y, x != 42 || y != 7))") is False
    assert (
        evaluate(f'device.driver == "{DRIVER}" && {hundred}.exists(x, {hundred}.exists(y, x * y == 99 * 98))') is True
    )
    assert evaluate(f"{hundred}.exists_one(x, {hundred}.all(y, x >= y))") is True
    # Errors keep CEL's rules: absorbed by a false conjunct, raised otherwise.
    assert evaluate(f"false && {hundred}.all(x, {hundred}.all(y, x / (y - 99) > -1000))") is False
    with pytest.raises(CelRuntimeError, match="division by zero"):
        evaluate(f"{hundred}.all(x, {hundred}.all(y, x / (y - 99) > -1000))")
    # A part that cannot be split says which limit it met.
    with pytest.raises(CelRuntimeError, match="more than 10,000 comprehension iterations"):
        evaluate(f"{hundred}.map(x, {hundred}.map(y, x)).size() > 0")


def test_size_and_nesting_limits():
    with pytest.raises(CelCompileError, match=f"more than the limit of {MAX_EXPRESSION_BYTES} bytes"):
        compile_selector("[" * 20000)
    for deep in ("[" * 5000, "(" * 5000 + "true" + ")" * 5000, "!" * 1 + "(" * 40 + "true" + ")" * 40):
        with pytest.raises(CelCompileError, match=f"nests more than {ENGINE_MAX_NESTING} levels"):
            compile_selector(deep)
    assert evaluate("(" * 20 + "true" + ")" * 20) is True
    assert evaluate("!" * 200 + "true") is True


@pytest.mark.parametrize(
    "expression",
    [
        '"\ud83d" == "a"',  # a lone surrogate, as a JSON body can carry
        '"a" == "b\udfff"',
        "device.driver\x00 == 1",
        "\ufeffdevice.driver == 'x'",
        '"\\ud83d" == "x"',  # the CEL escape of a lone surrogate
        "1 / 0 == 1",
        "[" * 5000,
        "{" * 3000 + "}" * 3000,
        "device.attributes[" * 1000,
        "a" * 10240,
        "'" * 7,
        "1" * 400 + " == 1",
        "0x" + "f" * 100 + " == 1",
        '"\\' + "x" * 3,
        "device.driver.matches(device.driver) && device.driver.find(device.driver) == ''",
    ],
)
def test_only_cel_errors_come_out(expression):
    try:
        result = evaluate(expression, device({"x": {"string": "y"}}))
    except CelError as exc:
        assert str(exc)  # a message is there and printable
        str(exc).encode("utf-8")
    else:
        assert result in (True, False)


@pytest.mark.parametrize(
    "driver, attributes, capacity, where",
    [
        (DRIVER, {"model": {"string": "\ud83d"}}, {}, "attribute model"),
        (DRIVER, {"\ud83d": {"int": 1}}, {}, "attribute \\ud83d"),
        (DRIVER, {"models": {"strings": ["ok", "\udfff"]}}, {}, "attribute models"),
        (DRIVER, {}, {"\ud83d": {"value": "1"}}, "capacity \\ud83d"),
        ("bad\ud83d.example.com", {}, {}, "driver bad\\ud83d.example.com"),
    ],
)
def test_device_data_with_lone_surrogates_fails_its_selectors_only(driver, attributes, capacity, where):
    # A posted document can carry them (the API server refuses them): the device is marked, the
    # process and the other devices are not affected, and the message itself encodes.
    bad = make_device(driver, attributes, capacity, list_attributes=True)
    with pytest.raises(CelRuntimeError) as caught:
        compile_selector("true").evaluate(bad)
    assert str(caught.value) == f"{where}: not valid UTF-8 text"
    str(caught.value).encode("utf-8")
    assert evaluate('device.driver == "dra.example.com"') is True


FUZZ_DEVICE = make_device(
    DRIVER,
    {"model": {"string": "H100"}, "n": {"int": 3}, "v": {"version": "1.2.3"}, "names": {"strings": ["a", "b"]}},
    {"memory": {"value": "80Gi"}},
    list_attributes=True,
)
_TOKENS = [
    "device",
    ".",
    "driver",
    "attributes",
    "capacity",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ",",
    ":",
    "?",
    "!",
    "&&",
    "||",
    "==",
    "!=",
    "<",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    " in ",
    '"dra.example.com"',
    '"model"',
    '"(a+)+$"',
    '"["',
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "1.5",
    "true",
    "false",
    "null",
    "x",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "size",
    "matches",
    "find",
    "findAll",
    "quantity",
    "semver",
    "compareTo",
    "isGreaterThan",
    "includes",
    "cel.bind",
    "has",
    "dyn",
    "int",
    "string",
    "sets.contains",
    "orValue",
    "[?",
    ".?",
    "'",
    '"',
    "\\",
    "\ud83d",
    "\x00",
    " ",
    "\n",
    "//",
    "b'",
    "r'",
    '"""',
]


def test_random_token_soup_gives_only_cel_errors():
    # Hundreds of malformed and odd expressions: every outcome is a bool or a CelError.
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=40))
    def soup(tokens):
        expression = "".join(tokens)
        try:
            result = compile_selector(expression).evaluate(FUZZ_DEVICE)
        except CelError as exc:
            str(exc).encode("utf-8")
        else:
            assert result in (True, False)

    soup()
