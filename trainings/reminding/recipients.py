"""Who a reminder goes to: the recipient rule, one definition for a due minute (set-based, many trainings
at once) and for one training (a coach's "remind now", a held push's release).

1. The pending players: the active members whose invitation meets the kind's recipient rule
   (`Kind.pending()` in trainings/planning/kinds.py: asked, and the answer still missing).
2. Their recipients: the player, their guardians, or both, as the training's team says (`Team.reminds`).
   An answer by any of them is the player's answer, so step 1 drops all of a player's recipients at once.
3. Minus who was already reminded at this offset (`recipients_reminded`): nobody gets the same reminder
   twice, a guardian of two players once per player.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time
from typing import Any, NamedTuple

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, QuerySet

from trainings.models import (
    Guardian,
    Guardianship,
    Invitation,
    Membership,
    Player,
    Push,
    PushStatus,
    ReminderRule,
    Reminds,
    Training,
)
from trainings.planning import kinds


def reminder_recipients(*, training: Training, rule: ReminderRule) -> QuerySet[Player]:
    """The players this rule still chases for this training, asked of the database at fire time: the
    active team members whose invitation meets the kind's recipient rule (`Kind.pending`). Step 1 only:
    `reminder_addressees` says who the reminders go to."""
    chased = Invitation.objects.filter(training=training, player=OuterRef("pk")).filter(
        kinds.of(rule.kind).pending()
    )
    players = Player.objects.filter(memberships__team_id=training.team_id, memberships__active=True)
    return players.filter(Exists(chased))


class Recipient(NamedTuple):
    """Someone a reminder goes to for a player it still chases, with what their push needs (no model
    instance: a due minute has thousands of them). `pk` is the player's; language, zone and quiet hours
    are the recipient's own: the player's, or the guardian's when `guardian` names one."""

    pk: int
    language: str
    time_zone: str
    quiet_start: time | None
    quiet_end: time | None
    guardian: int | None = None


def reminder_recipients_many(pairs: Iterable[tuple[Training, str]]) -> dict[tuple[Any, str], list[Recipient]]:
    """Who each (training, rule kind) pair's reminder goes to, keyed by (training id, kind): the batched
    due-minute path, and (one pair) `reminder_addressees`, the per-training one.

    One row per invitation of these trainings whose player is an active member of the training's team, with
    a column per kind asked saying whether it chases them: each kind's `pending()`, the condition
    `reminder_recipients` asks. Each chased player then goes to the recipients their team's `reminds` says
    (`recipients_expand`: one more query, for the guardians, when a team reminds them). Players come
    ordered by id, each followed by their guardians.
    """
    wanted = {(training.pk, kind) for training, kind in pairs}
    result: dict[tuple[Any, str], list[Recipient]] = {pair: [] for pair in wanted}
    if not wanted:
        return result
    codes = sorted({kind for _, kind in wanted})
    member = Membership.objects.filter(
        team_id=OuterRef("training__team_id"), player_id=OuterRef("player_id"), active=True
    )
    chased = {
        f"chased_{code.lower()}": ExpressionWrapper(kinds.of(code).pending(), BooleanField())
        for code in codes
    }
    rows = (
        Invitation.objects.filter(Exists(member), training_id__in={pk for pk, _ in wanted})
        .annotate(**chased)
        .order_by("player_id")
        .values_list(
            "training_id",
            "training__team__reminds",
            *chased,
            "player_id",
            "player__language",
            "player__time_zone",
            "player__quiet_start",
            "player__quiet_end",
        )
    )
    kinds_of: dict[Any, list[tuple[str, int]]] = {}
    for pk, code in wanted:
        kinds_of.setdefault(pk, []).append((code, 2 + codes.index(code)))
    reminds: dict[Any, str] = {}
    for row in rows:
        reminds[row[0]] = row[1]
        recipient: Recipient | None = None
        for code, column in kinds_of[row[0]]:
            if row[column]:
                recipient = recipient or Recipient(*row[-5:])
                result[row[0], code].append(recipient)
    return recipients_expand(result, reminds)


