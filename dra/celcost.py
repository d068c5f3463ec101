"""Kubernetes' CEL cost model for DRA selectors.

Kubernetes refuses a new selector whose *estimated* worst-case cost is over
1,000,000 ("too complex, exceeds cost limit") and stops an evaluation whose
*actual* cost passes 1,000,000 ("operation cancelled: actual cost limit
exceeded"). cel-expr-python has neither, so this module estimates the cost
the way cel-go's checker does (checker/cost.go), with the Kubernetes library
costs (apiserver/pkg/cel/library/cost.go), the sets extension's costs and the
DRA size model (dynamic-resource-allocation/cel/compile.go: driver names up
to 63 characters, up to 32 domains and 32 attributes or capacities each,
attribute values up to 64 long, `includes` over up to 48 values).

The estimator walks the engine's own checked AST (`Expression.serialize()`,
a `cel.expr.CheckedExpr` in an `Any`), read with a minimal protobuf wire
reader: no Python package ships the cel.expr descriptors, and the fields
used are few.

Approximations (written down so they can be checked):
* Only the maximum is computed (the limit compares the maximum); size
  ranges keep their minimum where a maximum depends on it.
* The runtime limit is not a step counter (the engine cannot report one).
  A selector whose estimate is within the limit cannot exceed it at runtime
  on devices the API server accepted, because the estimate is an upper
  bound of the actual cost for every device within the API's size limits;
  such selectors cost nothing extra. A selector over the estimate (one that
  was allowed to compile, e.g. a stored one) is bounded per device by the
  same estimate computed with that device's actual sizes; over the limit,
  the evaluation fails like upstream's. This bound ignores short-circuits,
  so it can refuse an evaluation upstream would finish under the limit.
* Functions cel-go and Kubernetes do not special-case cost 1, as upstream;
  string-extension functions follow the Kubernetes table where it has one.
"""

import struct

__all__ = ["MAX_COST", "UNKNOWN", "CheckedAst", "Shape", "KUBERNETES_DEVICE", "estimate_cost", "device_shape"]

MAX_COST = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
MAX_UINT64 = 2**64 - 1
UNKNOWN = (0, MAX_UINT64)

# common/cost.go
_SELECT_AND_IDENT = 1
_LIST_CREATE = 10
_MAP_CREATE = 30
_STRUCT_CREATE = 40
_STRING_TRAVERSAL = 0.1
_REGEX_LENGTH = 0.25
_INCLUDES_MAX_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice


def _add(x, y):
    return min(x + y, MAX_UINT64)


def _mul(x, y):
    return min(x * y, MAX_UINT64)


def _factor(x, f):
    if x >= MAX_UINT64:
        return MAX_UINT64
    value = x * f
    whole = int(value)
    return min(whole + (1 if value > whole else 0), MAX_UINT64)


def _union(a, b):
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


# --------------------------------------------------------------------------
# Protobuf wire reading


def _varint(buf, i):
    result = shift = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _fields(buf):
    """(field number, value) pairs; varints as int, length-delimited as bytes."""
    out = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            length, i = _varint(buf, i)
            value, i = buf[i : i + length], i + length
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:  # groups are not used by cel.expr
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, value))
    return out


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


class Expr:
    """One node of the checked AST. `kind` is const, ident, select, call,
    list, map, struct or comprehension."""

    __slots__ = (
        "id",
        "kind",
        "value",
        "name",
        "operand",
        "test_only",
        "target",
        "args",
        "entries",
        "iter_var",
        "iter_var2",
        "iter_range",
        "accu_var",
        "accu_init",
        "loop_condition",
        "loop_step",
        "result",
    )

    def __init__(self):
        self.id = 0
        self.kind = None
        self.value = None
        self.name = ""
        self.operand = self.target = None
        self.test_only = False
        self.args = []
        self.entries = []  # (key Expr or field name, value Expr)
        self.iter_var = self.iter_var2 = self.accu_var = ""
        self.iter_range = self.accu_init = self.loop_condition = self.loop_step = self.result = None

    def children(self):
        if self.kind == "select":
            return [self.operand]
        if self.kind == "call":
            return ([self.target] if self.target is not None else []) + self.args
        if self.kind == "list":
            return list(self.args)
        if self.kind in ("map", "struct"):
            return [c for key, value in self.entries for c in (key, value) if isinstance(c, Expr)]
        if self.kind == "comprehension":
            return [self.iter_range, self.accu_init, self.loop_condition, self.loop_step, self.result]
        return []


