"""The API's JSON renderer: DRF's output, written by orjson.

A fleet-wide preview answers one entry per node, a body of megabytes, which the standard library's
encoder took about as long to write as the preview itself to compute. orjson writes the same JSON in
a fraction of that. What orjson leaves to others goes through DRF's own encoder (`default`),
so the output matches DRF's JSONRenderer: datetimes in DRF's format, lazy translations as text,
Decimals as numbers. Pretty-printed output (`Accept: application/json; indent=4`, the browsable
API) and anything orjson cannot write at all (an integer beyond 64 bits) are left to DRF's renderer.
One difference remains: DRF refuses a float NaN, orjson writes it as null; no gpudash answer holds one.
"""

import orjson
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

_drf_default = JSONEncoder().default
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
# DRF escapes these two so that the output is also valid JavaScript; orjson writes them as they are.
_LINE_SEPARATOR, _PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if (
            data is None
            or self.get_indent(accepted_media_type, renderer_context or {}) is not None
            or not self.compact
            or self.ensure_ascii
        ):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(data, default=_drf_default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if _LINE_SEPARATOR in out or _PARAGRAPH_SEPARATOR in out:
            out = out.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
        return out
