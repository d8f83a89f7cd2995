"""API shapes of guardians (trainings/guardians/views.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.i18n import spoken_languages
from common.serializers import StrictSerializer
from trainings.models import Guardian, Guardianship
from trainings.offsets import is_time_zone


class WardSerializer(StrictSerializer):
    """One of the guardian's players, and what the guardian is to them."""

    player = serializers.IntegerField(min_value=1, max_value=2**63 - 1, help_text="The player's id.")
    relation = serializers.CharField(max_length=50, required=False, default="", allow_blank=True,
                                     help_text='What the guardian is to the player: "mother".')  # fmt: skip


class GuardianSerializer(serializers.ModelSerializer):
    players = serializers.SerializerMethodField()

    class Meta:
        model = Guardian
        fields = ["id", "name", "user", "language", "time_zone", "quiet_start", "quiet_end", "players"]
        read_only_fields = fields

    def get_players(self, guardian: Guardian) -> list[dict[str, Any]]:
        rows: list[Guardianship] = list(
            guardian.guardianships.select_related("player").order_by("player__name")
        )
        return [{"player": g.player_id, "name": g.player.name, "relation": g.relation} for g in rows]


class GuardianInputSerializer(StrictSerializer):
    """A coach or an operator creates or changes a guardian; `players` replaces whose guardian they are."""

    name = serializers.CharField(max_length=200)
    language = serializers.ChoiceField(
        choices=spoken_languages(), required=False, default="en", help_text="One the service speaks."
    )
    time_zone = serializers.CharField(
        max_length=64,
        required=False,
        help_text="IANA zone; a new guardian left without one lives in their players' team's.",
    )
    players = WardSerializer(many=True, required=False)

    def validate_time_zone(self, value: str) -> str:
        if not is_time_zone(value):
            raise serializers.ValidationError(f"{value!r} is not an IANA time zone name (e.g. Europe/Paris).")
        return value

    def validate_players(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        visible = self.context["players"]
        ids = [item["player"] for item in value]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError("a player is listed twice.")
        found = {p.pk: p for p in visible.filter(pk__in=ids)}
        missing = [pk for pk in ids if pk not in found]
        if missing:
            raise serializers.ValidationError(f"no such player among yours: {missing}.")
        # `relation` may be absent: a PATCH (partial) applies no field's default, nested ones included.
        return [{"player": found[item["player"]], "relation": item.get("relation", "")} for item in value]


class _OpenLinkSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="INVITATION, PRE or POST.")
    answered = serializers.BooleanField()
    answer_url = serializers.CharField(help_text="The answer link, minted for this guardian.")


class _WardOnTrainingSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    relation = serializers.CharField(allow_blank=True)
    invitation = serializers.CharField(help_text="PENDING, ACCEPTED or DENIED.")
    open = _OpenLinkSerializer(many=True, help_text="What may still be answered, and its link.")


class GuardianTrainingSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    team = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    time_zone = serializers.CharField()
    location = serializers.CharField(allow_blank=True)
    players = _WardOnTrainingSerializer(many=True, help_text="The guardian's players on this training.")
