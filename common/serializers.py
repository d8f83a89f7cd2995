"""Strict API input: a key of the body that names no field is a 400 naming it, never dropped.

A client that spells `timezone` where the field is `time_zone`, or sends `player_ids` where it is
`players`, meant something; storing the training without it would do what nobody asked. Every serializer
that reads a request body derives from `StrictSerializer` or `StrictModelSerializer`; a nested one is
checked when its parent runs it, each item of a list on its own, and the unknown keys are answered beside
the other field errors of the same body (tests/security/test_unknown_fields.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

from django.http import QueryDict
from rest_framework import serializers

UNKNOWN_FIELD = "unknown field"

# A form body's CSRF token (SessionAuthentication reads it; no serializer has it as a field).
_FORM_ONLY_KEYS = frozenset({"csrfmiddlewaretoken"})


class StrictInput:
    """Refuses keys that are none of the serializer's fields (read-only fields are known, and ignored as
    DRF ignores them). `unknown_field_hints` answers a known mistake with its own message."""

    unknown_field_hints: ClassVar[Mapping[str, str]] = {}

    def to_internal_value(self, data: Any) -> Any:
        unknown = self.unknown_fields(data)
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value

    def unknown_fields(self, data: Any) -> dict[str, list[str]]:
        """The body's keys that name no field, each with its error (a close field name when there is one)."""
        if not isinstance(data, Mapping):
            return {}  # DRF answers a body that is no object itself
        known = self.fields  # type: ignore[attr-defined]
        extra = [key for key in data if key not in known]
        if isinstance(data, QueryDict):
            extra = [key for key in extra if key not in _FORM_ONLY_KEYS]
        return {str(key): [self.unknown_field_error(str(key), list(known))] for key in sorted(extra, key=str)}

    def unknown_field_error(self, key: str, known: list[str]) -> str:
        hint = self.unknown_field_hints.get(key)
        if hint:
            return f"{UNKNOWN_FIELD}: {hint}"
        close = difflib.get_close_matches(key, known, n=1)
        return f"{UNKNOWN_FIELD}; did you mean {close[0]!r}?" if close else f"{UNKNOWN_FIELD}."


class StrictSerializer(StrictInput, serializers.Serializer):
    """A request body's serializer: unknown keys are a 400 (see StrictInput)."""


class StrictModelSerializer(StrictInput, serializers.ModelSerializer):
    """A model serializer that reads request bodies: unknown keys are a 400 (see StrictInput)."""


class NoBody(StrictSerializer):
    """The body of an action that takes none (pause, resume): any key in it is unknown."""
