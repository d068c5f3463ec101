"""CEL device selectors with the Kubernetes DRA environment.

Built on cel-expr-python (Google's C++ CEL engine): it has a real type
checker with positioned errors, cel.bind, the strings extension and
optional syntax, and it is fast. What it lacks is filled in here:

* The `device` variable. Two environments are used. The *checking*
  environment declares `device` as a protobuf message shaped like
  Kubernetes' `kubernetes.DRADevice` (so `device.drivr` or a non-bool result
  are compile errors, as upstream). The *runtime* environment declares it as
  a plain map, because the engine only accepts protobuf messages for message
  variables and attribute values are of mixed types.
* Unknown attribute/capacity domains read as `{}` upstream (a map with a
  default). The engine has no such map, so before the runtime compile every
  `device.attributes[X]` / `device.capacity[X]` is rewritten to
  `device.attributes[?X].orValue(dyn({}))`. `"dom" in device.attributes` keeps
  answering false because only existing domains are in the map.
* Quantity and Semver values. Custom member functions only work on protobuf
  message types, so both are small messages built at runtime, holding a
  canonical string (which also makes `==` compare values, like upstream's
  Equal). The Python callbacks parse that string through an LRU cache.
* Kubernetes' own libraries (quantity, semver, lists, regex, sets, DRA's
  includes) are declared here; the ones not reproduced (URL, IP/CIDR,
  format, authz, two-variable comprehensions, lists v3) are rejected at
  compile time with a message naming the function.
* Upstream's cost limit: the engine has no cost accounting, so nested
  comprehensions are bounded by a rough static estimate at compile time.
* Speed: `quantity("lit")`/`semver("lit")` are folded into message
  literals, and each device keeps one pre-converted activation reused by
  every selector.

Known gaps: `device.attributes` aliased through cel.bind and then indexed
with an unknown domain errors instead of giving `{}`; `has(device.attributes.x)`
is false for an unknown domain (upstream: true).
"""

import re
import threading
from fractions import Fraction
from functools import lru_cache
from threading import get_ident

import re2
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2

from . import celcost, celsplit
from .errors import shown
from .quantity import QuantityError, format_quantity, parse_quantity
from .semver import Semver, SemverError, parse_semver

__all__ = [
    "CelError",
    "CelCompileError",
    "CelRuntimeError",
    "Selector",
    "CelDevice",
    "compile_selector",
    "make_device",
    "MAX_EXPRESSION_BYTES",
]

# Kubernetes' CELSelectorExpressionMaxLength.
MAX_EXPRESSION_BYTES = 10 * 1024
# How many compiled selectors are kept (upstream keeps 10; previews of a
# whole fleet see more distinct class/request selectors than a scheduler).
SELECTOR_CACHE_SIZE = 1024


class CelError(Exception):
    pass


class CelCompileError(CelError):
    """A selector that does not compile. `line` and `column` are 1-based."""

    def __init__(self, expression, message, line=None, column=None):
        self.expression = expression
        self.message = message
        self.line = line
        self.column = column
        super().__init__(message)

    def __str__(self):
        if self.line is None:
            return self.message
        text = f"line {self.line}, column {self.column}: {self.message}"
        lines = self.expression.splitlines() or [""]
        if 1 <= self.line <= len(lines):
            source = lines[self.line - 1]
            text += f"\n | {source}\n | {'.' * max(self.column - 1, 0)}^"
        return text


class CelRuntimeError(CelError):
    def __init__(self, expression, message):
        self.expression = expression
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


# --------------------------------------------------------------------------
# Protobuf types: kubernetes.Quantity, kubernetes.Semver, kubernetes.DRADevice


def _build_pool():
    pool = descriptor_pool.DescriptorPool()
    struct_file = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(struct_file)
    pool.Add(struct_file)

    proto = descriptor_pb2.FileDescriptorProto(
        name="gpudash/kubernetes_cel.proto", package="kubernetes", syntax="proto3"
    )
    proto.dependency.append(struct_file.name)
    string, boolean, message = (
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
        descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    )
    optional, repeated = (
        descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    # Canonical value strings: a reduced fraction ("85899345920", "3/2") and
    # a version without build metadata ("1.2.3-rc.1").
    for name in ("Quantity", "Semver"):
        proto.message_type.add(name=name).field.add(name="value", number=1, type=string, label=optional)

    device = proto.message_type.add(name="DRADevice")
    device.field.add(name="driver", number=1, type=string, label=optional)
    device.field.add(name="allowMultipleAllocations", number=2, type=boolean, label=optional)
    # map<string, google.protobuf.Struct>: the checker sees
    # map(string, map(string, dyn)), the shape upstream declares.
    for number, name, entry in ((3, "attributes", "AttributesEntry"), (4, "capacity", "CapacityEntry")):
        nested = device.nested_type.add(name=entry)
        nested.options.map_entry = True
        nested.field.add(name="key", number=1, type=string, label=optional)
        nested.field.add(name="value", number=2, type=message, label=optional, type_name=".google.protobuf.Struct")
        device.field.add(
            name=name,
            number=number,
            type=message,
            label=repeated,
            type_name=f".kubernetes.DRADevice.{entry}",
        )
    pool.Add(proto)
    return pool


_POOL = _build_pool()
QuantityMessage = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kubernetes.Quantity"))
SemverMessage = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("kubernetes.Semver"))

