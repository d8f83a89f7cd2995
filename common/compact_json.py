"""JSON as every message leaves the house: no spaces, ASCII, so a body built by hand matches a transport's.
The one compact encoder of the project: the publishers' bodies and the push providers' requests."""

from __future__ import annotations

import json
from typing import Any


def _unserializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# `json.dumps(value, separators=(",", ":"))` without the encoder object and the C encoder it builds per
# call (every push's body goes through it); the pure-Python encoder where the C one is missing.
_COMPACT = json.JSONEncoder(separators=(",", ":"))
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_ENCODE = (
    _c_make_encoder(
        None, _unserializable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    if _c_make_encoder is not None
    else None
)


def json_compact(value: Any) -> bytes:
    """A payload as every transport sends it: the bytes of `json.dumps(value, separators=(",", ":"))`,
    encoded (a producer building message bodies itself, trainings/reminding/publishing.py, encodes with
    this so its bytes are the transports')."""
    if _ENCODE is None:
        return _COMPACT.encode(value).encode()
    return "".join(_ENCODE(value, 0)).encode()
