"""The analytics' query (shared by the API and the admin page) and the API's response shapes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from trainings.analytics.figures import MAX_DAYS, Effectiveness, OffsetFigures, PlayerFigures, Scope
from trainings.planning import kinds
from trainings.selectors import teams_visible_to, user_sees_all_teams

DEFAULT_DAYS = 28


class AnalyticsQuerySerializer(serializers.Serializer):
    """A period of local training days and a scope. The user goes in the context (`user`)."""

    since = serializers.DateField(
        required=False, help_text=f"First training day (default: {DEFAULT_DAYS - 1} days before `until`)."
    )
    until = serializers.DateField(required=False, help_text="Last training day, included (default: today).")
    team = serializers.IntegerField(
        required=False, min_value=1, help_text="One of your teams (default: every team you may see)."
    )
    kind = serializers.ChoiceField(
        choices=kinds.live(kinds.rule_choices), required=False, help_text="Only this reminder kind."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        until = attrs.get("until") or timezone.localdate()
        try:
            since = attrs.get("since") or until - timedelta(days=DEFAULT_DAYS - 1)
        except OverflowError:  # until in the first days of year 1
            raise serializers.ValidationError({"until": "too early: give since as well."}) from None
        if until < since:
            raise serializers.ValidationError({"until": f"{until} is before since ({since})."})
        days = (until - since).days + 1
        if days > MAX_DAYS:
            raise serializers.ValidationError({"since": f"the period is {days} days; at most {MAX_DAYS}."})
        user = self.context["user"]
        visible = teams_visible_to(user).order_by("name", "pk")
        if "team" in attrs:
            team = visible.filter(pk=attrs["team"]).first()
            if team is None:
                raise serializers.ValidationError(
                    {"team": "No team with this id among the teams you may see."}
                )
            scope = Scope((team,))
        elif user_sees_all_teams(user):
            scope = Scope(None)
        else:
            scope = Scope(tuple(visible))
        return {"since": since, "until": until, "scope": scope, "kind": attrs.get("kind") or None}


class BandSerializer(serializers.Serializer):
    low = serializers.IntegerField(help_text="minutes, exclusive (0: from 0 inclusive)")
    high = serializers.IntegerField(allow_null=True, help_text="minutes, inclusive (null: no upper bound)")


class OffsetFiguresSerializer(serializers.Serializer):
    kind = serializers.CharField()
    kind_label = serializers.CharField()
    rule = serializers.CharField(help_text="The rule's slug.")
    offset = serializers.CharField(help_text="e.g. 90m: the reminder that many minutes from the anchor.")
    last = serializers.BooleanField(help_text="The rule's last reminder.")
    sent = serializers.IntegerField(help_text="Pushes published.")
    reached = serializers.IntegerField(help_text="Pushes a device or an inbox accepted.")
    answered = serializers.IntegerField(help_text="Answers credited to these reminders (attribution).")
    answered_15 = serializers.IntegerField(help_text="... within 15 min of the reminder.")
    answered_60 = serializers.IntegerField(help_text="... within 60 min of the reminder.")
    answered_in_window = serializers.IntegerField(help_text="... before the kind's window closed.")
    reached_rate = serializers.FloatField(allow_null=True, help_text="reached / sent")
    answer_rate = serializers.FloatField(allow_null=True, help_text="answered / reached")
    answered_15_rate = serializers.FloatField(allow_null=True, help_text="answered_15 / reached")
    answered_60_rate = serializers.FloatField(allow_null=True, help_text="answered_60 / reached")
    answered_in_window_rate = serializers.FloatField(
        allow_null=True, help_text="answered_in_window / reached"
    )
    median_minutes = BandSerializer(allow_null=True, help_text="The band of the median time to answer.")
    curve = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2),
        help_text="[minutes, share of reached reminders answered within them], the time-to-answer curve.",
    )


class UnremindedSerializer(serializers.Serializer):
    kind = serializers.CharField()
    kind_label = serializers.CharField()
    answers = serializers.IntegerField(help_text="Answers no reminder had reached before.")
    in_window = serializers.IntegerField()


class EffectivenessSerializer(serializers.Serializer):
    since = serializers.DateField()
    until = serializers.DateField()
    teams = serializers.CharField(help_text="The teams the figures cover.")
    offsets = OffsetFiguresSerializer(many=True)
    unreminded = UnremindedSerializer(many=True)


class PlayerFiguresSerializer(serializers.Serializer):
    player = serializers.IntegerField()
    name = serializers.CharField()
    asked = serializers.IntegerField(help_text="(training, kind) pairs reminded or answered.")
    before_reminder = serializers.IntegerField(help_text="Answered before any reminder reached them.")
    after_reminder = serializers.IntegerField(help_text="Answered after a reminder before the last.")
    after_last = serializers.IntegerField(help_text="Answered only after the rule's last reminder.")
    never = serializers.IntegerField(help_text="Reminded, and no answer before the window closed.")
    late_or_never_rate = serializers.FloatField(allow_null=True, help_text="(after_last + never) / asked")
    chronic = serializers.BooleanField(help_text="Asked at least 3 times, late or never at least half.")


class PlayersSerializer(serializers.Serializer):
    since = serializers.DateField()
    until = serializers.DateField()
    teams = serializers.CharField()
    players = PlayerFiguresSerializer(many=True)


def offset_data(row: OffsetFigures) -> dict[str, Any]:
    f = row.figures
    median = row.median
    return {
        "kind": row.kind, "kind_label": row.kind_label, "rule": row.rule, "offset": row.offset,
        "last": row.last, "sent": f.sent, "reached": f.reached, "answered": f.answered,
        "answered_15": f.within_15, "answered_60": f.within_60, "answered_in_window": f.in_window,
        "reached_rate": row.reached_rate, "answer_rate": row.answer_rate,
        "answered_15_rate": row.within_15_rate, "answered_60_rate": row.within_60_rate,
        "answered_in_window_rate": row.in_window_rate,
        "median_minutes": {"low": median[0], "high": median[1]} if median else None,
        "curve": [[minutes, round(value, 4)] for minutes, value in row.curve()],
    }  # fmt: skip


def effectiveness_data(result: Effectiveness, query: dict[str, Any]) -> dict[str, Any]:
    return {
        "since": query["since"],
        "until": query["until"],
        "teams": query["scope"].label,
        "offsets": [offset_data(row) for row in result.offsets],
        "unreminded": [
            {"kind": row.kind, "kind_label": row.kind_label, "answers": row.figures.answered,
             "in_window": row.figures.in_window}
            for row in result.unreminded
        ],
    }  # fmt: skip


def player_data(row: PlayerFigures) -> dict[str, Any]:
    f = row.figures
    return {
        "player": row.player, "name": row.name, "asked": f.asked, "before_reminder": f.before_reminder,
        "after_reminder": f.after_reminder, "after_last": f.after_last, "never": f.never,
        "late_or_never_rate": row.late_or_never_rate, "chronic": row.chronic,
    }  # fmt: skip