_QUANTITY = cel.Type("kubernetes.Quantity")
_SEMVER = cel.Type("kubernetes.Semver")
_DYN_LIST = cel.Type.List(cel.Type.DYN)


def _fraction_text(value):
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@lru_cache(maxsize=8192)
def _fraction(text):
    return Fraction(text)


def quantity_message(value):
    """A kubernetes.Quantity message for a Fraction (or quantity string)."""
    return QuantityMessage(value=_fraction_text(parse_quantity(value)))


def semver_message(version):
    """A kubernetes.Semver message; build metadata is dropped since upstream
    equality and ordering ignore it."""
    if isinstance(version, str):
        version = parse_semver(version)
    return SemverMessage(value=str(Semver(version.major, version.minor, version.patch, version.pre)))


def _q(message):
    return _fraction(message.value)


def _v(message):
    return parse_semver(message.value)


# --------------------------------------------------------------------------
# Function implementations. Errors raised here become CEL error values (so
# `false && <error>` still absorbs them) with the exception text as message.


class _CelFunctionError(ValueError):
    pass


def _quantity(text):
    try:
        return quantity_message(text)
    except QuantityError as exc:
        raise _CelFunctionError(f"quantity: {exc}") from None


def _is_quantity(text):
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _semver(text, normalize=False):
    try:
        return semver_message(parse_semver(text, bool(normalize)))
    except SemverError as exc:
        raise _CelFunctionError(f"semver: {exc}") from None


def _is_semver(text, normalize=False):
    try:
        parse_semver(text, bool(normalize))
    except SemverError:
        return False
    return True


def _ordering(a, b):
    # compareTo / isLessThan / isGreaterThan are declared for both types, and
    # the engine binds one implementation per function name: dispatch here.
    if isinstance(a, QuantityMessage) and isinstance(b, QuantityMessage):
        x, y = _q(a), _q(b)
        return (x > y) - (x < y)
    if isinstance(a, SemverMessage) and isinstance(b, SemverMessage):
        return _v(a).compare(_v(b))
    raise _CelFunctionError(f"no such overload: cannot compare {type(a).__name__} with {type(b).__name__}")


def _compare_to(a, b):
    return _ordering(a, b)


def _is_less_than(a, b):
    return _ordering(a, b) < 0


def _is_greater_than(a, b):
    return _ordering(a, b) > 0


def _sign(q):
    value = _q(q)
    return (value > 0) - (value < 0)


def _is_integer(q):
    value = _q(q)
    return value.denominator == 1 and -(2**63) <= value < 2**63


def _as_integer(q):
    if not _is_integer(q):
        raise _CelFunctionError("cannot convert value to integer")
    return int(_q(q))


def _as_approximate_float(q):
    return float(_q(q))


def _add(q, other):
    other_value = _q(other) if isinstance(other, QuantityMessage) else Fraction(other)
    return QuantityMessage(value=_fraction_text(_q(q) + other_value))


def _sub(q, other):
    other_value = _q(other) if isinstance(other, QuantityMessage) else Fraction(other)
    return QuantityMessage(value=_fraction_text(_q(q) - other_value))


def _major(v):
    return _v(v).major


def _minor(v):
    return _v(v).minor


def _patch(v):
    return _v(v).patch


# Kubernetes lists library.


def _comparable(items, what):
    items = list(items)
    kinds = {bool if isinstance(i, bool) else (float if isinstance(i, (int, float)) else type(i)) for i in items}
    if len(kinds) > 1:
        raise _CelFunctionError(f"{what}: no such overload for mixed element types")
    return items


def _is_sorted(items):
    items = _comparable(items, "isSorted")
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items):
    items = _comparable(items, "sum")
    if not items:
        return 0
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _min(items):
    items = _comparable(items, "min")
    if not items:
        raise _CelFunctionError("min called on empty list")
    return min(items)


def _max(items):
    items = _comparable(items, "max")
    if not items:
        raise _CelFunctionError("max called on empty list")
    return max(items)


def _same(a, b):
    # CEL equality: no bool/int confusion, numbers compare across types.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _list_index_of(items, value):
    for i, item in enumerate(items):
        if _same(item, value):
            return i
    return -1


def _list_last_index_of(items, value):
    items = list(items)
    for i in range(len(items) - 1, -1, -1):
        if _same(items[i], value):
            return i
    return -1


# Kubernetes regex library, on RE2 like upstream (Go's regexp is RE2):
# matching is linear in the text, so no pattern can stall the process, and
# RE2-only syntax (no backreferences or lookaround) is what is accepted.
# The engine's own `matches` already uses RE2.

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # errors become CEL errors, not stderr noise


def regex_error_text(exc):
    text = exc.args[0] if exc.args else exc
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return f"error parsing regexp: {text}"


@lru_cache(maxsize=256)
def _compiled_regex(pattern):
    try:
        return re2.compile(pattern, _RE2_OPTIONS), None
    except re2.error as exc:
        return None, regex_error_text(exc)


