"""The API's JSON parser: DRF's, plus a 400 for three kinds of body `json.loads` accepts or chokes on in
ways DRF does not catch.

- Nesting deeper than the interpreter's recursion limit raises RecursionError, not ValueError.
- `"\\ud800"` (a lone surrogate) is valid JSON but not Unicode: it cannot be encoded to UTF-8, so
  PostgreSQL (and any consumer) would fail on it later.
- An object that names a key twice: `json.loads` keeps the last value, another reader may keep the first,
  so which one the caller meant is refused rather than guessed (`json_object_unique`).
"""

from __future__ import annotations

import codecs
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding  # type: ignore[attr-defined]  # not in the stubs
from rest_framework.utils.json import strict_constant


class StrictJSONParser(JSONParser):
    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        # DRF's JSONParser.parse, with the hook that refuses a key given twice.
        encoding = get_encoding(parser_context or {})
        try:
            data = json.load(
                codecs.getreader(encoding)(stream),
                parse_constant=strict_constant if self.strict else None,
                object_pairs_hook=json_object_unique,
            )
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        except ValueError as exc:  # a DuplicateKey, a UnicodeDecodeError and json's own errors
            raise ParseError(f"JSON parse error - {exc}") from None
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


class DuplicateKey(ValueError):
    """A JSON object names a key more than once."""


def json_object_unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` for `json.loads`: the object, or DuplicateKey naming the keys given twice."""
    found = dict(pairs)
    if len(found) != len(pairs):
        twice = sorted(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        raise DuplicateKey(f"duplicate key{'s' if len(twice) > 1 else ''} {', '.join(map(repr, twice))}")
    return found
