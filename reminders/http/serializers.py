"""API shapes. The job input is seed 000's JSON: key, ISO 8601 schedules, callback {type, data}."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.fields import AwareDateTimeField as AwareDateTimeField
from common.serializers import StrictSerializer
from reminders.engine import handler_registry
from reminders.jobs import Callback
from reminders.models import (
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    CallbackType,
    Job,
    Occurrence,
    ThrottlePolicy,
)
from reminders.transports import transport_row

# Upper bounds keep every number inside its database column and inside what makes sense.
MAX_DEADLINE_SECONDS = 31 * 24 * 3600
MAX_WINDOW_SECONDS = 7 * 24 * 3600
KEY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}"


def callback_representation(job: Job) -> dict[str, Any]:
    """A job's callback as the API shows it: the input shape, without write-only fields (the secret)."""
    target_field = transport_row(job.callback_type).data_serializer.target_field
    return {"type": job.callback_type, "data": {target_field: job.target, "payload": job.payload}}


class CallbackSerializer(StrictSerializer):
    type = serializers.ChoiceField(choices=CallbackType.choices)
    data = serializers.DictField()  # type: ignore[assignment]  # DRF pops declared fields off the class

    def validate(self, attrs: dict[str, Any]) -> Callback:
        # A PATCH makes nested fields optional too, but a callback is only ever replaced whole.
        missing = [name for name in ("type", "data") if name not in attrs]
        if missing:
            raise serializers.ValidationError(
                {name: ["This field is required: a callback is replaced whole."] for name in missing}
            )
        callback_type = attrs["type"]
        data_serializer = transport_row(callback_type).data_serializer
        data = data_serializer(data=attrs["data"], context=self.context)  # the caller's queue access
        if not data.is_valid():
            raise serializers.ValidationError({"data": data.errors})
        values = data.validated_data
        return Callback(
            type=CallbackType(callback_type),
            target=values[data_serializer.target_field],
            payload=values.get("payload", {}),
            secret=values.get("secret", ""),
        )


def refuse_trailing_newline(key: str) -> None:
    """The key pattern's `$` also matches before a final newline; the pattern stays `^…$` because the
    OpenAPI schema publishes it, and JSON Schema (ECMA-262 regular expressions) has no end-of-text anchor."""
    if key.endswith("\n"):
        raise serializers.ValidationError("must not end with a line break.")