def _regex(pattern):
    compiled, problem = _compiled_regex(pattern)
    if problem is not None:
        raise _CelFunctionError(f"Illegal regex: {problem}")
    return compiled


def _find(text, pattern):
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text, pattern, limit=-1):
    """Go's FindAllString: successive non-overlapping matches, where an
    empty match right after the previous match is skipped."""
    compiled = _regex(pattern)
    found = []
    pos, previous_end = 0, -1
    while pos <= len(text) and (limit < 0 or len(found) < limit):
        match = compiled.search(text, pos)
        if match is None:
            break
        start, end = match.span()
        if start == end:
            pos = end + 1
            if start == previous_end:
                continue
        else:
            pos = end
        found.append(match.group(0))
        previous_end = end
    return found


# cel-go sets extension.


def _sets_contains(items, sub):
    return all(any(_same(x, y) for y in items) for x in sub)


def _sets_equivalent(a, b):
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a, b):
    return any(any(_same(x, y) for y in b) for x in a)


# DRA's includes(): membership in a list attribute, equality for a scalar.
MAX_LIST_ATTRIBUTE_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice


def _includes(container, value):
    if isinstance(container, (list, tuple)):
        if len(container) > MAX_LIST_ATTRIBUTE_VALUES:
            raise _CelFunctionError(
                f"'includes' function cannot be applied to lists longer than {MAX_LIST_ATTRIBUTE_VALUES} values"
            )
        return any(_same(item, value) for item in container)
    return _same(container, value)


def _overload(oid, result, params, impl, member=False):
    return cel.Overload(oid, result, params, is_member=member, impl=impl)


# Functions implemented by Python callbacks: the engine needs the calling
# thread's arena for them. indexOf/lastIndexOf also name C++ string functions.
_PYTHON_FUNCTIONS = {"indexOf", "lastIndexOf"}


def _kubernetes_extension(for_runtime):
    S, B, I, D = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT, cel.Type.DOUBLE  # noqa: E741 (CEL type letters)
    Q, V, L, DYN = _QUANTITY, _SEMVER, _DYN_LIST, cel.Type.DYN
    decls = {
        "quantity": [_overload("string_to_quantity", Q, [S], _quantity)],
        "isQuantity": [_overload("is_quantity_string", B, [S], _is_quantity)],
        "sign": [_overload("quantity_sign", I, [Q], _sign, True)],
        "isInteger": [_overload("quantity_is_integer", B, [Q], _is_integer, True)],
        "asInteger": [_overload("quantity_as_integer", I, [Q], _as_integer, True)],
        "asApproximateFloat": [_overload("quantity_as_float", D, [Q], _as_approximate_float, True)],
        "add": [
            _overload("quantity_add", Q, [Q, Q], _add, True),
            _overload("quantity_add_int", Q, [Q, I], _add, True),
        ],
        "sub": [
            _overload("quantity_sub", Q, [Q, Q], _sub, True),
            _overload("quantity_sub_int", Q, [Q, I], _sub, True),
        ],
        "semver": [
            _overload("string_to_semver", V, [S], _semver),
            _overload("string_bool_to_semver", V, [S, B], _semver),
        ],
        "isSemver": [
            _overload("is_semver_string", B, [S], _is_semver),
            _overload("is_semver_string_bool", B, [S, B], _is_semver),
        ],
        "major": [_overload("semver_major", I, [V], _major, True)],
        "minor": [_overload("semver_minor", I, [V], _minor, True)],
        "patch": [_overload("semver_patch", I, [V], _patch, True)],
        "isSorted": [_overload("list_is_sorted", B, [L], _is_sorted, True)],
        "sum": [_overload("list_sum", DYN, [L], _sum, True)],
        "min": [_overload("list_min", DYN, [L], _min, True)],
        "max": [_overload("list_max", DYN, [L], _max, True)],
        "find": [_overload("string_find", S, [S, S], _find, True)],
        "findAll": [
            _overload("string_find_all", cel.Type.List(S), [S, S], _find_all, True),
            _overload("string_find_all_n", cel.Type.List(S), [S, S, I], _find_all, True),
        ],
        "includes": [_overload("dra_includes", B, [DYN, DYN], _includes, True)],
        "sets.contains": [_overload("list_sets_contains_list", B, [L, L], _sets_contains)],
        "sets.equivalent": [_overload("list_sets_equivalent_list", B, [L, L], _sets_equivalent)],
        "sets.intersects": [_overload("list_sets_intersects_list", B, [L, L], _sets_intersects)],
    }
    # The engine registers implementations by argument kind, and every
    # message type is the same kind, so the Quantity and Semver overloads of
    # compareTo/isLessThan/isGreaterThan cannot coexist at runtime. The
    # checking environment declares both (precise type errors); the runtime
    # environment one dyn overload whose implementation dispatches on type.
    for name, result, impl in (
        ("compareTo", I, _compare_to),
        ("isLessThan", B, _is_less_than),
        ("isGreaterThan", B, _is_greater_than),
    ):
        if for_runtime:
            decls[name] = [_overload(f"dyn_{name}", result, [DYN, DYN], impl, True)]
        else:
            decls[name] = [
                _overload(f"quantity_{name}", result, [Q, Q], impl, True),
                _overload(f"semver_{name}", result, [V, V], impl, True),
            ]
    _PYTHON_FUNCTIONS.update(decls)
    functions = [cel.FunctionDecl(name, overloads) for name, overloads in decls.items()]
    return cel.CelExtension("kubernetes", functions)


