"""A pre-training questionnaire whose players' answering is known, built as the service leaves it: a push
per reminder each pending player got (published), the gateway's send rows (accepted, no device, token
dead), and the answers. `EXPECTED` is what the analytics must report for it, worked out by hand.

Reminders at 90, 75, 60, 45, 30 and 15 min before the start S; a player's pushes stop once they answer.
- Ana answers at S-100, before any reminder.
- Ben: 90 and 75 reached at their instant; answers at S-70, 5 min after the 2nd reminder.
- Cleo never answers: all six reached.
- Dan has no device: 90 to 45 published, none reached; answers at S-40 (nobody reminded him).
- Eva: all six reached; answers at S-10, 5 min after the last one.
- Finn: 90 reached; answers at S-88, 2 min after it.
- Gus: each reached a minute after its instant, 90 to 30; answers at S-25 (4 min after 30's arrival).
- Hugo: 90 reached, 75 and 60 not (token dead); answers at S-50, 40 min after the 90.
- Ida: all six reached; answers at S+10, after the window closed (start): 25 min after the 15.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from delivery.models import PushSend
from trainings.models import Player, Push, PushStatus, QuestionnaireAnswer, ReminderRule, Team
from trainings.models import Training as TrainingModel

OFFSETS = (90, 75, 60, 45, 30, 15)
# name: (minutes before S of the answer or None, {offset: reached delay in minutes or None (not reached)})
PLAYERS: dict[str, tuple[int | None, dict[int, int | None]]] = {
    "Ana": (100, {}),
    "Ben": (70, {90: 0, 75: 0}),
    "Cleo": (None, dict.fromkeys(OFFSETS, 0)),
    "Dan": (40, dict.fromkeys((90, 75, 60, 45))),
    "Eva": (10, dict.fromkeys(OFFSETS, 0)),
    "Finn": (88, {90: 0}),
    "Gus": (25, dict.fromkeys((90, 75, 60, 45, 30), 1)),
    "Hugo": (50, {90: 0, 75: None, 60: None}),
    "Ida": (-10, dict.fromkeys(OFFSETS, 0)),
}

# offset: (sent, reached, answered, within 15, within 60, in window, median band low: (low, low + 1] min)
EXPECTED: dict[str, tuple[int, int, int, int, int, int, int | None]] = {
    "90m": (8, 7, 2, 1, 2, 2, 1),
    "75m": (7, 5, 1, 1, 1, 1, 4),
    "60m": (6, 4, 0, 0, 0, 0, None),
    "45m": (5, 4, 0, 0, 0, 0, None),
    "30m": (4, 4, 1, 1, 1, 1, 3),
    "15m": (3, 3, 2, 1, 2, 1, 4),
}
EXPECTED_UNREMINDED = 2  # Ana, Dan
# name: (before a reminder, after one, after the last, never)
EXPECTED_PLAYERS = {
    "Ana": (1, 0, 0, 0),
    "Ben": (0, 1, 0, 0),
    "Cleo": (0, 0, 0, 1),
    "Dan": (1, 0, 0, 0),
    "Eva": (0, 0, 1, 0),
    "Finn": (0, 1, 0, 0),
    "Gus": (0, 1, 0, 0),
    "Hugo": (0, 1, 0, 0),
    "Ida": (0, 0, 0, 1),
}


def known_training(team: Team, start: dt.datetime, *, prefix: str = "") -> TrainingModel:
    """The training above for `team`, its players made members (names prefixed by `prefix`)."""
    from tests.factories import MembershipFactory, PlayerFactory

    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    training = TrainingModel.objects.create(
        team=team, title="Known", start=start, end=start + dt.timedelta(minutes=90), time_zone="Europe/Paris"
    )
    minute = dt.timedelta(minutes=1)
    for name, (answer_before, reached) in PLAYERS.items():
        player = Player.objects.filter(name=prefix + name, memberships__team=team).first()
        if player is None:  # a second known training of the team asks the same players again
            player = PlayerFactory(name=prefix + name, devices=[])
            MembershipFactory(team=team, player=player)
        for offset, delay in reached.items():
            fire_at = start - offset * minute
            push = _push(training, player, rule, f"{offset}m", fire_at)
            _send(push, fire_at + (delay or 0) * minute, accepted=delay is not None)
        if answer_before is not None:
            QuestionnaireAnswer.objects.create(
                training=training, player=player, phase="PRE", answered_at=start - answer_before * minute
            )
    return training


def _push(training: TrainingModel, player: Player, rule: ReminderRule, offset: str, at: dt.datetime) -> Push:
    key = f"{training.pk}:{rule.slug}:{offset}:{player.pk}"
    return Push.objects.create(
        key=key, occurrence_key=f"{training.pk}:{rule.slug}:{offset}", training=training, player=player,
        rule=rule, kind="PRE", offset=offset, language="en", title="t", body="b", fire_at=at,
        expires_at=training.start, status=PushStatus.SENT, sent_at=at,
    )  # fmt: skip


def _send(push: Push, at: dt.datetime, *, accepted: bool) -> Any:
    status = "accepted" if accepted else ("no_device" if "Dan" in push.player.name else "token_dead")
    return PushSend.objects.create(
        push_key=push.key, device=None, player_id=push.player_id, provider="fcm" if accepted else "",
        status=status, recorded_at=at,
    )  # fmt: skip
