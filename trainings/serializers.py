"""API shapes for trainings. Related objects are scoped to what the caller may see, so naming another
coach's team or player is a 400 on that field, indistinguishable from a missing id."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import connection
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.fields import AwareDateTimeField
from common.serializers import StrictSerializer
from delivery.api import BY_NAME, PLATFORMS, device_platform_choices, device_provider_choices, token_preview
from delivery.models import Device
from trainings.answers.values import AnswersField
from trainings.models import ChannelChoice, Invitation, InvitationStatus, Player, ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.offsets import OffsetError, is_time_zone, parse_offsets
from trainings.reminding.critical import ALL, validate_critical_offsets
from trainings.selectors import active_member_ids, players_visible_to, teams_visible_to


class InvitationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Invitation
        fields = ["player", "status", "responded_at"]
        read_only_fields = fields


class TrainingSerializer(serializers.ModelSerializer):
    start = AwareDateTimeField()
    end = AwareDateTimeField()
    players = serializers.SerializerMethodField()
    invitations = InvitationSerializer(many=True, read_only=True)
    # For people: the same instants as wall times in the training's zone (ISO 8601 with its UTC offset).
    start_local = serializers.SerializerMethodField(help_text="`start` in the training's time zone.")
    end_local = serializers.SerializerMethodField(help_text="`end` in the training's time zone.")

    class Meta:
        model = Training
        fields = [
            "id",
            "team",
            "title",
            "start",
            "end",
            "start_local",
            "end_local",
            "time_zone",
            "location",
            "cancelled",
            "players",
            "invitations",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_start_local(self, training: Training) -> str:
        return training.start.astimezone(training.zone).isoformat()

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_end_local(self, training: Training) -> str:
        return training.end.astimezone(training.zone).isoformat()

    def get_players(self, training: Training) -> list[int]:
        return sorted(invitation.player_id for invitation in training.invitations.all())


@extend_schema_field(OpenApiTypes.INT)
class _ScopedTeamField(serializers.PrimaryKeyRelatedField):
    def get_queryset(self) -> Any:
        return teams_visible_to(self.context["request"].user)


@extend_schema_field(OpenApiTypes.INT)
class _ScopedPlayerField(serializers.PrimaryKeyRelatedField):
    def get_queryset(self) -> Any:
        return players_visible_to(self.context["request"].user)


class _ScopedPlayerListField(serializers.ListField):
    """A list of player ids, looked up in one query instead of one per id (the list may hold 1,000).

    Each item gets exactly the answer the per-id field gives: an id the query covered is the player or
    `does_not_exist`; anything else (a bool, a string that is no number, an id outside the key's range,
    null) goes through the per-id field, so its error stays the same too.
    """

    child: _ScopedPlayerField

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=_ScopedPlayerField(), **kwargs)

    def run_child_validation(self, data: list[Any]) -> list[Player]:
        pk = Player._meta.pk
        assert pk is not None
        low, high = connection.ops.integer_field_range(pk.get_internal_type())
        keys: list[int | None] = []
        for item in data:
            key = None
            if not isinstance(item, bool):
                try:
                    key = pk.get_prep_value(item)
                except (TypeError, ValueError):
                    key = None
            keys.append(key if isinstance(key, int) and low <= key <= high else None)
        wanted = {key for key in keys if key is not None}
        found = (
            {player.pk: player for player in self.child.get_queryset().filter(pk__in=wanted)}
            if wanted
            else {}
        )
        result: list[Player] = []
        errors: dict[Any, Any] = {}  # by index, as DRF's ListField answers
        for index, (item, key) in enumerate(zip(data, keys, strict=True)):
            try:
                if key is None:
                    result.append(self.child.run_validation(item))
                elif key in found:
                    result.append(found[key])
                else:
                    self.child.fail("does_not_exist", pk_value=item)
            except serializers.ValidationError as exc:
                errors[index] = exc.detail
        if errors:
            raise serializers.ValidationError(errors)
        return result


class TrainingInputSerializer(StrictSerializer):
    """Create (team, title, start and end required; time_zone defaults to the team's) or update (PUT/PATCH)
    a training.

    `players` is the training's full player list (invitations); omitted on create it defaults to the
    team's active members, omitted on update it stays as it is.
    """

    team = _ScopedTeamField()
    title = serializers.CharField(max_length=200)
    start = AwareDateTimeField()
    end = AwareDateTimeField()
    time_zone = serializers.CharField(
        max_length=64,
        required=False,
        help_text="IANA zone name, e.g. Europe/Paris; defaults to the team's zone.",
    )
    location = serializers.CharField(max_length=200, required=False, allow_blank=True)
    cancelled = serializers.BooleanField(required=False)
    players = _ScopedPlayerListField(required=False, max_length=1000)

    def validate_time_zone(self, value: str) -> str:
        if not is_time_zone(value):
            raise serializers.ValidationError(f"{value!r} is not an IANA time zone name (e.g. Europe/Paris).")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance: Training | None = self.instance
        start = attrs.get("start", instance.start if instance else None)
        end = attrs.get("end", instance.end if instance else None)
        if start is not None and end is not None and end <= start:
            raise serializers.ValidationError({"end": "must be after start."})
        if instance is None and "time_zone" not in attrs and "team" in attrs:
            attrs["time_zone"] = attrs["team"].time_zone
        if instance is None and attrs.get("cancelled"):
            raise serializers.ValidationError({"cancelled": "a new training cannot be cancelled."})
        team: Team | None = attrs.get("team", instance.team if instance else None)
        players: list[Player] | None = attrs.get("players")
        if instance is not None and team is not None and team != instance.team and players is None:
            players = list(Player.objects.filter(invitations__training=instance))
        if team is not None and players is not None:
            members = active_member_ids(team)
            outsiders = sorted({p.pk for p in players} - members)
            if outsiders:
                raise serializers.ValidationError(
                    {"players": f"not active members of the team: {outsiders}."}
                )
            if len({p.pk for p in players}) != len(players):
                raise serializers.ValidationError({"players": "a player is listed twice."})
        return attrs


_Row = TypeVar("_Row", Player, Invitation)


def _on_the_list(found: _Row | None) -> _Row:
    """What a player id found on the training's player list; a field error when it found nothing."""
    if found is None:
        raise serializers.ValidationError("not on this training's player list.")
    return found


class AnswerInputSerializer(StrictSerializer):
    player = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    phase = serializers.ChoiceField(choices=kinds.live(kinds.questionnaire_choices))
    answers = AnswersField()  # an empty answer is refused (trainings/answers/questionnaires.py)
    answered_at = AwareDateTimeField(required=False)

    def validate_player(self, value: int) -> Player:
        training: Training = self.context["training"]
        return _on_the_list(Player.objects.filter(pk=value, invitations__training=training).first())


class AnswerSerializer(serializers.Serializer):
    player = serializers.IntegerField(source="player_id")
    phase = serializers.CharField()
    answered_at = serializers.DateTimeField()
    answers = serializers.JSONField()


class InvitationResponseSerializer(StrictSerializer):
    player = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    status = serializers.ChoiceField(choices=[InvitationStatus.ACCEPTED, InvitationStatus.DENIED])

    def validate_player(self, value: int) -> Invitation:
        training: Training = self.context["training"]
        return _on_the_list(Invitation.objects.filter(training=training, player_id=value).first())


class TimelineEntrySerializer(serializers.Serializer):
    occurrence_id = serializers.IntegerField()
    rule = serializers.CharField(help_text="Rule slug.")
    kind = serializers.CharField()
    fire_at = serializers.DateTimeField()
    fire_at_local = serializers.SerializerMethodField(help_text="`fire_at` in the training's time zone.")
    status = serializers.CharField(help_text="scheduled, claimed, delivered, failed, cancelled or skipped.")
    attempts = serializers.IntegerField()
    outcome = serializers.CharField(allow_null=True, help_text="What the handler found when it fired.")
    recipients = serializers.IntegerField(allow_null=True, help_text="Players still pending when it fired.")
    players_reached = serializers.IntegerField(
        help_text="Players whose push a device accepted (the gateway's records), not merely published."
    )
    players_standin = serializers.IntegerField(
        help_text="Of players_reached, those only a stand-in (logging, webhook) accepted: nothing reached a "
        "phone."
    )
    pushes_published = serializers.IntegerField(help_text="Pushes published to the push queue.")

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_fire_at_local(self, entry: Any) -> str:
        zone = self.context.get("zone")
        return entry.fire_at.astimezone(zone).isoformat() if zone else entry.fire_at.isoformat()


class ReminderTemplateSerializer(serializers.Serializer):
    language = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()


@extend_schema_field(
    {"oneOf": [{"type": "string", "enum": [ALL]}, {"type": "array", "items": {"type": "string"}}]}
)
class CriticalOffsetsField(serializers.JSONField):
    """A rule's critical offsets (trainings/reminding/critical.py): "all", or a list of its offsets."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[validate_critical_offsets], **kwargs)


class ReminderRuleSerializer(serializers.ModelSerializer):
    templates = ReminderTemplateSerializer(many=True, read_only=True)
    critical_offsets = CriticalOffsetsField(read_only=True)

    class Meta:
        model = ReminderRule
        fields = ["slug", "kind", "offsets", "active", "critical_offsets", "templates", "updated_at"]
        read_only_fields = fields


class ReminderRuleInputSerializer(StrictSerializer):
    unknown_field_hints = {"critical": 'replaced by critical_offsets: "all" or ["15m"].'}

    kind = serializers.ChoiceField(choices=kinds.live(kinds.any_rule_choices), required=False)
    offsets = serializers.ListField(
        child=serializers.CharField(max_length=10),
        required=False,
        allow_empty=False,
        max_length=100,
        help_text='Offsets such as "90m", "6h", "3d", counted from the training time of the rule\'s kind ('
        + "; ".join(f"{kind.code}: {kind.when}" for kind in kinds.rule_kinds())
        + "). Minutes and hours are exact durations; days keep the wall time in the zone.",
    )
    active = serializers.BooleanField(required=False)
    critical_offsets = CriticalOffsetsField(
        required=False,
        help_text="The reminders players' mute and quiet hours cannot hide: some of the rule's offsets "
        '(["15m"]; a running experiment\'s variants\' offsets too), "all", or [] for none.',
    )

    def validate_offsets(self, value: list[str]) -> list[str]:
        try:
            parse_offsets(value)
        except OffsetError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value


# --- Devices (trainings/devices/registration.py) ----------------------------------------------------------


class DeviceSerializer(serializers.ModelSerializer):
    """A device as its owner sees it; others (coaches, operators) get `token` shortened."""

    enabled = serializers.BooleanField(read_only=True)

    class Meta:
        model = Device
        fields = ["id", "player", "guardian", "coach", "platform", "provider", "token", "app_id", "enabled",
                  "created_at", "last_success_at", "disabled_at", "disabled_reason"]  # fmt: skip
        read_only_fields = fields

    def to_representation(self, instance: Device) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not self.context.get("owner"):
            data["token"] = token_preview(instance.token)
        return data


class DeviceInputSerializer(StrictSerializer):
    platform = serializers.ChoiceField(choices=kinds.live(device_platform_choices))
    provider = serializers.ChoiceField(choices=kinds.live(device_provider_choices))
    token = serializers.CharField(max_length=4096, trim_whitespace=False)
    app_id = serializers.CharField(
        max_length=255,
        required=False,
        default="",
        allow_blank=True,
        help_text="APNs topic (bundle id) when it differs from PUSH_APNS_TOPIC.",
    )

    def validate_token(self, value: str) -> str:
        if not value or any(c.isspace() or not c.isprintable() for c in value):
            raise serializers.ValidationError("a non-empty token without spaces or control characters.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        channel = BY_NAME[attrs["provider"]]
        if attrs["platform"] not in channel.platforms:
            where = " or ".join(p for p in PLATFORMS if p in channel.platforms)
            raise serializers.ValidationError({"platform": f"{channel.name} devices are {where}."})
        error = channel.module().address_error(attrs["token"])
        if error:
            raise serializers.ValidationError({"token": error})
        return attrs


# --- Players' own preferences (trainings/reminding/preferences.py) ------------------------------------------


class KindPreferenceSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=kinds.live(kinds.rule_choices))
    channels = serializers.ChoiceField(
        choices=ChannelChoice.choices,
        required=False,
        help_text="default: push, email when no device is reached; push: never email; email: email instead "
        "of push; both.",
    )
    muted = serializers.BooleanField(
        required=False,
        help_text="No reminder of this kind; one an operator marked critical (a rule's offset) still comes.",
    )


class PreferencesSerializer(StrictSerializer):
    """A player's own preferences: per reminder kind, and their quiet hours (else their team's)."""

    kinds = KindPreferenceSerializer(many=True, required=False)
    quiet_start = serializers.TimeField(allow_null=True, required=False, help_text="Local time, e.g. 22:00.")
    quiet_end = serializers.TimeField(allow_null=True, required=False, help_text="Local time, e.g. 07:00.")

    def validate_kinds(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kinds = [item["kind"] for item in value]
        if len(set(kinds)) != len(kinds):
            raise serializers.ValidationError("a kind is listed twice.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("quiet_start" in attrs) != ("quiet_end" in attrs) or (
            (attrs.get("quiet_start") is None) != (attrs.get("quiet_end") is None)
        ):
            raise serializers.ValidationError({"quiet_end": "quiet_start and quiet_end go together."})
        return attrs