def _list_index_extension():
    # The strings extension already owns indexOf/lastIndexOf for strings; the
    # list overloads of Kubernetes' lists library live in their own extension.
    L = _DYN_LIST
    return cel.CelExtension(
        "kubernetes_lists_index",
        [
            cel.FunctionDecl(
                "indexOf", [_overload("list_a_index_of_int", cel.Type.INT, [L, cel.Type.DYN], _list_index_of, True)]
            ),
            cel.FunctionDecl(
                "lastIndexOf",
                [_overload("list_a_last_index_of_int", cel.Type.INT, [L, cel.Type.DYN], _list_last_index_of, True)],
            ),
        ],
    )


def _extensions(for_runtime):
    return [
        ext_strings.ExtStrings(),
        ext_optional.ExtOptional(),
        ext_bindings.ExtBindings(),
        _kubernetes_extension(for_runtime),
        _list_index_extension(),
    ]


_CHECK_ENV = cel.NewEnv(_POOL, variables={"device": cel.Type("kubernetes.DRADevice")}, extensions=_extensions(False))
_RUN_ENV = cel.NewEnv(
    _POOL, variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}, extensions=_extensions(True)
)


# --------------------------------------------------------------------------
# Compilation


# Functions of the Kubernetes environment this engine does not provide, with
# the library they come from, for a clear compile error.
_UNSUPPORTED = {
    "url": "URL",
    "isURL": "URL",
    "getScheme": "URL",
    "getHost": "URL",
    "getHostname": "URL",
    "getPort": "URL",
    "getEscapedPath": "URL",
    "getQuery": "URL",
    "ip": "IP",
    "isIP": "IP",
    "cidr": "CIDR",
    "isCIDR": "CIDR",
    "containsIP": "CIDR",
    "containsCIDR": "CIDR",
    "prefixLength": "CIDR",
    "masked": "CIDR",
    "family": "IP",
    "isUnspecified": "IP",
    "isLoopback": "IP",
    "isLinkLocalMulticast": "IP",
    "isLinkLocalUnicast": "IP",
    "isGlobalUnicast": "IP",
    "format": "format",
    "validate": "format",
    "named": "format",
    "dns1123Label": "format",
    "dns1123Subdomain": "format",
    "qualifiedName": "format",
    "labelValue": "format",
    "uri": "format",
    "uuid": "format",
    "byte": "format",
    "date": "format",
    "datetime": "format",
    "authorizer": "authz",
    "path": "authz",
    "group": "authz",
    "resource": "authz",
    "distinct": "lists v3",
    "flatten": "lists v3",
    "lists": "lists v3",
    "slice": "lists v3",
    "sort": "lists v3",
    "sortBy": "lists v3",
    "transformList": "two-variable comprehensions",
    "transformMap": "two-variable comprehensions",
    "transformMapEntry": "two-variable comprehensions",
    "existsOne": "two-variable comprehensions",
}

_ISSUE = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")


def _first_issue(expression, text):
    """(line, column, message) of the first error the engine reports."""
    for raw in text.splitlines():
        match = _ISSUE.search(raw)
        if match:
            line, column, message = int(match[1]), int(match[2]), match[3].strip()
            undeclared = _UNDECLARED.search(message)
            if undeclared and undeclared[1] in _UNSUPPORTED:
                name = undeclared[1]
                message = (
                    f"function '{name}' (Kubernetes {_UNSUPPORTED[name]} library) is not "
                    "supported by gpudash's CEL engine"
                )
            message = message.replace(" (in container '')", "")
            return line, column, message
    return None, None, text.replace("INVALID_ARGUMENT: ", "").strip()


def _lex(expression):
    """Tokens as (kind, text, start, end); kinds: ident, string, other.

    Just enough of CEL's lexer to find `device.attributes[...]` outside
    string literals and comments."""
    tokens = []
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        if c.isspace():
            i += 1
        elif expression.startswith("//", i):
            end = expression.find("\n", i)
            i = n if end < 0 else end
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (expression[j].isalnum() or expression[j] == "_"):
                j += 1
            word = expression[i:j]
            if j < n and expression[j] in "\"'" and word.lower() in ("r", "b", "rb", "br"):
                j = _string_end(expression, j, raw="r" in word.lower())
                tokens.append(("string", expression[i:j], i, j))
            else:
                tokens.append(("ident", word, i, j))
            i = j
        elif c in "\"'":
            j = _string_end(expression, i, raw=False)
            tokens.append(("string", expression[i:j], i, j))
            i = j
        else:
            tokens.append(("other", c, i, i + 1))
            i += 1
    return tokens


def _string_end(expression, i, raw):
    quote = expression[i] * 3 if expression.startswith(expression[i] * 3, i) else expression[i]
    j = i + len(quote)
    while j < len(expression):
        if not raw and expression[j] == "\\":
            j += 2
            continue
        if expression.startswith(quote, j):
            return j + len(quote)
        j += 1
    return len(expression)


