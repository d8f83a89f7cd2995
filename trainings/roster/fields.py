"""Input checks a roster row's fields share (teams, players, guardians, the bulk sync, a coach's profile)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.i18n import validate_spoken_language
from delivery.api import BY_NAME
from trainings.models.external import EXTERNAL_ID_MAX
from trainings.planning.offsets import is_time_zone


def language_error(value: str) -> str | None:
    """Pushes are written in the languages the service speaks (common/i18n.py, settings.LANGUAGES)."""
    try:
        validate_spoken_language(value)
    except DjangoValidationError as exc:
        return " ".join(exc.messages)
    return None


def time_zone_error(value: str) -> str | None:
    return None if is_time_zone(value) else f"{value!r} is not an IANA time zone name (e.g. Europe/Paris)."


def email_error(value: str) -> str | None:
    """An address the email channel can send to (delivery/channels/email/)."""
    error = BY_NAME["email"].module().address_error(value)
    return f"not {error}" if error else None


class LanguageField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 10)
        kwargs.setdefault("help_text", "Language of the pushes: a code of the service's languages (en, fr).")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        error = language_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class TimeZoneField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 64)
        kwargs.setdefault("help_text", "IANA zone name, e.g. Europe/Paris.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        error = time_zone_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class EmailAddressField(serializers.CharField):
    """A person's email address: their email device (delivery/channels/email/), the one address the email
    channel reaches them at. null removes it."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 254)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("help_text", "Email address (reminders by email); null: none.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        error = email_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class ExternalIdField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", EXTERNAL_ID_MAX)
        kwargs.setdefault("help_text", "Your own id for it: unique among the rows you created.")
        super().__init__(**kwargs)


@extend_schema_field({"type": "string", "pattern": r"^\d{2}:\d{2}:\d{2}(\.\d{1,6})?$", "example": "22:00:00"})
class LocalTimeField(serializers.TimeField):
    """A wall-clock time as the API answers it, "22:00:00" (a fraction of a second when given one): not the
    schema's `time` format, which is RFC 3339's and wants an offset a local time has not."""
