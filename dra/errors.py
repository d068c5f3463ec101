"""Errors of the allocation engine. Every one carries a message a person can act on."""


class AllocatorError(Exception):
    """Base class."""


class InputError(AllocatorError):
    """The claim/pod documents or the snapshot cannot be used (malformed YAML, unknown kind, ...)."""


class SnapshotError(InputError):
    """A cluster dump that lacks what a preview needs."""


class AllocationError(AllocatorError):
    """A hard error of the allocator: the scheduler would fail the scheduling attempt (status Error)."""


SHOWN_WIDTH = 40  # characters of a user's value a message shows


class _Punctuation(str):
    """Brackets and separators of a rendering, told apart from the user's own strings."""


_END = object()


def shown(value, width=SHOWN_WIDTH, quote=True):
    """repr(value) cut to `width` characters (then "..."), for messages about what a user handed in;
    with quote=False a string is shown as itself (a name, a key in a path), cut the same way.

    Built piece by piece and stopped once past `width`: a YAML value can share one list a billion
    times through aliases, and repr() of it would never finish. Iterative, so depth costs nothing.
    """
    if not quote and isinstance(value, str):
        return value if len(value) <= width else value[:width] + "..."
    pieces, used = [], 0
    for piece in _repr_pieces(value, width):
        pieces.append(piece)
        used += len(piece)
        if used > width:
            return "".join(pieces)[:width] + "..."
    return "".join(pieces)


def _repr_pieces(value, width):
    stack = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif type(item) is _Punctuation:
            yield item
        elif isinstance(item, dict):
            stack.append(_entries(item))
        elif isinstance(item, list):
            stack.append(_items(item))
        elif isinstance(item, (str, bytes)):
            yield repr(item[: width + 1])  # one past the width: the cut then shows
        else:
            yield repr(item)


def _entries(mapping):
    yield _Punctuation("{")
    for i, (key, value) in enumerate(mapping.items()):
        if i:
            yield _Punctuation(", ")
        yield key
        yield _Punctuation(": ")
        yield value
    yield _Punctuation("}")


def _items(sequence):
    yield _Punctuation("[")
    for i, item in enumerate(sequence):
        if i:
            yield _Punctuation(", ")
        yield item
    yield _Punctuation("]")