def _plain_string(token):
    """The value of a simple quoted literal (no escapes, raw or triple
    quotes), else None."""
    kind, text = token[0], token[1]
    if kind != "string" or text[0] not in "\"'" or "\\" in text or text[:3] in ('"""', "'''"):
        return None
    return text[1:-1]


def _runtime_source(expression, tokens):
    """The expression the runtime environment compiles.

    * `device.attributes[X]` / `device.capacity[X]` become
      `device.attributes[?X].orValue(dyn({}))`, so an unknown domain yields
      `{}` as upstream (see module docstring).
    * `quantity("lit")` and `semver("lit")` with valid literals become message
      literals built by the engine itself: returning a message from a Python
      callback costs more than the rest of a typical selector. Invalid
      literals are left alone so they fail at runtime, as upstream.
    """
    edits = []  # (start, end, replacement)
    count = len(tokens)
    for k in range(count):
        token = tokens[k]
        if token[0] != "ident" or (k > 0 and tokens[k - 1][1] == "."):
            continue
        if token[1] == "device" and k + 3 < count:
            dot, field, bracket = tokens[k + 1 : k + 4]
            if dot[1] == "." and field[1] in ("attributes", "capacity") and bracket[1] == "[":
                if k + 4 < count and tokens[k + 4][1] == "?":
                    continue  # already optional
                close = _matching(tokens, k + 3, "[", "]", 1)
                if close is not None:
                    edits.append((bracket[3], bracket[3], "?"))
                    edits.append((tokens[close][3], tokens[close][3], ".orValue(dyn({}))"))
        elif token[1] in ("quantity", "semver") and k + 3 < count and tokens[k + 1][1] == "(":
            literal = _plain_string(tokens[k + 2])
            if literal is None:
                continue
            normalize = False
            close = k + 3
            if token[1] == "semver" and tokens[close][1] == "," and k + 5 < count:
                if tokens[k + 4][1] not in ("true", "false"):
                    continue
                normalize = tokens[k + 4][1] == "true"
                close = k + 5
            if tokens[close][1] != ")":
                continue
            try:
                if token[1] == "quantity":
                    value = _fraction_text(parse_quantity(literal))
                    replacement = f'kubernetes.Quantity{{value: "{value}"}}'
                else:
                    value = semver_message(parse_semver(literal, normalize)).value
                    replacement = f'kubernetes.Semver{{value: "{value}"}}'
            except (QuantityError, SemverError):
                continue
            edits.append((token[2], tokens[close][3], replacement))
    for start, end, text in sorted(edits, reverse=True):
        expression = expression[:start] + text + expression[end:]
    return expression


def _matching(tokens, index, opening, closing, step):
    depth = 0
    k = index
    while 0 <= k < len(tokens):
        if tokens[k][0] == "other" and tokens[k][1] == opening:
            depth += 1
        elif tokens[k][0] == "other" and tokens[k][1] == closing:
            depth -= 1
            if depth == 0:
                return k
        k += step
    return None


def _type_name(cel_type):
    try:
        return cel_type.name()
    except Exception:  # pragma: no cover - defensive, names exist for all types
        return str(cel_type)


class Selector:
    """A compiled selector; `evaluate(device)` answers whether it matches.

    `max_cost` is Kubernetes' estimated worst-case cost. A selector over the
    runtime limit (only possible when compiled with stored=True) is bounded
    per device before it runs (see dra/celcost.py)."""

    __slots__ = ("expression", "_program", "result_type", "max_cost", "_cost_ast", "_split", "_any_thread")

    def __init__(self, expression, program, result_type, max_cost=0, cost_ast=None, calls_python=True):
        self.expression = expression
        self._program = program
        self.result_type = result_type
        self.max_cost = max_cost
        self._cost_ast = cost_ast
        # Without Python functions the engine never looks the arena up, so the
        # building thread's activation serves every thread (cel-cpp activations
        # are safe to share: lazily converted values are guarded by a mutex).
        self._any_thread = not calls_python
        self._split = None  # the engine's budget error, once a device ran out of iterations

    def __repr__(self):
        return f"<Selector {self.expression!r}>"

    def evaluate(self, device):
        if device.error is not None:
            raise CelRuntimeError(self.expression, device.error)
        if self._cost_ast is not None:
            self._check_actual_cost(device)
        if self._split is not None:
            return self._evaluate_split(device, self._split)
        if self._any_thread or device._owner == get_ident():
            activation = device._activation
        else:
            activation = device.activation
        try:
            result = self._program.eval(activation)
        except Exception as exc:  # the engine raises (not returns) for its own limits
            text = str(exc)
            if _BUDGET in text:
                self._split = exc
                return self._evaluate_split(device, exc)
            if _NO_ARENA in text and activation is device._activation:
                device._forget_owner()  # a new thread got the id of the (ended) building thread
                return self.evaluate(device)
            raise CelRuntimeError(self.expression, _engine_failure(exc)) from None
        value = result.value()
        if value is True or value is False:
            return value
        if result.type() == cel.Type.ERROR:
            raise CelRuntimeError(self.expression, _runtime_message(value))
        raise CelRuntimeError(
            self.expression,
            f"CEL result of type {_type_name(result.type()).lower()} could not be converted to bool",
        )

    def _evaluate_split(self, device, budget_error):
        """Past the engine's iteration budget: evaluate part by part (celsplit)."""
        activation = device.activation

        def run(source):
            program = _split_program(source)
            if program is None:
                return ("budget", None)
            try:
                result = program.eval(activation)
            except Exception as exc:
                if _BUDGET in str(exc):
                    return ("budget", None)
                return ("error", _engine_failure(exc))
            if result.type() == cel.Type.ERROR:
                return ("error", _runtime_message(result.value()))
            return ("value", result.plain_value())

        try:
            outcome = celsplit.split_evaluate(self.expression, [], run, _lex, _message_literal)
        except celsplit.Unsplittable:
            raise CelRuntimeError(self.expression, _engine_failure(budget_error)) from None
        if isinstance(outcome, celsplit.CelErrorValue):
            raise CelRuntimeError(self.expression, outcome.message)
        return outcome

    def _check_actual_cost(self, device):
        shape = celcost.device_shape(device.driver, device.attributes, device.capacity)
        if celcost.estimate_cost(self._cost_ast, shape) > RUNTIME_COST_LIMIT:
            raise CelRuntimeError(self.expression, "operation cancelled: actual cost limit exceeded")


