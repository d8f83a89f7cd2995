"""What a questionnaire answer may be, whichever way it comes in: an answer link (the API and the email
page), the coaches' and operators' `POST /api/trainings/<id>/answers/`, a service call. One check, so no
way in stores what another refuses."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_ANSWER_KEYS = 100
MAX_ANSWER_CHARS = 20_000


def answers_check(value: Any) -> dict[str, Any]:
    """A questionnaire's answers: a JSON object of at most MAX_ANSWER_KEYS keys and MAX_ANSWER_CHARS
    characters of JSON; ValueError saying what is wrong otherwise."""
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object of the questionnaire's answers.")
    if len(value) > MAX_ANSWER_KEYS:
        raise ValueError(f"at most {MAX_ANSWER_KEYS} answers.")
    if len(json.dumps(value)) > MAX_ANSWER_CHARS:
        raise ValueError(f"at most {MAX_ANSWER_CHARS} characters of JSON.")
    return value


@extend_schema_field({"type": "object", "additionalProperties": True, "maxProperties": MAX_ANSWER_KEYS})
class AnswersField(serializers.JSONField):
    """A questionnaire's answers in an API body: `answers_check`, as a field error (400 naming it)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return answers_check(super().to_internal_value(data))
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
