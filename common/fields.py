"""Aware datetimes at the API's edge: an instant with an explicit offset or Z, stored and answered in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


@extend_schema_field(OpenApiTypes.DATETIME)
class AwareDateTimeField(serializers.Field):
    """An ISO 8601 instant with an explicit offset or Z. Naive values are refused, never assumed UTC."""

    default_error_messages = {
        "invalid": "'{value}' is not an ISO 8601 datetime (e.g. 2020-12-24T14:00:00Z).",
        "naive": "'{value}' has no time zone; add Z or an offset such as +01:00.",
        "range": "'{value}' is outside the range of instants that can be stored (years 1-9999 in UTC).",
    }

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
            return value.astimezone(UTC)
        except OverflowError:
            self.fail("range", value=data[:50])

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()
