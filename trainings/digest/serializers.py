"""API shapes of a coach's own profile (trainings/digest/views.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.i18n import spoken_languages
from common.serializers import StrictSerializer
from trainings.models import ChannelChoice, Coach
from trainings.planning.offsets import is_time_zone


class CoachSerializer(serializers.ModelSerializer):
    teams = serializers.SerializerMethodField(help_text="The teams you coach (their digest times).")

    class Meta:
        model = Coach
        fields = ["id", "language", "time_zone", "channels", "quiet_start", "quiet_end", "teams"]
        read_only_fields = fields

    def get_teams(self, coach: Coach) -> list[dict[str, Any]]:
        return [
            {"id": team.pk, "name": team.name, "digest_before": team.digest_before,
             "digest_morning_at": team.digest_morning_at, "decline_alert_within": team.decline_alert_within}
            for team in coach.user.coached_teams.order_by("name", "pk")
        ]  # fmt: skip


class CoachInputSerializer(StrictSerializer):
    """What a coach sets of their own digests: language, zone, channels and quiet hours (both or none)."""

    language = serializers.CharField(
        max_length=10, required=False, help_text="One the service speaks: de, en, es, fr, it, nl."
    )
    time_zone = serializers.CharField(
        max_length=64, required=False, help_text="IANA zone, e.g. Europe/Paris."
    )
    channels = serializers.ChoiceField(
        choices=ChannelChoice.choices,
        required=False,
        help_text="default: push, email when no device is reached; push; email; both.",
    )
    quiet_start = serializers.TimeField(allow_null=True, required=False, help_text="Local time, e.g. 22:00.")
    quiet_end = serializers.TimeField(allow_null=True, required=False, help_text="Local time, e.g. 07:00.")

    def validate_language(self, value: str) -> str:
        if value not in spoken_languages():
            raise serializers.ValidationError(
                f"{value!r} is not a language this service speaks ({', '.join(spoken_languages())})."
            )
        return value

    def validate_time_zone(self, value: str) -> str:
        if not is_time_zone(value):
            raise serializers.ValidationError(f"{value!r} is not an IANA time zone name (e.g. Europe/Paris).")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("quiet_start" in attrs) != ("quiet_end" in attrs) or (
            (attrs.get("quiet_start") is None) != (attrs.get("quiet_end") is None)
        ):
            raise serializers.ValidationError({"quiet_end": "quiet_start and quiet_end go together."})
        return attrs
