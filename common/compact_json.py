"""JSON as every message leaves the house: no spaces, UTF-8, so a body built by hand matches a transport's."""

from __future__ import annotations

import json
from typing import Any


def json_compact(value: Any) -> bytes:
    """A payload as every transport sends it: JSON without spaces, UTF-8 (a producer building message
    bodies itself, trainings/reminding/publishing.py, encodes with this so its bytes are the transports')."""
    return json.dumps(value, separators=(",", ":")).encode()