_MISSING_KEY = re.compile(r'Key not found in map : "?(.*?)"?$')
_NO_OVERLOAD = re.compile(r"No matching overloads found : (.*)$")
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")
# cel-cpp's fixed limits (cel-expr-python 0.1.3 offers no way to raise them).
ENGINE_MAX_ITERATIONS = 10_000
ENGINE_MAX_NESTING = 32


_BUDGET = "Iteration budget exceeded"
_NO_ARENA = "No PyCelArena found"


@lru_cache(maxsize=4096)
def _split_program(source):
    """A part of a selector split by celsplit, compiled for the runtime
    environment (None if it does not compile on its own)."""
    with _compile_lock:
        try:
            return _RUN_ENV.compile(_runtime_source(source, _lex(source)))
        except RuntimeError:
            return None


def _message_literal(message):
    """CEL source for a Quantity or Semver value (celsplit binds elements)."""
    name = getattr(getattr(message, "DESCRIPTOR", None), "full_name", "")
    if name in ("kubernetes.Quantity", "kubernetes.Semver"):
        value = message.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{name}{{value: "{value}"}}'
    raise celsplit.Unsplittable(f"cannot bind a {type(message).__name__}")


def _engine_failure(exc):
    text = _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", str(exc), count=1))
    if "Iteration budget exceeded" in text:
        return (
            f"the evaluation needs more than {ENGINE_MAX_ITERATIONS:,} comprehension iterations, the most "
            "gpudash's CEL engine runs per evaluation (Kubernetes bounds it only by the cost limit)"
        )
    return f"evaluation failed: {text}"


def _runtime_message(text):
    """Upstream-like wording for the engine's error values."""
    text = str(text)
    message = _STATUS_PREFIX.sub("", text, count=1)
    missing = _MISSING_KEY.search(message)
    if missing:
        return f"no such key: {missing[1]}"
    overload = _NO_OVERLOAD.search(message)
    if overload and overload[1].strip() == "<iter_range>":
        return "expected iterable type: a comprehension needs a list or a map"
    if overload:
        return f"no such overload: {overload[1]}"
    if message == "divide by zero":
        return "division by zero"  # cel-go's wording (the engine's CEL says "divide")
    return message


_compile_lock = threading.Lock()
_local_lock = threading.Lock()
# Kubernetes' CELSelectorExpressionMaxCost, for the estimate and at runtime.
MAX_COST = celcost.MAX_COST
RUNTIME_COST_LIMIT = celcost.MAX_COST
_NESTING = re.compile(r"recursion limit exceeded|max recursion depth", re.IGNORECASE)


def _position(expression, offset):
    """1-based (line, column) of a code point offset."""
    before = expression[: max(offset, 0)]
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def _check_regex_literals(expression, ast):
    """Upstream checks literal patterns at compile time: `matches` through
    cel.ValidateRegexLiterals, find/findAll when the program is built."""
    for node in ast.walk():
        if node.kind != "call" or node.name not in ("matches", "find", "findAll"):
            continue
        pattern = node.args[0] if node.target is not None else (node.args[1] if len(node.args) > 1 else None)
        if pattern is None or pattern.kind != "const" or not isinstance(pattern.value, str):
            continue
        _, problem = _compiled_regex(pattern.value)
        if problem is None:
            continue
        line, column = _position(expression, ast.offsets.get(pattern.id, 0))
        if node.name == "matches":
            raise CelCompileError(expression, "invalid matches argument", line, column)
        raise CelCompileError(expression, f"program instantiation failed: {problem}", line, column)