_MISSING = object()


def _constant(buf):
    for number, value in _fields(buf):
        if number == 1:
            return None
        if number == 2:
            return bool(value)
        if number in (3, 4):
            return _signed(value) if number == 3 else value
        if number == 5:
            return struct.unpack("<d", value)[0]
        if number == 6:
            return value.decode("utf-8", "surrogatepass")
        if number == 7:
            return bytes(value)
    return _MISSING  # durations/timestamps: not produced by the parser


def _expr(buf):
    node = Expr()
    for number, value in _fields(buf):
        if number == 2:
            node.id = _signed(value)
        elif number == 3:
            node.kind, node.value = "const", _constant(value)
        elif number == 4:
            node.kind = "ident"
            node.name = next((v.decode() for n, v in _fields(value) if n == 1), "")
        elif number == 5:
            node.kind = "select"
            for n, v in _fields(value):
                if n == 1:
                    node.operand = _expr(v)
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.test_only = bool(v)
        elif number == 6:
            node.kind = "call"
            for n, v in _fields(value):
                if n == 1:
                    node.target = _expr(v)
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.args.append(_expr(v))
        elif number == 7:
            node.kind = "list"
            node.args = [_expr(v) for n, v in _fields(value) if n == 1]
        elif number == 8:
            node.kind = "struct"
            for n, v in _fields(value):
                if n == 1:
                    node.name = v.decode()
                elif n == 2:
                    key = entry = None
                    for en, ev in _fields(v):
                        if en == 2:
                            key = ev.decode()
                        elif en == 3:
                            key = _expr(ev)
                        elif en == 4:
                            entry = _expr(ev)
                    node.entries.append((key, entry))
            if not node.name:
                node.kind = "map"
        elif number == 9:
            node.kind = "comprehension"
            for n, v in _fields(value):
                if n == 1:
                    node.iter_var = v.decode()
                elif n == 2:
                    node.iter_range = _expr(v)
                elif n == 3:
                    node.accu_var = v.decode()
                elif n == 4:
                    node.accu_init = _expr(v)
                elif n == 5:
                    node.loop_condition = _expr(v)
                elif n == 6:
                    node.loop_step = _expr(v)
                elif n == 7:
                    node.result = _expr(v)
                elif n == 8:
                    node.iter_var2 = v.decode()
    return node


# Types as small tuples: ("prim", "string"), ("list", elem), ("map", key, value),
# ("msg", name), ("dyn",), ("wk", "duration"), ("opaque", name, params)...
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "timestamp", 3: "duration"}


def _type(buf):
    for number, value in _fields(buf):
        if number == 1:
            return ("dyn",)
        if number == 2:
            return ("null",)
        if number == 3:
            return ("prim", _PRIMITIVES.get(value, "?"))
        if number == 4:
            return ("wrapper", _PRIMITIVES.get(value, "?"))
        if number == 5:
            return ("wk", _WELL_KNOWN.get(value, "?"))
        if number == 6:
            elem = next((_type(v) for n, v in _fields(value) if n == 1), ("dyn",))
            return ("list", elem)
        if number == 7:
            parts = {n: _type(v) for n, v in _fields(value)}
            return ("map", parts.get(1, ("dyn",)), parts.get(2, ("dyn",)))
        if number == 8:
            return ("function",)
        if number == 9:
            return ("msg", value.decode())
        if number == 10:
            return ("param", value.decode())
        if number == 11:
            return ("type",)
        if number == 12:
            return ("error",)
        if number == 14:
            name, params = "", []
            for n, v in _fields(value):
                if n == 1:
                    name = v.decode()
                elif n == 2:
                    params.append(_type(v))
            return ("opaque", name, tuple(params))
    return ("dyn",)


def _map_entries(buf):
    key = value = None
    for n, v in _fields(buf):
        if n == 1:
            key = _signed(v)
        elif n == 2:
            value = v
    return key, value


