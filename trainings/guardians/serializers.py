"""API shapes of guardians (trainings/guardians/views.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.i18n import spoken_languages
from common.serializers import StrictSerializer
from trainings.models import Guardian, Guardianship
from trainings.planning.offsets import is_time_zone
from trainings.roster.fields import ExternalIdField


class WardSerializer(StrictSerializer):
    """One of the guardian's players, and what the guardian is to them."""

    player = serializers.IntegerField(min_value=1, max_value=2**63 - 1, required=False,
                                      help_text="The player's id (or `player_external_id`).")  # fmt: skip
    player_external_id = ExternalIdField(required=False, help_text="The player's external id (yours).")
    relation = serializers.CharField(max_length=50, required=False, default="", allow_blank=True,
                                     help_text='What the guardian is to the player: "mother".')  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("player" in attrs) == ("player_external_id" in attrs):
            raise serializers.ValidationError({"player": "give the player's id or player_external_id."})
        return attrs


class GuardianSerializer(serializers.ModelSerializer):
    players = serializers.SerializerMethodField()

    class Meta:
        model = Guardian
        fields = ["id", "name", "user", "language", "time_zone", "quiet_start", "quiet_end", "external_id",
                  "players"]  # fmt: skip
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
    external_id = ExternalIdField(required=False, allow_null=True)
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
        # A player named by external id is the caller's own (external ids are unique per caller).
        keys = [item["player_external_id"] for item in value if "player_external_id" in item]
        by_key = dict(visible.filter(owner=self.context.get("owner"), external_id__in=keys).values_list(
            "external_id", "pk"
        )) if keys else {}  # fmt: skip
        unknown = [key for key in keys if key not in by_key]
        if unknown:
            raise serializers.ValidationError(f"no such player external id among yours: {unknown}.")
        ids = [item["player"] if "player" in item else by_key[item["player_external_id"]] for item in value]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError("a player is listed twice.")
        found = {p.pk: p for p in visible.filter(pk__in=ids)}
        missing = [pk for pk in ids if pk not in found]
        if missing:
            raise serializers.ValidationError(f"no such player among yours: {missing}.")
        # `relation` may be absent: a PATCH (partial) applies no field's default, nested ones included.
        return [
            {"player": found[pk], "relation": item.get("relation", "")}
            for pk, item in zip(ids, value, strict=True)
        ]


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
