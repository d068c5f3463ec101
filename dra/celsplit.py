"""Evaluating selectors that need more comprehension iterations than the engine allows.

cel-expr-python (cel-cpp) stops any evaluation after 10,000 comprehension
iterations ("Iteration budget exceeded") and offers no way to raise that.
Kubernetes bounds selectors only by cost, so e.g. `L.all(x, M.all(y, ...))`
over two 100-element lists (10,100 iterations) is valid upstream.

When the engine refuses, the selector is split at its top level and each
part gets its own engine evaluation (and so its own budget):
* `a || b`, `a && b` and `!a`, combined with CEL's commutative error rules
  (`false && error` is false, `true || error` is true);
* `R.all(v, P)`, `R.exists(v, P)`, `R.exists_one(v, P)`: R is evaluated once,
  then P once per element with `v` bound to that element (`cel.bind` over a
  literal of its value), combined like the macro.
Parts that still need too many iterations are split again. A part that
cannot be split (say, a `map()` feeding `size()`) keeps the engine's error.
"""

import json

__all__ = ["split_evaluate", "Unsplittable", "CelErrorValue"]


class Unsplittable(Exception):
    """The part needs more iterations than the engine allows and cannot be split."""


class CelErrorValue:
    """A CEL error value met in one part (absorbed by && / || where CEL does)."""

    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message


_OPERATOR_CHARS = set("=!<>+-*/%?:&|")
_MACROS = {"all", "exists", "exists_one"}


def _depth_zero(tokens):
    depth = 0
    for index, token in enumerate(tokens):
        kind, text = token[0], token[1]
        if kind == "other" and text in "([{":
            depth += 1
        elif kind == "other" and text in ")]}":
            depth -= 1
        elif depth == 0:
            yield index, token


def _strip_parens(text, tokens, lex):
    while len(tokens) >= 2 and tokens[0][1] == "(" and tokens[-1][1] == ")":
        depth = 0
        for index, token in enumerate(tokens):
            if token[0] == "other" and token[1] in "([{":
                depth += 1
            elif token[0] == "other" and token[1] in ")]}":
                depth -= 1
                if depth == 0 and index != len(tokens) - 1:
                    return text, tokens
        text = text[tokens[0][3] : tokens[-1][2]]
        tokens = lex(text)
    return text, tokens


def _split_binary(text, tokens, char):
    """Parts of `text` around top-level `&&` or `||` (char is "&" or "|")."""
    cuts = [
        index
        for index, token in _depth_zero(tokens)
        if token[1] == char
        and index + 1 < len(tokens)
        and tokens[index + 1][1] == char
        and tokens[index + 1][2] == token[3]
    ]
    if not cuts:
        return None
    parts, start = [], 0
    for index in cuts:
        parts.append(text[start : tokens[index][2]])
        start = tokens[index + 1][3]
    parts.append(text[start:])
    return parts


def _macro(text, tokens):
    """(range text, macro, variable, body text) for a top-level `R.m(v, P)`."""
    if len(tokens) < 7 or tokens[-1][1] != ")":
        return None
    depth, open_index = 0, None
    for index in range(len(tokens) - 1, -1, -1):
        token = tokens[index]
        if token[0] == "other" and token[1] in ")]}":
            depth += 1
        elif token[0] == "other" and token[1] in "([{":
            depth -= 1
            if depth == 0:
                open_index = index
                break
    if open_index is None or open_index < 3:
        return None
    name, dot = tokens[open_index - 1], tokens[open_index - 2]
    var, comma = tokens[open_index + 1], tokens[open_index + 2]
    if name[0] != "ident" or name[1] not in _MACROS or dot[1] != "." or var[0] != "ident" or comma[1] != ",":
        return None
    range_tokens = tokens[: open_index - 2]
    for _, token in _depth_zero(range_tokens):
        if (token[0] == "other" and token[1] in _OPERATOR_CHARS) or (token[0] == "ident" and token[1] == "in"):
            return None  # the macro applies to only part of what precedes it
    return text[: dot[2]], name[1], var[1], text[tokens[open_index + 3][2] : tokens[-1][2]]


def _literal(value, message_literal):
    """CEL source for a plain value the engine returned."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else f'double("{value}")'
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bytes):
        return 'b"' + "".join(f"\\x{b:02x}" for b in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v, message_literal) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{_literal(k, message_literal)}: {_literal(v, message_literal)}" for k, v in value.items())
            + "}"
        )
    return message_literal(value)


def split_evaluate(text, bindings, run, lex, message_literal):
    """Evaluate `text` with `bindings` [(name, literal)], splitting where the
    engine runs out of iterations. `run(source)` evaluates one CEL source and
    returns ("value", plain value), ("error", message) or ("budget", None).
    Returns True/False, or raises Unsplittable / returns a CelErrorValue."""
    return _bool(text, bindings, run, lex, message_literal)


def _wrap(text, bindings):
    source = f"({text})"
    for name, literal in reversed(bindings):
        source = f"cel.bind({name}, {literal}, {source})"
    return source


def _value(text, bindings, run):
    kind, value = run(_wrap(text, bindings))
    if kind == "budget":
        raise Unsplittable(text)
    if kind == "error":
        return CelErrorValue(value)
    return value


def _bool(text, bindings, run, lex, message_literal):
    kind, value = run(_wrap(text, bindings))
    if kind == "error":
        return CelErrorValue(value)
    if kind == "value":
        if value is True or value is False:
            return value
        return CelErrorValue(f"no such overload: expected a bool, got {type(value).__name__}")
    tokens = lex(text)
    text, tokens = _strip_parens(text, tokens, lex)
    parts = _split_binary(text, tokens, "|")
    if parts:
        return _combine([_bool(p, bindings, run, lex, message_literal) for p in parts], short=True)
    parts = _split_binary(text, tokens, "&")
    if parts:
        return _combine([_bool(p, bindings, run, lex, message_literal) for p in parts], short=False)
    if tokens and tokens[0][1] == "!" and not (len(tokens) > 1 and tokens[1][1] == "="):
        inner = _bool(text[tokens[0][3] :], bindings, run, lex, message_literal)
        return inner if isinstance(inner, CelErrorValue) else not inner
    macro = _macro(text, tokens)
    if macro is None:
        raise Unsplittable(text)
    range_text, name, var, body = macro
    items = _value(range_text, bindings, run)
    if isinstance(items, CelErrorValue):
        return items
    if isinstance(items, dict):
        items = list(items)
    if not isinstance(items, (list, tuple)):
        return CelErrorValue("expected iterable type: a comprehension needs a list or a map")
    results = []
    for item in items:
        outcome = _bool(body, bindings + [(var, _literal(item, message_literal))], run, lex, message_literal)
        if name == "all" and outcome is False:
            return False
        if name == "exists" and outcome is True:
            return True
        results.append(outcome)
    errors = [r for r in results if isinstance(r, CelErrorValue)]
    if errors:
        return errors[0]
    if name == "exists_one":
        return sum(1 for r in results if r is True) == 1
    return name == "all"


def _combine(outcomes, short):
    """CEL's || (short=True) or && over evaluated parts."""
    if any(o is short for o in outcomes):
        return short
    errors = [o for o in outcomes if isinstance(o, CelErrorValue)]
    if errors:
        return errors[0]
    return not short
