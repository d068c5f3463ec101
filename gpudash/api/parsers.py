"""The API's JSON parser: DRF's, plus the two bodies it lets through as 500s.

A body nested thousands of levels deep raises RecursionError (not the ValueError DRF catches), and a
`"\\ud83d"` escape decodes to a lone surrogate that no database driver, JSON encoder or page can write.
Both are parse errors of the client's body.
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from claims.allocator.errors import InputError
from claims.allocator.shapes import check_text


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        try:
            check_text(data, "JSON body")
        except InputError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        return data
