"""Bounds on what people send that gpudash stores or echoes back: long strings cut, long lists and
objects summarised with their counts, deep nesting stopped. Used at the audit write (an operator must
not be able to grow the audit log at will) and by the websocket's error frames."""

TEXT_MAX = 1000  # characters of one string
ITEMS_MAX = 100  # items of a list or keys of an object kept in full; past it only the first KEEP
KEEP = 20
DEPTH_MAX = 32  # far deeper than any Kubernetes object gpudash stores


def cut(text, limit=TEXT_MAX):
    """`text` when short enough, else its start and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters in all)"


def shown(value, limit=40):
    """A value for an error message: its repr, cut (never the whole of what a client sent)."""
    if isinstance(value, str) and len(value) > limit:
        value = value[: limit + 1]  # repr of a short prefix: a huge string is never rendered whole
    text = (
        repr(value)
        if not isinstance(value, (list, dict)) or len(value) <= 5
        else f"a {type(value).__name__} of {len(value):,} items"
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded(value, depth=0):
    """`value` (JSON) no larger than the limits above; what was left out is counted in its place."""
    if isinstance(value, str):
        return cut(value)
    if depth >= DEPTH_MAX and isinstance(value, (list, dict)):
        return f"… (nested deeper than {DEPTH_MAX} levels)"
    if isinstance(value, list):
        if len(value) <= ITEMS_MAX:
            return [bounded(v, depth + 1) for v in value]
        return [bounded(v, depth + 1) for v in value[:KEEP]] + [
            f"… {len(value) - KEEP:,} more items ({len(value):,} in all)"
        ]
    if isinstance(value, dict):
        items = list(value.items())
        out = {
            cut(str(k), 253): bounded(v, depth + 1) for k, v in items[: KEEP if len(items) > ITEMS_MAX else ITEMS_MAX]
        }
        if len(items) > ITEMS_MAX:
            out["…"] = f"{len(items) - KEEP:,} more keys ({len(items):,} in all)"
        return out
    return value
