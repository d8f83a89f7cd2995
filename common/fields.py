"""Aware datetimes at the API's edge: an instant with an explicit offset or Z, stored and answered in UTC.

The instants a caller or a person gives (a training's start and end, a job's `schedules`, an answer's
time) lie in [INSTANT_MIN, INSTANT_MAX): a century, so that every reminder of one (offsets up to 30 days
either way), every local time of it (±14 h) and every local day the analytics sum it into are dates a
datetime holds. Outside it: a 400 naming the field, or the admin form's field error. A recurring
schedule's `start_at`/`end_at` keep the whole calendar: its timeline stops where the calendar does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

INSTANT_MIN = datetime(2000, 1, 1, tzinfo=UTC)
INSTANT_MAX = datetime(2100, 1, 1, tzinfo=UTC)
INSTANT_RANGE_TEXT = f"from {INSTANT_MIN:%Y-%m-%d} to before {INSTANT_MAX:%Y-%m-%d} (UTC)"


def in_instant_range(value: datetime) -> bool:
    return INSTANT_MIN <= value < INSTANT_MAX


def validate_instant_range(value: datetime) -> None:
    """A model field's validator (the admin's forms, `full_clean`): the range the service accepts."""
    if value is not None and not in_instant_range(value):
        raise ValidationError(f"must be {INSTANT_RANGE_TEXT}.", code="range")


@extend_schema_field(OpenApiTypes.DATETIME)
class AwareDateTimeField(serializers.Field):
    """An ISO 8601 instant with an explicit offset or Z. Naive values are refused, never assumed UTC.

    `bounded` (the default): only [INSTANT_MIN, INSTANT_MAX); otherwise any instant a datetime holds.
    """

    default_error_messages = {
        "invalid": "'{value}' is not an ISO 8601 datetime (e.g. 2020-12-24T14:00:00Z).",
        "naive": "'{value}' has no time zone; add Z or an offset such as +01:00.",
        "range": "'{value}' is outside the range of instants that can be stored (years 1-9999 in UTC).",
        "bounds": "'{value}' is outside the accepted range: instants " + INSTANT_RANGE_TEXT + ".",
    }

    def __init__(self, *, bounded: bool = True, **kwargs: Any) -> None:
        self.bounded = bounded
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> datetime:
        if not isinstance(data, str):
            self.fail("invalid", value=str(data)[:50])
        try:
            value = parse_datetime(data.strip())
        except ValueError:
            value = None
        if value is None:
            self.fail("invalid", value=data[:50])
        assert value is not None
        if timezone.is_naive(value):
            self.fail("naive", value=data[:50])
        try:
            # 9999-12-31T23:59-01:00 parses, but is past year 9999 in UTC. And in UTC, since PostgreSQL
            # refuses offsets beyond ±15:59, which ISO 8601 (and Python) allow up to ±23:59.
            instant = value.astimezone(UTC)
        except OverflowError:
            self.fail("range", value=data[:50])
        if self.bounded and not in_instant_range(instant):
            self.fail("bounds", value=data[:50])
        return instant

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()
