"""The API's JSON parser: DRF's, plus the two bodies it lets through as 500s.

A body nested thousands of levels deep raises RecursionError (not the ValueError DRF catches), and a
`"\\ud83d"` escape decodes to a lone surrogate that no database driver, JSON encoder or page can write.
Both are parse errors of the client's body, and so is a NUL character, which PostgreSQL text cannot hold.
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from dra.errors import InputError
from dra.shapes import check_text


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
        if _holds_nul(data):  # PostgreSQL text cannot hold NUL: every lookup with one would fail
            raise ParseError("JSON parse error - a string contains a NUL character (\\u0000)")
        return data


def _holds_nul(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
