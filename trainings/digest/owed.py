"""Who still owes what for some trainings: the coach's digest's facts, asked of the database when it fires.

Per training and per players' kind counted before the start (the pre-training questionnaire, the
invitation) whose rule is active: how many players it asks (its audience) and who among them still owes
the answer (`Kind.pending()`, the recipient rule players' reminders use), among the active members of the
training's team; and how many declined. One query for any number of trainings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Value

from trainings.models import Invitation, InvitationStatus, Membership, ReminderRule, Training
from trainings.planning import kinds


@dataclass(frozen=True)
class Owed:
    """One kind's answer for one training: asked of `asked` players, still missing from `names`."""

    kind: str
    asked: int
    names: tuple[str, ...]  # sorted as a person reads them (case apart)


@dataclass(frozen=True)
class TrainingOwed:
    training: Training
    owed: tuple[Owed, ...] = ()  # the kinds someone still owes, in the kinds table's order
    declined: int = 0
    players: tuple[int, ...] = field(default=(), compare=False)  # who owes anything (ids)

    @property
    def owing(self) -> int:
        """Players who still owe something (a player owing two answers counts once)."""
        return len(self.players)


def kinds_counted() -> list[str]:
    """The players' kinds a digest reports: answered before the start, with an active rule (one query)."""
    before = [kind.code for kind in kinds.rule_kinds() if kind.sign < 0]
    active = set(ReminderRule.objects.filter(kind__in=before, active=True).values_list("kind", flat=True))
    return [code for code in before if code in active]


def trainings_owed(trainings: Iterable[Training], codes: list[str] | None = None) -> dict[Any, TrainingOwed]:
    """What each training's players still owe, by training id (one query, plus one for the kinds)."""
    by_id = {training.pk: training for training in trainings}
    if not by_id:
        return {}
    codes = kinds_counted() if codes is None else codes
    member = Membership.objects.filter(
        team_id=OuterRef("training__team_id"), player_id=OuterRef("player_id"), active=True
    )
    columns: dict[str, Any] = {}
    for i, code in enumerate(codes):
        kind = kinds.of(code)
        columns[f"asked_{i}"] = (
            ExpressionWrapper(kind.audience, BooleanField()) if kind.audience else Value(True)
        )
        columns[f"owes_{i}"] = ExpressionWrapper(kind.pending(), BooleanField())
    rows = (
        Invitation.objects.filter(Exists(member), training_id__in=list(by_id))
        .annotate(**columns)
        .values_list("training_id", "player_id", "player__name", "status", *columns)
    )
    asked: dict[tuple[Any, str], int] = {}
    names: dict[tuple[Any, str], list[str]] = {}
    declined: dict[Any, int] = {}
    owing: dict[Any, set[int]] = {}
    for training_id, player_id, name, status, *flags in rows:
        if status == InvitationStatus.DENIED:
            declined[training_id] = declined.get(training_id, 0) + 1
        for i, code in enumerate(codes):
            if flags[2 * i]:
                asked[training_id, code] = asked.get((training_id, code), 0) + 1
            if flags[2 * i + 1]:
                names.setdefault((training_id, code), []).append(name)
                owing.setdefault(training_id, set()).add(player_id)
    return {
        pk: TrainingOwed(
            training=training,
            owed=tuple(
                Owed(code, asked.get((pk, code), 0), tuple(sorted(names[pk, code], key=_reading_order)))
                for code in codes
                if names.get((pk, code))
            ),
            declined=declined.get(pk, 0),
            players=tuple(sorted(owing.get(pk, ()))),
        )
        for pk, training in by_id.items()
    }


def _reading_order(name: str) -> tuple[str, str]:
    return name.casefold(), name
