"""The OpenAPI schema's error answers: every status code the API can give, documented on each operation.

drf-spectacular documents what a view returns when it succeeds; the API also answers 401 (no or a bad
token), 403, 404 (a path naming a row), 400 (bad input), 411/413/415 (a body it cannot read), 422 (an
Idempotency-Key used with another request, common/idempotency.py) and 429
(throttled, with Retry-After) on every operation where they can occur. A client generated from the schema
should know them, and `tests/security/test_schema_conformance.py` holds every response to it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from common.idempotency import HEADER as IDEMPOTENCY_HEADER
from common.idempotency import KEY_REUSED

_DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
# 400: field name -> its errors (or nested objects for nested fields), `detail` for an unreadable body, or
# a list of messages for an error about the whole request.
_FIELD_ERRORS = {
    "anyOf": [
        {"type": "object", "additionalProperties": True},
        {"type": "array", "items": {"type": "string"}},
    ]
}
_TOO_LARGE = {
    "type": "object",
    "properties": {"detail": {"type": "string"}, "limit_bytes": {"type": "integer"}},
    "required": ["detail"],
}
_ERRORS: dict[int, tuple[str, dict[str, Any]]] = {
    400: ("Field errors, by field name, or `detail` when the body cannot be read.", _FIELD_ERRORS),
    401: ("No token, or one that does not exist.", _DETAIL),
    403: ("The user may not do this.", _DETAIL),
    404: ("No such row (or not one of yours), page or cursor.", _DETAIL),
    405: ("Method not allowed.", _DETAIL),
    411: ("A chunked body that this server cannot read: send Content-Length.", _DETAIL),
    413: ("The body is over REMINDERS_MAX_REQUEST_BYTES.", _TOO_LARGE),
    415: ("A Content-Type the API does not parse.", _DETAIL),
    422: (KEY_REUSED, _DETAIL),
    429: ("Throttled per token or per address; retry after Retry-After seconds.", _DETAIL),
}
_BODY_ERRORS = (400, 411, 413, 415)
_METHODS = ("get", "put", "post", "patch", "delete")


def error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: add the error answers each operation can give."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            # 404 everywhere: a path parameter naming no row, a page or cursor past the end, or a path the
            # URL patterns refuse.
            codes = [401, 403, 404, 405, 429]
            if operation.get("parameters") or method in ("put", "post", "patch"):
                codes.append(400)
            if method in ("put", "post", "patch"):
                codes.extend(_BODY_ERRORS)
            if any(p.get("name") == IDEMPOTENCY_HEADER for p in operation.get("parameters", [])):
                codes.append(422)
            # An operation's own error answers (a 409) without a body said: `{"detail"}`, as every error.
            for code, entry in responses.items():
                if str(code).startswith("4") and "content" not in entry:
                    entry["content"] = {
                        "application/json": {"schema": _FIELD_ERRORS if code == "400" else _DETAIL}
                    }
            for code in sorted(set(codes)):
                description, body = _ERRORS[code]
                entry = responses.setdefault(str(code), {"description": description})
                entry.setdefault("content", {"application/json": {"schema": body}})
                if code == 429:
                    entry.setdefault(
                        "headers", {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds."}}
                    )
    return result


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: a request body's objects take no other keys (common/serializers.py
    answers one with a 400), `additionalProperties: false` on every object a body reaches, through `$ref`
    and nested properties and items. A free-form object (`payload`, `answers`) keeps its own setting."""
    components = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def close(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in seen and name in components:
                seen.add(name)
                close(components[name])
            return
        if "properties" in schema:
            schema.setdefault("additionalProperties", False)
            for value in schema["properties"].values():
                close(value)
        for key in ("items", "allOf", "anyOf", "oneOf"):
            value = schema.get(key)
            for each in value if isinstance(value, list) else [value]:
                close(each)

    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method in _METHODS:
                for media in operation.get("requestBody", {}).get("content", {}).values():
                    close(media.get("schema"))
    return result


class ServerRulesSchema(AutoSchema):
    """drf-spectacular's schema with the input rules DRF enforces that it leaves out, so a generated client
    (or schemathesis) knows them: a list that may not be empty has `minItems: 1`; a string that may not be
    blank `minLength: 1`, and `pattern: \\S` when surrounding spaces are trimmed first (a blank after
    trimming is refused too); a list capped by a setting (`max_items_setting`, read at each request, so an
    operator's value) its `maxItems`. Request bodies only: an answer is what was stored."""

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction != "request" or field.read_only or not isinstance(schema, dict) or "$ref" in schema:
            return schema
        lists = (serializers.ListField, serializers.ListSerializer, serializers.ManyRelatedField)
        if isinstance(field, lists) and not getattr(field, "allow_empty", True):
            schema.setdefault("minItems", 1)
        setting = getattr(field, "max_items_setting", None)
        if setting is not None:
            schema.setdefault("maxItems", getattr(settings, setting))
        if isinstance(field, serializers.CharField) and not field.allow_blank:
            schema.setdefault("minLength", 1)
            if field.trim_whitespace:
                schema.setdefault("pattern", r"\S")
        return schema