class ThrottleField(serializers.SlugRelatedField):
    """A throttle policy by name. A name PostgreSQL cannot hold (NUL, reachable through form bodies, which
    the JSON parser's check does not see) does not exist rather than failing the lookup with a 500."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=ThrottlePolicy.objects.all(), **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return super().to_internal_value(data)


class SettingLimitedListField(serializers.ListField):
    """A list whose most items is a setting, checked by the serializer's `validate_<field>` with its own
    message; the schema states it as `maxItems` (reminders/http/openapi.py)."""

    def __init__(self, *, max_items_setting: str, **kwargs: Any) -> None:
        self.max_items_setting = max_items_setting
        super().__init__(**kwargs)


class JobInputSerializer(StrictSerializer):
    # Not trimmed (DRF's default): a key is refused unless it is exactly what will be stored and looked up
    # (see `refuse_trailing_newline` for the one case the pattern lets through).
    key = serializers.RegexField(
        rf"^{KEY_PATTERN}$",
        max_length=200,
        trim_whitespace=False,
        error_messages={
            "invalid": "use 1-200 letters, digits, '.', '_', ':', '@' or '-', starting alphanumeric."
        },
    )
    schedules = SettingLimitedListField(
        child=AwareDateTimeField(), allow_empty=False, max_items_setting="REMINDERS_MAX_SCHEDULES"
    )
    callback = CallbackSerializer()
    priority = serializers.IntegerField(
        min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, default=PRIORITY_DEFAULT
    )
    deadline_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_DEADLINE_SECONDS, required=False, allow_null=True, default=None
    )
    batch_size = serializers.IntegerField(
        min_value=1,
        max_value=settings.REMINDERS_MAX_BATCH_SIZE,
        default=1,
        help_text="Events per instant, each with its own idempotency key (REMINDERS_MAX_BATCH_SIZE at most).",
    )
    throttle = ThrottleField(required=False, allow_null=True, default=None)

    def validate_key(self, value: str) -> str:
        refuse_trailing_newline(value)
        if value.startswith("schedule:"):
            raise serializers.ValidationError("keys starting with 'schedule:' are reserved for schedules.")
        reserved_by = handler_registry.key_reserved_by(value)
        if reserved_by is not None:
            raise serializers.ValidationError(f"this key is in a namespace reserved for {reserved_by}.")
        return value

    def validate_schedules(self, value: list[datetime]) -> list[datetime]:
        limit = settings.REMINDERS_MAX_SCHEDULES
        if len(value) > limit:
            raise serializers.ValidationError(f"at most {limit} instants per job ({len(value)} given).")
        tolerance = settings.REMINDERS_PAST_TOLERANCE_SECONDS
        oldest_allowed = timezone.now() - timedelta(seconds=tolerance)
        errors = {
            str(index): [f"{instant.isoformat()} is more than {tolerance} s in the past."]
            for index, instant in enumerate(value)
            if instant < oldest_allowed
        }
        if errors:
            raise serializers.ValidationError(errors)
        return value


class BulkJobsInputSerializer(StrictSerializer):
    jobs = SettingLimitedListField(
        child=JobInputSerializer(), allow_empty=False, max_items_setting="REMINDERS_MAX_BULK_JOBS"
    )

    def validate_jobs(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > settings.REMINDERS_MAX_BULK_JOBS:
            raise serializers.ValidationError(f"at most {settings.REMINDERS_MAX_BULK_JOBS} jobs per request.")
        total = sum(len(job["schedules"]) for job in value)
        if total > settings.REMINDERS_MAX_BULK_INSTANTS:
            raise serializers.ValidationError(
                f"at most {settings.REMINDERS_MAX_BULK_INSTANTS} instants per request ({total} given)."
            )
        duplicates = sorted(key for key, n in Counter(job["key"] for job in value).items() if n > 1)
        if duplicates:
            raise serializers.ValidationError(f"keys appear more than once: {', '.join(duplicates[:10])}.")
        return value


class BulkResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    replaced = serializers.IntegerField()
    instants = serializers.IntegerField()


class OccurrenceSerializer(serializers.ModelSerializer):
    job: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="key", read_only=True)

    class Meta:
        model = Occurrence
        fields = [
            "id",
            "job",
            "fire_at",
            "status",
            "attempts",
            "next_attempt_at",
            "delivered_at",
            "last_error",
            "idempotency_key",
            "priority",
            "batch_index",
        ]
        read_only_fields = fields


class JobOccurrenceSerializer(OccurrenceSerializer):
    class Meta(OccurrenceSerializer.Meta):
        fields = [f for f in OccurrenceSerializer.Meta.fields if f != "job"]
        read_only_fields = fields


class JobCallbackOutputSerializer(serializers.Serializer):
    type = serializers.CharField()
    data = serializers.DictField()  # type: ignore[assignment]


@extend_schema_field(JobCallbackOutputSerializer)
class CallbackOutputField(serializers.Field):
    """A job's callback, read-only, as `callback_representation` shows it; `source` names the job."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Job) -> dict[str, Any]:
        return callback_representation(value)


class JobSerializer(serializers.ModelSerializer):
    callback = CallbackOutputField(source="*")
    throttle: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    occurrences = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "key",
            "version",
            "priority",
            "deadline_seconds",
            "batch_size",
            "throttle",
            "callback",
            "created_at",
            "updated_at",
            "occurrences",
        ]
        read_only_fields = fields

    @extend_schema_field(JobOccurrenceSerializer(many=True))
    def get_occurrences(self, job: Job) -> list[dict[str, Any]]:
        rows = job.occurrences.order_by("fire_at", "id")
        return JobOccurrenceSerializer(rows, many=True).data  # type: ignore[return-value]


class JobSummarySerializer(JobSerializer):
    class Meta(JobSerializer.Meta):
        fields = [f for f in JobSerializer.Meta.fields if f != "occurrences"]
        read_only_fields = fields
