"""OpenAPI hints drf-spectacular cannot infer (loaded from TrainingsConfig.ready)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes


class AwareDateTimeFieldExtension(OpenApiSerializerFieldExtension):
    """The engine's AwareDateTimeField is an ISO 8601 date-time (with an offset) in the schema."""

    target_class = "reminders.serializers.AwareDateTimeField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        return build_basic_type(OpenApiTypes.DATETIME)