class CheckedAst:
    """The engine's checked AST: root expression, types and overloads per id,
    source offsets per id."""

    def __init__(self, serialized):
        checked = next((v for n, v in _fields(serialized) if n == 2), b"")  # Any.value
        self.types, self.overloads, self.offsets = {}, {}, {}
        self.root = Expr()
        for number, value in _fields(checked):
            if number == 2:
                key, ref = _map_entries(value)
                self.overloads[key] = [v.decode() for n, v in _fields(ref or b"") if n == 3]
            elif number == 3:
                key, typ = _map_entries(value)
                self.types[key] = _type(typ or b"")
            elif number == 4:
                self.root = _expr(value)
            elif number == 5:
                for n, v in _fields(value):
                    if n == 4:
                        key, offset = _map_entries(v)
                        self.offsets[key] = offset if isinstance(offset, int) else 0

    def walk(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            yield node
            stack.extend(node.children())


# --------------------------------------------------------------------------
# Size model


class Shape:
    """The most elements (characters for strings) a value at a path holds,
    and the shapes of its keys, values and fields (DeclType.MaxElements)."""

    __slots__ = ("max", "key", "elem", "fields", "any_name")

    def __init__(self, maximum, key=None, elem=None, fields=None, any_name=False):
        self.max = maximum
        self.key = key
        self.elem = elem
        self.fields = fields or {}
        # Upstream: a field name on an attribute map is any attribute.
        self.any_name = any_name


def _kubernetes_device():
    attribute = Shape(64)  # DeviceAttributeMaxValueLength (>= 48 list values)
    inner_attributes = Shape(32, key=Shape(32), elem=attribute, any_name=True)
    quantity = Shape(0)
    inner_capacity = Shape(32, key=Shape(32), elem=quantity)
    return Shape(
        0,
        fields={
            "driver": Shape(63),
            "attributes": Shape(32, key=Shape(63), elem=inner_attributes),
            "capacity": Shape(32, key=Shape(63), elem=inner_capacity),
            "allowMultipleAllocations": Shape(1),
        },
    )


KUBERNETES_DEVICE = _kubernetes_device()


def _value_size(value):
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        return len(value)
    return 1


def device_shape(driver, attributes, capacity):
    """The shape of one device's actual values (for the runtime bound)."""

    def nested(domains, value_size):
        inner_max = max((len(ids) for ids in domains.values()), default=0)
        id_max = max((len(i) for ids in domains.values() for i in ids), default=0)
        value_max = max((value_size(v) for ids in domains.values() for v in ids.values()), default=0)
        inner = Shape(inner_max, key=Shape(id_max), elem=Shape(value_max), any_name=True)
        return Shape(len(domains), key=Shape(max((len(d) for d in domains), default=0)), elem=inner)

    return Shape(
        0,
        fields={
            "driver": Shape(len(driver or "")),
            "attributes": nested(attributes, _value_size),
            "capacity": nested(capacity, lambda v: 0),
            "allowMultipleAllocations": Shape(1),
        },
    )


def _path_size(root, path):
    if not path or path[0] != "device":
        return None
    node = root
    for name in path[1:]:
        if name in ("@items", "@values"):
            node = node.elem
        elif name == "@keys":
            node = node.key
        elif name in node.fields:
            node = node.fields[name]
        elif node.any_name and node.elem is not None:
            node = node.elem
        else:
            return None
        if node is None:
            return None
    return (0, node.max)


# --------------------------------------------------------------------------
# The estimator


_SCALAR = {
    ("prim", "bool"),
    ("prim", "int"),
    ("prim", "uint"),
    ("prim", "double"),
    ("wk", "duration"),
    ("wk", "timestamp"),
}
_STRING_ORDER = {"_<_", "_<=_", "_>_", "_>=_"}
_FIXED_ONE = {
    "sign",
    "asInteger",
    "isInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "add",
    "sub",
    "major",
    "minor",
    "patch",
}
_ORDERED_SCAN = {"isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"}
_SETS = {"sets.contains": 1, "sets.intersects": 1, "sets.equivalent": 2}
_KUBERNETES_STRUCTS = {"kubernetes.Quantity", "kubernetes.Semver"}


class _Entry:
    __slots__ = ("container", "key", "val")

    def __init__(self, container, key, val):
        self.container, self.key, self.val = container, key, val


class _Estimator:
    def __init__(self, ast, shape):
        self.ast = ast
        self.shape = shape
        self.paths = {}
        self.sizes = {}
        self.entries = {}
        self.locals = []  # (name, path, size, entry)

    # sizes and paths ------------------------------------------------------

    def _local(self, name):
        for var in reversed(self.locals):
            if var[0] == name:
                return var
        return None

    def path(self, e):
        if e.kind == "ident":
            var = self._local(e.name)
            if var is not None:
                return var[1]
        return self.paths.get(e.id, ())

    def type(self, e):
        typ = self.ast.types.get(e.id, ("dyn",))
        if typ == ("dyn",):
            # The checking environment types capacity values as dyn (a
            # protobuf Struct); upstream declares them as Quantity.
            path = self.path(e)
            if len(path) == 4 and path[:2] == ("device", "capacity"):
                return ("msg", "kubernetes.Quantity")
        return typ

    def size(self, e):
        """computeSize: None when unknown."""
        if e.id in self.sizes:
            return self.sizes[e.id]
        if e.kind == "const":
            if isinstance(e.value, (str, bytes)):
                return (len(e.value), len(e.value))
            if e.value is not _MISSING:
                return (1, 1)
        if e.kind == "list":
            return (len(e.args), len(e.args))
        if e.kind == "map":
            return (len(e.entries), len(e.entries))
        estimate = _path_size(self.shape, self.path(e))
        if estimate is not None:
            self.sizes[e.id] = estimate
            return estimate
        typ = self.type(e)
        if typ in _SCALAR or (typ[0] == "opaque" and typ[1] == "optional_type" and typ[2] and typ[2][0] in _SCALAR):
            return (1, 1)
        if e.kind == "ident":
            var = self._local(e.name)
            if var is not None and var[2] is not None:
                return var[2]
        return None

    def size_or_unknown(self, e):
        size = self.size(e)
        return UNKNOWN if size is None else size

    def entry(self, e):
        if e.id in self.entries:
            return self.entries[e.id]
        if e.kind == "ident":
            var = self._local(e.name)
            if var is not None:
                return var[3]
        return None

    # costs ----------------------------------------------------------------

    def cost(self, e):
        if e is None:
            return 0
        kind = e.kind
        if kind == "const":
            return 0
        if kind == "ident":
            var = self._local(e.name)
            self.paths[e.id] = var[1] if var is not None else (e.name,)
            return _SELECT_AND_IDENT
        if kind == "select":
            if e.test_only:  # PresenceTestHasCost(false)
                return self.cost(e.operand)
            total = self.cost(e.operand)
            if self.type(e.operand)[0] in ("map", "msg", "param"):
                total += _SELECT_AND_IDENT
            self.paths[e.id] = self.path(e.operand) + (e.name,)
            return total
        if kind == "call":
            return self.call(e)
        if kind == "list":
            total = 0
            item = (0, 0) if not e.args else None
            for element in e.args:
                total = _add(total, self.cost(element))
                size = self.size_or_unknown(element)
                item = size if item is None else _union(item, size)
            self.entries[e.id] = _Entry("list", (1, 1), item)
            return _add(total, _LIST_CREATE)
        if kind == "map":
            total = 0
            keys = values = (0, 0) if not e.entries else None
            for key, value in e.entries:
                total = _add(_add(total, self.cost(key)), self.cost(value))
                ks, vs = self.size_or_unknown(key), self.size_or_unknown(value)
                keys = ks if keys is None else _union(keys, ks)
                values = vs if values is None else _union(values, vs)
            self.entries[e.id] = _Entry("map", keys, values)
            return _add(total, _MAP_CREATE)
        if kind == "struct":
            total = _STRUCT_CREATE
            for _, value in e.entries:
                total = _add(total, self.cost(value))
            return total
        if kind == "comprehension":
            if self._is_bind(e):
                return self.bind(e)
            return self.comprehension(e)
        return 0

    def _push(self, name, e):
        self.locals.append((name, self.path(e), self.size(e), self.entry(e)))

    @staticmethod
    def _is_bind(e):
        r, c = e.iter_range, e.loop_condition
        return r.kind == "list" and not r.args and c.kind == "const" and c.value is False and e.accu_var != "@result"

    def bind(self, e):
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self._push(e.accu_var, e.accu_init)
        total = _add(total, self.cost(e.result))
        self.locals.pop()
        self._copy_sizes(e, e.result)
        return total

    def _copy_sizes(self, dst, src):
        size, entry = self.size(src), self.entry(src)
        if size is not None:
            self.sizes[dst.id] = size
        if entry is not None:
            self.entries[dst.id] = entry

    def comprehension(self, e):
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self._push(e.accu_var, e.accu_init)
        entry = self.entry(e.iter_range)
        container = entry.container if entry is not None else None
        if container is None:
            container = self.type(e.iter_range)[0]
        range_path = self.path(e.iter_range)
        if e.iter_var2:
            self.locals.append((e.iter_var, range_path + ("@keys",), entry.key if entry else None, None))
            self.locals.append((e.iter_var2, range_path + ("@values",), entry.val if entry else None, None))
        elif container == "list":
            self.locals.append((e.iter_var, range_path + ("@items",), entry.val if entry else None, None))
        else:
            self.locals.append((e.iter_var, range_path + ("@keys",), entry.key if entry else None, None))
        loop = _add(self.cost(e.loop_condition), self.cost(e.loop_step))
        self.locals.pop()
        if e.iter_var2:
            self.locals.pop()
        total = _add(total, self.cost(e.result))
        self.locals.pop()
        count = self.size_or_unknown(e.iter_range)
        total = _add(total, _mul(count[1], loop))
        init = e.accu_init
        if init.kind == "const":
            size = self.size(init)
            if size is not None:
                self.sizes[e.id] = size
        elif init.kind in ("list", "map"):
            self.sizes[e.id] = count
            step_entry = self.entry(e.loop_step)
            if step_entry is not None:
                self.entries[e.id] = step_entry
        return total

    def call(self, e):
        name, args = e.name, e.args
        if name == "dyn" and len(args) == 1:
            total = _add(self.cost(args[0]), 1)
            self._copy_sizes(e, args[0])
            self.paths[e.id] = self.path(args[0])
            return total
        arg_costs = [self.cost(a) for a in args]
        overloads = self.ast.overloads.get(e.id, [])
        if not overloads:
            return 0
        total = 0
        if e.target is not None:
            total = self.cost(e.target)
        fn_cost, result_size = self.function_cost(e, name, overloads, arg_costs)
        if name == "_[_]" and args:
            entry = self.entry(args[0])
            if entry is not None:
                result_size = entry.val
            suffix = "@items" if "index_list" in overloads else "@values"
            self.paths[e.id] = self.path(args[0]) + (suffix,)
        if result_size is None:
            result_size = self.size(e)
        if result_size is not None:
            self.sizes[e.id] = result_size
        return _add(total, fn_cost)

    def function_cost(self, e, name, overloads, arg_costs):
        """(cost including the arguments, result size or None)."""
        args, target = e.args, e.target
        arg_sum = sum(arg_costs)
        # DRA's includes: linear in the longest list attribute.
        if name == "includes" and target is not None:
            return _add(_INCLUDES_MAX_VALUES, arg_sum), None
        # Kubernetes libraries (library/cost.go).
        if name in _SETS and len(args) == 2:
            a, b = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            return _add(_add(_factor(_mul(a[1], b[1]), _SETS[name]), 1), arg_sum), None
        if name in _ORDERED_SCAN and target is not None:
            target_size = self.size_or_unknown(target)
            target_type = self.type(target)
            if target_type[0] == "list":
                element = 1
                if target_type[1] in (("prim", "string"), ("prim", "bytes")):
                    elem_size = self._list_element_size(target)
                    element = _add(1, _factor(elem_size[1], _STRING_TRAVERSAL))
                return _add(_mul(target_size[1], element), arg_sum), None
            return _add(_factor(target_size[1], _STRING_TRAVERSAL), arg_sum), None
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            size = self.size_or_unknown(target)
            return _add(_factor(size[1], _STRING_TRAVERSAL), arg_sum), size
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args, arg_sum)
        if name == "split" and target is not None:
            size = self.size_or_unknown(target)
            most = size[1]
            if len(args) > 1 and args[1].kind == "const" and isinstance(args[1].value, int):
                most = max(args[1].value, 0)
            return _add(_factor(size[1], 2 * _STRING_TRAVERSAL), arg_sum), (0, most)
        if name == "join" and target is not None:
            lst = self.size_or_unknown(target)
            elem = self._list_element_size(target)
            size = (_mul(lst[0], elem[0]), _mul(lst[1], elem[1]))
            if args:
                sep = self.size_or_unknown(args[0])
                size = (
                    _add(size[0], _mul(sep[0], max(lst[0] - 1, 0))),
                    _add(size[1], _mul(sep[1], max(lst[1] - 1, 0))),
                )
            return _add(_factor(size[1], _STRING_TRAVERSAL), arg_sum), size
        if name in ("find", "findAll") and target is not None and args:
            size = self.size_or_unknown(target)
            text = _factor(_add(size[1], 1), _STRING_TRAVERSAL)
            regex = _factor(self.size_or_unknown(args[0])[1], _REGEX_LENGTH)
            return _add(_mul(text, regex), arg_sum), (0, size[1])
        if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return _add(_factor(self.size_or_unknown(args[0])[1], _STRING_TRAVERSAL), arg_sum), None
        if name in _FIXED_ONE:
            return _add(1, arg_sum), None
        if name == "_==_" and len(args) == 2:
            lhs, rhs = self.type(args[0]), self.type(args[1])
            if lhs == rhs and lhs[0] == "msg" and lhs[1] in _KUBERNETES_STRUCTS:
                return _add(1, arg_sum), None
        # cel-go's own table (checker/cost.go functionCost).
        if name in ("startsWith", "endsWith") and len(args) == 1:
            return _add(_factor(self.size_or_unknown(args[0])[1], _STRING_TRAVERSAL), arg_sum), None
        if name == "@in" and len(args) == 2 and "in_list" in overloads:
            return _add(self.size_or_unknown(args[1])[1], arg_sum), None
        if name == "matches" and len(args) == (1 if target is not None else 2):
            text_node, regex_node = (target, args[0]) if target is not None else (args[0], args[1])
            text = _factor(_add(self.size_or_unknown(text_node)[1], 1), _STRING_TRAVERSAL)
            regex = _factor(self.size_or_unknown(regex_node)[1], _REGEX_LENGTH)
            return _add(_mul(text, regex), arg_sum), None
        if name == "contains" and target is not None and len(args) == 1:
            text = _factor(self.size_or_unknown(target)[1], _STRING_TRAVERSAL)
            sub = _factor(self.size_or_unknown(args[0])[1], _STRING_TRAVERSAL)
            return _add(_mul(text, sub), arg_sum), None
        if name in ("_&&_", "_||_"):
            return arg_sum, None
        if name == "_?_:_" and len(args) == 3:
            size = _union(self.size_or_unknown(args[1]), self.size_or_unknown(args[2]))
            a, b = self.entry(args[1]), self.entry(args[2])
            if a is not None and b is not None:
                self.entries[e.id] = _Entry(a.container, _union(a.key, b.key), _union(a.val, b.val))
            return _add(arg_costs[0], max(arg_costs[1], arg_costs[2])), size
        if name == "_+_" and len(args) == 2 and any(o in ("add_string", "add_bytes", "add_list") for o in overloads):
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            size = (_add(lhs[0], rhs[0]), _add(lhs[1], rhs[1]))
            a, b = self.entry(args[0]), self.entry(args[1])
            if a is not None and b is not None:
                self.entries[e.id] = _Entry(a.container, _union(a.key, b.key), _union(a.val, b.val))
            if "add_list" in overloads:
                return _add(1, arg_sum), size
            return _add(_factor(size[1], _STRING_TRAVERSAL), arg_sum), size
        if name in ("_==_", "_!=_") or (
            name in _STRING_ORDER and any(o.endswith(("_string", "_bytes")) for o in overloads)
        ):
            smallest = min(self.size_or_unknown(args[0])[1], self.size_or_unknown(args[1])[1])
            return _add(_factor(smallest, _STRING_TRAVERSAL), arg_sum), None
        return _add(1, arg_sum), None

    def _list_element_size(self, target):
        entry = self.entry(target)
        if entry is not None and entry.val is not None:
            return entry.val
        size = _path_size(self.shape, self.path(target) + ("@items",))
        return UNKNOWN if size is None else size

    def _replace(self, target, args, arg_sum):
        size = self.size_or_unknown(target)
        old = self.size_or_unknown(args[0])
        new = self.size_or_unknown(args[1])
        if old[0] == 0:
            count_max, kept_max = (size[1] + 1 if size[1] < MAX_UINT64 else size[1]), size[1]
        elif new[1] <= old[0]:
            count_max, kept_max = 0, size[1]
        else:
            count_max, kept_max = -(-size[1] // old[0]), 0
        if old[1] == 0:
            count_min, kept_min = (size[0] + 1 if size[0] < MAX_UINT64 else size[0]), size[0]
        elif old[1] <= new[0]:
            count_min, kept_min = 0, size[0]
        else:
            count_min, kept_min = -(-size[0] // old[1]), 0
        result = (_add(_mul(count_min, new[0]), kept_min), _add(_mul(count_max, new[1]), kept_max))
        return _add(_factor(size[1], 2 * _STRING_TRAVERSAL), arg_sum), result


def estimate_cost(ast, shape=KUBERNETES_DEVICE):
    """Worst-case cost of a checked selector (cel-go's CostEstimate.Max)."""
    return _Estimator(ast, shape).cost(ast.root)
