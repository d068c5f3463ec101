"""Small helpers shared by the store and the patch code."""


def clone(value):
    """Deep copy of JSON-like data, without copy.deepcopy's generic (and much slower) machinery."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value