def compile_selector(expression, *, stored=False):
    """Compile a DRA selector. Raises CelCompileError (with line/column when
    the engine reports a position). Cached per expression.

    Like the API server, a selector whose estimated cost is over the limit
    is refused ("too complex, exceeds cost limit"). `stored=True` compiles
    it anyway, as the scheduler does for objects that already exist; such a
    selector then fails at runtime on devices where it would run over the
    runtime cost limit."""
    try:
        return _compile_cached(expression, bool(stored))
    except CelError:
        raise
    except TypeError:  # unhashable expression
        raise CelCompileError(
            str(expression)[:200], f"expression must be a string, not {type(expression).__name__}"
        ) from None


@lru_cache(maxsize=SELECTOR_CACHE_SIZE)
def _compile_cached(expression, stored):
    try:
        return _compile(expression, stored)
    except CelError:
        raise
    except RecursionError:
        raise CelCompileError(expression, "expression is nested too deeply") from None
    except Exception as exc:  # never let an engine failure escape as a non-CEL error
        raise CelCompileError(expression, f"internal error compiling the expression: {exc}") from None


def _compile(expression, stored):
    if not isinstance(expression, str):
        raise CelCompileError(str(expression), f"expression must be a string, not {type(expression).__name__}")
    try:
        size = len(expression.encode("utf-8"))
    except UnicodeEncodeError as exc:
        line, column = _position(expression, exc.start)
        raise CelCompileError(
            expression.encode("utf-8", "backslashreplace").decode("ascii", "replace"),
            f"expression is not valid UTF-8 text (a lone surrogate {expression[exc.start]!a})",
            line,
            column,
        ) from None
    if size > MAX_EXPRESSION_BYTES:
        raise CelCompileError(
            expression[:200],
            f"expression is {size} bytes long, more than the limit of {MAX_EXPRESSION_BYTES} bytes",
        )
    if not expression.strip():
        raise CelCompileError(expression, "expression is empty", 1, 1)
    tokens = _lex(expression)
    with _compile_lock:
        try:
            checked = _CHECK_ENV.compile(expression)
        except RuntimeError as exc:
            text = str(exc)
            if _NESTING.search(text):
                raise CelCompileError(
                    expression,
                    f"expression nests more than {ENGINE_MAX_NESTING} levels deep, the most gpudash's CEL engine "
                    "can parse (Kubernetes allows 250)",
                ) from None
            line, column, message = _first_issue(expression, text)
            raise CelCompileError(expression, message, line, column) from None
        result_type = checked.return_type()
        if result_type != cel.Type.BOOL and result_type != cel.Type.DYN:
            raise CelCompileError(
                expression,
                f"must evaluate to bool or the unknown type, not {_type_name(result_type).lower()}",
                1,
                1,
            )
        ast = celcost.CheckedAst(checked.serialize())
        _check_regex_literals(expression, ast)
        max_cost = celcost.estimate_cost(ast)
        if max_cost > MAX_COST and not stored:
            raise CelCompileError(expression, "too complex, exceeds cost limit")
        try:
            program = _RUN_ENV.compile(_runtime_source(expression, tokens))
        except RuntimeError as exc:  # pragma: no cover - the rewrite keeps valid syntax
            raise CelCompileError(expression, f"internal rewrite failed: {exc}") from None
    calls_python = any(node.kind == "call" and node.name in _PYTHON_FUNCTIONS for node in ast.walk())
    return Selector(
        expression,
        program,
        _type_name(result_type).lower(),
        max_cost,
        ast if max_cost > RUNTIME_COST_LIMIT else None,
        calls_python,
    )


# --------------------------------------------------------------------------
# Devices


class CelDevice:
    """One device as selectors see it; build with make_device() and reuse.

    `attributes` maps domain -> id -> Python value (int, bool, str, Semver),
    `capacity` maps domain -> id -> Fraction, for callers that need the
    values themselves (constraints, capacity checks). `error` is set when
    the device has an attribute upstream cannot expose to CEL; every
    evaluation then fails with it.
    """

    __slots__ = (
        "driver",
        "attributes",
        "capacity",
        "allow_multiple_allocations",
        "error",
        "_data",
        "_owner",
        "_activation",
        "_local",
    )

    def __init__(self, driver, attributes, capacity, allow_multiple_allocations, error, data):
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allow_multiple_allocations = allow_multiple_allocations
        self.error = error
        self._data = data
        # The engine's activations only work in the thread that made them:
        # Python callbacks look their arena up in a thread-local registry
        # ("No PyCelArena found for google::protobuf::Arena" elsewhere). The
        # building thread keeps its activation in a slot (the fast path);
        # every other thread gets its own, made on first use and freed with
        # the thread.
        self._owner = threading.get_ident()
        self._activation = _RUN_ENV.Activation(data)
        self._local = None

    @property
    def activation(self):
        """This thread's engine activation for the device."""
        if self._owner == threading.get_ident():
            return self._activation
        local = self._local
        if local is None:
            with _local_lock:
                if self._local is None:
                    self._local = threading.local()
            local = self._local
        try:
            return local.activation
        except AttributeError:
            activation = local.activation = _RUN_ENV.Activation(self._data)
            return activation

    def _forget_owner(self):
        """The building thread ended and its id was reused: stop the fast path."""
        self._owner = None

    def attribute(self, qualified_name):
        """Value of a (possibly unqualified) attribute name, or None."""
        domain, _, ident = qualified_name.rpartition("/")
        return self.attributes.get(domain or self.driver, {}).get(ident)

    def capacity_value(self, qualified_name):
        """Fraction for a (possibly unqualified) capacity name, or None."""
        domain, _, ident = qualified_name.rpartition("/")
        return self.capacity.get(domain or self.driver, {}).get(ident)

    def __repr__(self):
        return f"<CelDevice driver={self.driver!r}>"


