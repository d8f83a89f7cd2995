"""API shapes of the roster: teams, players, a team's members, and the bulk sync's body and answer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.serializers import StrictSerializer
from trainings.models import Player, Reminds, Team
from trainings.planning.offsets import OffsetError, parse_offsets
from trainings.roster.fields import (
    EmailAddressField,
    ExternalIdField,
    LanguageField,
    LocalTimeField,
    TimeZoneField,
)
from trainings.serializers import _ScopedPlayerListField, _ScopedTeamField

MAX_MEMBERS = 5_000


class TeamSerializer(serializers.ModelSerializer):
    coaches: serializers.PrimaryKeyRelatedField[Any] = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True, help_text="The coaches' user ids."
    )

    quiet_start = LocalTimeField(allow_null=True, read_only=True, help_text="No pushes from (local time).")
    quiet_end = LocalTimeField(allow_null=True, read_only=True, help_text="...until (local time).")
    digest_morning_at = LocalTimeField(allow_null=True, read_only=True,
                                       help_text="The coaches' morning summary (team's zone).")  # fmt: skip

    class Meta:
        model = Team
        fields = [
            "id",
            "name",
            "time_zone",
            "external_id",
            "quiet_start",
            "quiet_end",
            "reminds",
            "digest_before",
            "digest_morning_at",
            "decline_alert_within",
            "coaches",
            "created_at",
        ]
        read_only_fields = fields


def _offset(value: str) -> str:
    if value:
        try:
            parse_offsets([value])
        except OffsetError as exc:
            raise serializers.ValidationError(str(exc)) from None
    return value


class TeamInputSerializer(StrictSerializer):
    """Create (name required) or change a team. Quiet hours go together (both null: none)."""

    name = serializers.CharField(max_length=200)
    time_zone = TimeZoneField(required=False)
    external_id = ExternalIdField(required=False, allow_null=True)
    quiet_start = serializers.TimeField(required=False, allow_null=True, help_text="Local time, e.g. 22:00.")
    quiet_end = serializers.TimeField(required=False, allow_null=True, help_text="Local time, e.g. 07:00.")
    reminds = serializers.ChoiceField(
        choices=Reminds.choices, required=False, help_text="Who a pending player's reminders go to."
    )
    digest_before = serializers.CharField(
        max_length=10,
        required=False,
        allow_blank=True,
        help_text='Coaches get who still owes what this long before each training, e.g. "2h"; "": none.',
    )
    digest_morning_at = serializers.TimeField(
        required=False,
        allow_null=True,
        help_text="Coaches get a summary of the day's trainings at this time (team's zone); null: none.",
    )
    decline_alert_within = serializers.CharField(
        max_length=10,
        required=False,
        allow_blank=True,
        help_text='Coaches are alerted when a player declines this near the start, e.g. "3h"; "": none.',
    )

    def validate_digest_before(self, value: str) -> str:
        return _offset(value)

    def validate_decline_alert_within(self, value: str) -> str:
        return _offset(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        team: Team | None = self.instance
        given = {"quiet_start", "quiet_end"} & set(attrs)
        if given:
            start = attrs.get("quiet_start", team.quiet_start if team else None)
            end = attrs.get("quiet_end", team.quiet_end if team else None)
            # A new team has both by default (22:00-07:00): the pair is given together or not at all.
            if (start is None) != (end is None) or (team is None and len(given) == 1):
                raise serializers.ValidationError({"quiet_end": "quiet_start and quiet_end go together."})
        return attrs


class PlayerSerializer(serializers.ModelSerializer):
    email = serializers.SerializerMethodField(help_text="The player's email address (null: none).")
    teams = serializers.SerializerMethodField(help_text="The teams the player is an active member of.")

    class Meta:
        model = Player
        fields = ["id", "name", "language", "time_zone", "email", "external_id", "teams"]
        read_only_fields = fields

    def get_email(self, player: Player) -> str | None:
        emails: dict[int, str] = self.context.get("emails", {})
        return emails.get(player.pk)

    def get_teams(self, player: Player) -> list[int]:
        teams: dict[int, list[int]] = self.context.get("teams", {})
        return teams.get(player.pk, [])


class PlayerInputSerializer(StrictSerializer):
    """Create (name required) or change a player. `team` on create only: the team the new player joins,
    required of a coach (a coach sees players through their teams)."""

    name = serializers.CharField(max_length=200)
    language = LanguageField(required=False)
    time_zone = TimeZoneField(
        required=False, help_text="IANA zone name; a new player on a `team` defaults to the team's, else UTC."
    )
    email = EmailAddressField(required=False)
    external_id = ExternalIdField(required=False, allow_null=True)
    team = _ScopedTeamField(required=False, help_text="On create: the team the new player joins.")


class MembersSerializer(StrictSerializer):
    players = _ScopedPlayerListField(
        max_length=MAX_MEMBERS,
        help_text="The team's active members, by id: those left out become inactive members.",
    )

    def validate_players(self, value: list[Player]) -> list[Player]:
        if len({p.pk for p in value}) != len(value):
            raise serializers.ValidationError("a player is listed twice.")
        return value


class MembersResultSerializer(serializers.Serializer):
    players = serializers.ListField(child=serializers.IntegerField(), help_text="The active members' ids.")


# --- The bulk sync (trainings/roster/sync.py) --------------------------------------------------------------

MAX_SYNC_TEAMS = 1_000
MAX_SYNC_PLAYERS = 20_000  # per team
MAX_SYNC_GUARDIANS = 20


class SyncGuardianSerializer(StrictSerializer):
    external_id = ExternalIdField()
    name = serializers.CharField(max_length=200)
    email = EmailAddressField(required=False)
    relation = serializers.CharField(
        max_length=50, required=False, allow_blank=True, help_text='What they are to the player: "mother".'
    )


class SyncPlayerSerializer(StrictSerializer):
    external_id = ExternalIdField()
    name = serializers.CharField(max_length=200)
    language = LanguageField(required=False)
    time_zone = TimeZoneField(required=False, help_text="IANA zone; a new player defaults to the team's.")
    email = EmailAddressField(required=False)
    guardians = SyncGuardianSerializer(many=True, required=False, max_length=MAX_SYNC_GUARDIANS)  # type: ignore[call-arg]


class SyncTeamSerializer(StrictSerializer):
    external_id = ExternalIdField()
    name = serializers.CharField(max_length=200)
    time_zone = TimeZoneField(required=False, help_text="IANA zone; a new team defaults to UTC.")
    players = SyncPlayerSerializer(many=True, required=False, max_length=MAX_SYNC_PLAYERS)  # type: ignore[call-arg]


class RosterSyncSerializer(StrictSerializer):
    """A club's roster, keyed by your external ids: teams, their players, the players' guardians."""

    teams = SyncTeamSerializer(many=True, max_length=MAX_SYNC_TEAMS)  # type: ignore[call-arg]
    deactivate_missing = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also deactivate what this roster leaves out: memberships of its teams not listed, "
        "guardianships of its players not listed, and the memberships (guardianships) of your teams, players "
        "(guardians) it does not name at all.",
    )


class _CountsSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    deactivated = serializers.IntegerField()


class RosterResultSerializer(serializers.Serializer):
    teams = _CountsSerializer()
    players = _CountsSerializer()
    memberships = _CountsSerializer()
    guardians = _CountsSerializer()
    guardianships = _CountsSerializer()
