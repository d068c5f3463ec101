"""JSON in and out of the sync's hot paths: orjson when installed (several times faster on the large
list bodies and the raw columns), the standard library otherwise or for what orjson refuses."""

import json

try:
    import orjson
except ImportError:  # pragma: no cover - optional speed-up
    orjson = None


def loads(data):
    """Parse bytes or str; raises ValueError on bad JSON."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # e.g. integers beyond 64 bits: let the standard parser decide
    return json.loads(data)


def dumps(obj):
    """Serialise to bytes (psycopg accepts bytes from a Jsonb dumps function)."""
    if orjson is not None:
        try:
            return orjson.dumps(obj)
        except TypeError:
            pass  # integers beyond 64 bits, non-string keys
    return json.dumps(obj).encode()