def _split_name(name, driver):
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


_VALUE_KINDS = ("int", "bool", "string", "version")


def make_device(driver, attributes, capacity, allow_multiple_allocations=False, list_attributes=False):
    """Build the CEL view of one ResourceSlice device.

    `attributes` and `capacity` are the device's JSON maps
    ({"model": {"string": "x"}}, {"memory": {"value": "80Gi"}}). A bare name
    belongs to the driver's domain. An attribute without a supported value
    (or a list while list-type attributes are off) does not fail here: like
    upstream, every selector evaluated on the device fails; so does a
    capacity value that is not a quantity.
    """
    attributes = attributes or {}
    capacity = capacity or {}
    error = None
    if not _is_text(driver):
        # The engine cannot take a lone surrogate (only possible in a posted document, the API
        # server refuses them): the device fails every selector instead of the whole preview.
        driver = _printable(driver)
        error = f"driver {driver}: not valid UTF-8 text"
    python_attrs = {}
    cel_attrs = {}
    for name, attr in attributes.items():
        domain, ident = _split_name(name, driver)
        value, cel_value, problem = _attribute_value(attr, list_attributes)
        if problem is None and not (_is_text(name) and _is_text(cel_value)):
            problem = "not valid UTF-8 text"
        if problem is not None:
            if error is None:
                error = f"attribute {_printable(name)}: {problem}"
            continue
        python_attrs.setdefault(domain, {})[ident] = value
        cel_attrs.setdefault(domain, {})[ident] = cel_value

    python_caps = {}
    cel_caps = {}
    for name, entry in capacity.items():
        domain, ident = _split_name(name, driver)
        raw = entry.get("value") if isinstance(entry, dict) else entry
        if not _is_text(name):
            error = error or f"capacity {_printable(name)}: not valid UTF-8 text"
            continue
        try:
            value = parse_quantity(raw)
        except QuantityError as exc:
            # The API server would have refused this; treat it like an
            # unsupported attribute so the device fails loudly, not silently.
            if error is None:
                error = f"capacity {name}: {exc}"
            continue
        python_caps.setdefault(domain, {})[ident] = value
        cel_caps.setdefault(domain, {})[ident] = QuantityMessage(value=_fraction_text(value))

    # Missing domains are handled by the rewrite in compile_selector, so the
    # maps hold exactly the device's domains (size() and `in` as upstream).
    data = {
        "device": {
            "driver": driver,
            "attributes": cel_attrs,
            "capacity": cel_caps,
            "allowMultipleAllocations": bool(allow_multiple_allocations),
        }
    }
    device = CelDevice(driver, python_attrs, python_caps, bool(allow_multiple_allocations), error, data)
    # The engine converts the maps on an activation's first evaluation;
    # pay it here, once per device, not inside every preview.
    try:
        _warm_up_program().eval(device.activation)
    except Exception as exc:  # pragma: no cover - the values were checked above
        device.error = device.error or f"device cannot be converted for CEL: {exc}"
    return device


def _printable(text):
    """`text` with lone surrogates written as \\uXXXX escapes (safe to encode)."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _is_text(value):
    """Whether strings in `value` (nested lists included) encode as UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_text(v) for v in value)
    return True


@lru_cache(maxsize=1)
def _warm_up_program():
    return _RUN_ENV.compile('device.driver != ""')


def _attribute_value(attr, list_attributes):
    """(python value, CEL value, problem) for one attribute JSON entry."""
    if not isinstance(attr, dict):
        return None, None, "unsupported attribute value"
    for kind in _VALUE_KINDS:
        if kind in attr and attr[kind] is not None:
            raw = attr[kind]
            if kind == "version":
                try:
                    version = parse_semver(raw)
                except SemverError as exc:
                    return None, None, f"parse semantic version: {exc.reason}"
                return version, semver_message(version), None
            expected = {"int": int, "bool": bool, "string": str}[kind]
            if not isinstance(raw, expected) or (kind == "int" and isinstance(raw, bool)):
                return None, None, f"{kind} value {shown(raw)} has the wrong type"
            return raw, raw, None
    for kind in ("ints", "bools", "strings", "versions"):
        if kind in attr and attr[kind] is not None:
            if not list_attributes:
                return None, None, "unsupported attribute value"
            raw = list(attr[kind])
            if kind == "versions":
                try:
                    values = [parse_semver(v) for v in raw]
                except SemverError as exc:
                    return None, None, f"parse semantic version: {exc.reason}"
                return values, [semver_message(v) for v in values], None
            return raw, raw, None
    return None, None, "unsupported attribute value"


def format_capacity(value, like=None):
    """Display helper re-exported for callers that show capacities."""
    return format_quantity(value, like)