def recipients_expand(
    players: dict[tuple[Any, str], list[Recipient]], reminds: dict[Any, str]
) -> dict[tuple[Any, str], list[Recipient]]:
    """The recipient rule's last step: each chased player goes to whom their training's team reminds
    (`Team.reminds`, by training id): the player, their guardians, or both. A player with no guardian is
    reminded themself whatever the setting, so nobody's reminder silently goes nowhere.

    One query, only when a team reminds guardians: the guardians of the players chased there.
    """
    asked = {pk for pk, value in reminds.items() if Reminds(value) != Reminds.PLAYER}
    if not asked:
        return players
    chased = {
        r.pk for (training_id, _), recipients in players.items() if training_id in asked for r in recipients
    }
    guardians: dict[int, list[Recipient]] = {}
    rows = (
        Guardianship.objects.filter(player_id__in=chased)
        .order_by("player_id", "guardian_id")
        .values_list(
            "player_id",
            "guardian__language",
            "guardian__time_zone",
            "guardian__quiet_start",
            "guardian__quiet_end",
            "guardian_id",
        )
    )
    for row in rows:
        guardians.setdefault(row[0], []).append(Recipient(*row))
    expanded: dict[tuple[Any, str], list[Recipient]] = {}
    for (training_id, code), recipients in players.items():
        if training_id not in asked:
            expanded[training_id, code] = recipients
            continue
        both = Reminds(reminds[training_id]) == Reminds.BOTH
        expanded[training_id, code] = [
            person
            for player in recipients
            for person in (
                [player, *guardians.get(player.pk, ())] if both else guardians.get(player.pk) or [player]
            )
        ]
    return expanded


def reminder_addressees(*, training: Training, rule: ReminderRule) -> list[Recipient]:
    """Who this rule's reminder goes to now for this training (the coach's "remind now"): the same
    definition as a due minute's, for one training."""
    return reminder_recipients_many([(training, rule.kind)])[training.pk, rule.kind]


# (training, rule, offset) -> (occurrence key, (player, guardian), expiry) of the pushes made there.
Reminded = dict[tuple[Any, int, str], list[tuple[str, tuple[int, int | None], datetime | None]]]


def recipients_reminded(triples: set[tuple[Any, int, str]]) -> Reminded:
    """The pushes (occurrence key, recipient, expiry) of each (training, rule, offset), one query.

    A recipient this rule already reminded at this offset for this training, by another occurrence, before
    the training moved by less than TRAININGS_MOVE_REPEAT_MINUTES (the earlier push's expiry says where
    the training was then), is not reminded again: trainings.reminding.firing applies that to these rows.
    """
    if not triples:
        return {}
    # Each column on its own list (one OR per triple costs more to build than the query takes); the few
    # rows of another combination of them are dropped here.
    trainings, rules, offsets = (sorted(set(column), key=str) for column in zip(*triples, strict=True))
    rows = (
        Push.objects.filter(training_id__in=trainings, rule_id__in=rules, offset__in=offsets)
        .exclude(status__in=[PushStatus.WITHDRAWN, PushStatus.SKIPPED])
        .values_list(
            "training_id", "rule_id", "offset", "occurrence_key", "player_id", "guardian_id", "expires_at"
        )
    )
    reminded: Reminded = {}
    for training_id, rule_id, offset, occurrence_key, player_id, guardian_id, expires_at in rows:
        if (training_id, rule_id, offset) in triples:
            reminded.setdefault((training_id, rule_id, offset), []).append(
                (occurrence_key, (player_id, guardian_id), expires_at)
            )
    return reminded


def recipients_reached_by_rule(
    *, training_id: Any, rule_id: int, besides: str
) -> set[tuple[int, int | None]]:
    """The recipients (player, guardian) a push of this rule for this training reached or will reach, from
    an occurrence other than `besides` (its key), at any offset; one query. The invitation at creation
    stands in for the ones missed: whoever had one of them does not get it (trainings.reminding.firing)."""
    return set(
        Push.objects.filter(training_id=training_id, rule_id=rule_id)
        .exclude(occurrence_key=besides)
        .exclude(status__in=[PushStatus.WITHDRAWN, PushStatus.SKIPPED])
        .values_list("player_id", "guardian_id")
    )


def recipients_names(recipients: Iterable[Recipient]) -> tuple[str, ...]:
    """The recipients as a coach reads them, sorted: "Anna", "Maria (for Anna)"; two queries."""
    recipients = list(recipients)
    players = dict(Player.objects.filter(pk__in={r.pk for r in recipients}).values_list("pk", "name"))
    guardians = dict(
        Guardian.objects.filter(pk__in={r.guardian for r in recipients if r.guardian}).values_list(
            "pk", "name"
        )
    )
    return tuple(
        sorted(
            players.get(r.pk, "?")
            if r.guardian is None
            else f"{guardians.get(r.guardian, '?')} (for {players.get(r.pk, '?')})"
            for r in recipients
        )
    )
