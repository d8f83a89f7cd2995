"""API shapes for schedules and throttle policies. Field errors name the field, as for jobs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from common.serializers import StrictModelSerializer, StrictSerializer
from reminders.http.serializers import (
    MAX_DEADLINE_SECONDS,
    MAX_WINDOW_SECONDS,
    AwareDateTimeField,
    CallbackOutputField,
    CallbackSerializer,
    ThrottleField,
    refuse_trailing_newline,
)
from reminders.models import (
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    MisfirePolicy,
    Schedule,
    ThrottlePolicy,
)
from reminders.schedules.cron import MIN_EVERY_SECONDS, AtTimeline, ExpressionError, parse_zone, timeline_for

EXPRESSION_HELP = (
    "A 5-field crontab, @hourly/@daily/@weekly/@monthly/@yearly, "
    f"@every <duration> (e.g. 90s, 15m, 1h30m; at least {MIN_EVERY_SECONDS}s) or @at <unix seconds>."
)


def batch_size_field(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=1,
        max_value=settings.REMINDERS_MAX_BATCH_SIZE,
        help_text=f"Events per trigger, each with its own id (at most {settings.REMINDERS_MAX_BATCH_SIZE}).",
        **kwargs,
    )


class ScheduleInputSerializer(StrictSerializer):
    """Create or replace (all fields) or, with `partial=True`, change some fields of a schedule."""

    key = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,189}$",
        max_length=190,
        trim_whitespace=False,  # refused, never silently changed (see JobInputSerializer.key)
        error_messages={
            "invalid": "use 1-190 letters, digits, '.', '_', ':', '@' or '-', starting alphanumeric."
        },
    )
    expression = serializers.CharField(max_length=200, help_text=EXPRESSION_HELP)
    timezone = serializers.CharField(max_length=64, default="UTC", help_text="IANA zone, e.g. Europe/Paris.")
    callback = CallbackSerializer()
    priority = serializers.IntegerField(
        min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, default=PRIORITY_DEFAULT
    )
    batch_size = batch_size_field(default=1)
    throttle = ThrottleField(required=False, allow_null=True, default=None)
    deadline_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_DEADLINE_SECONDS, required=False, allow_null=True, default=None
    )
    # The whole calendar: a schedule's timeline stops where it does (common/fields.py).
    start_at = AwareDateTimeField(bounded=False, required=False, allow_null=True, default=None)
    end_at = AwareDateTimeField(bounded=False, required=False, allow_null=True, default=None)
    misfire_policy = serializers.ChoiceField(choices=MisfirePolicy.choices, default=MisfirePolicy.FIRE_ONCE)
    paused = serializers.BooleanField(default=False)

    def __init__(self, *args: Any, instance_schedule: Schedule | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schedule = instance_schedule
        if instance_schedule is not None:
            self.fields.pop("key")

    def validate_key(self, value: str) -> str:
        refuse_trailing_newline(value)
        return value

    def validate_timezone(self, value: str) -> str:
        try:
            parse_zone(value)
        except ExpressionError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = self.schedule
        zone = attrs.get("timezone", current.timezone if current else "UTC")
        expression = attrs.get("expression", current.expression if current else "")
        start_at = attrs.get("start_at", current.start_at if current else None)
        end_at = attrs.get("end_at", current.end_at if current else None)
        if "expression" in attrs or "timezone" in attrs:
            now = timezone.now()
            try:
                timeline = timeline_for(expression, zone=zone, anchor=start_at or now, fires_after=now)
            except ExpressionError as exc:
                raise serializers.ValidationError({"expression": [str(exc)]}) from None
            tolerance = timedelta(seconds=settings.REMINDERS_PAST_TOLERANCE_SECONDS)
            if isinstance(timeline, AtTimeline) and timeline.instant < now - tolerance:
                raise serializers.ValidationError(
                    {
                        "expression": [
                            f"@at {timeline.instant.isoformat()} is more than {tolerance} in the past."
                        ]
                    }
                )
        if start_at is not None and end_at is not None and end_at <= start_at:
            raise serializers.ValidationError({"end_at": ["must be after start_at."]})
        return attrs


class ScheduleSerializer(serializers.ModelSerializer):
    callback = CallbackOutputField(source="job")
    priority = serializers.IntegerField(source="job.priority")
    batch_size = serializers.IntegerField(source="job.batch_size")
    throttle: serializers.SlugRelatedField = serializers.SlugRelatedField(
        source="job.throttle", slug_field="name", read_only=True, allow_null=True
    )
    deadline_seconds = serializers.IntegerField(source="job.deadline_seconds", allow_null=True)
    version = serializers.IntegerField(source="job.version")

    class Meta:
        model = Schedule
        fields = [
            "key",
            "expression",
            "timezone",
            "callback",
            "priority",
            "batch_size",
            "throttle",
            "deadline_seconds",
            "start_at",
            "end_at",
            "misfire_policy",
            "paused",
            "version",
            "next_fire_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class PreviewQuerySerializer(serializers.Serializer):
    count = serializers.IntegerField(min_value=1, max_value=settings.REMINDERS_PREVIEW_MAX, default=10)


class FireTimeSerializer(serializers.Serializer):
    utc = serializers.DateTimeField()
    local = serializers.CharField(
        help_text="The same instant in the schedule's zone, ISO 8601 with its offset."
    )


class PreviewSerializer(serializers.Serializer):
    key = serializers.CharField()
    timezone = serializers.CharField()
    version = serializers.IntegerField()
    fires = FireTimeSerializer(many=True)


def preview_data(schedule: Schedule, fires: list[datetime]) -> dict[str, Any]:
    zone = parse_zone(schedule.timezone)
    return {
        "key": schedule.key,
        "timezone": schedule.timezone,
        "version": schedule.version,
        "fires": [
            {"utc": fire.isoformat().replace("+00:00", "Z"), "local": fire.astimezone(zone).isoformat()}
            for fire in fires
        ],
    }


class ThrottlePolicySerializer(StrictModelSerializer):
    max_per_second = serializers.FloatField(
        min_value=0.001,
        max_value=1_000_000,
        required=False,
        allow_null=True,
        help_text="Events per second for all users together.",
    )
    burst = serializers.IntegerField(
        min_value=1,
        max_value=1_000_000,
        required=False,
        allow_null=True,
        help_text="Most events at once. Null or left out: rate/10, at least 1, following the rate; the "
        "answer shows the value in force (null only without a rate).",
    )
    window_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_WINDOW_SECONDS, required=False, allow_null=True
    )

    class Meta:
        model = ThrottlePolicy
        fields = ["name", "max_per_second", "burst", "window_seconds", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def to_representation(self, instance: ThrottlePolicy) -> dict[str, Any]:
        """`burst` as the bucket applies it: what was set, else the default (whole events at once)."""
        data = super().to_representation(instance)
        if data["burst"] is None and instance.max_per_second:
            data["burst"] = int(instance.capacity)
        return data

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance = self.instance
        rate = attrs.get("max_per_second", instance.max_per_second if instance else None)
        window = attrs.get("window_seconds", instance.window_seconds if instance else None)
        if rate is None and window is None:
            raise serializers.ValidationError(
                {"max_per_second": ["set max_per_second, window_seconds or both."]}
            )
        return attrs
