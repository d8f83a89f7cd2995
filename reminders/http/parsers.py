"""The API's JSON parser: DRF's, plus a 400 instead of a 500 for two kinds of body `json.loads` accepts
or chokes on in ways DRF does not catch.

- Nesting deeper than the interpreter's recursion limit raises RecursionError, not ValueError.
- `"\\ud800"` (a lone surrogate) is valid JSON but not Unicode: it cannot be encoded to UTF-8, so
  PostgreSQL (and any consumer) would fail on it later.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        if not valid_unicode(data):
            raise ParseError("JSON parse error - a string is not valid Unicode (lone surrogate)")
        return data


def json_strings(data: Any) -> Iterator[str]:
    """Every string and key in a parsed JSON value; iterative, since `data` may be nested ~1,000 deep."""
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            yield item


def valid_unicode(data: Any) -> bool:
    """Every string and key encodes to UTF-8 (a lone surrogate does not)."""
    for text in json_strings(data):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True
