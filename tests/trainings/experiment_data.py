"""Players of an experiment's two arms and a past training whose answering is known, built as the service
leaves it: the pushes each arm's reminders sent a player up to their answer, and the answers.

Behaviours: "before" answers 150 min before the start (before any reminder of either arm), "second" 5 min
after the arm's second reminder, "never" not at all, "late" 10 min after the start (the window closed at
the start).
"""

from __future__ import annotations

import datetime as dt

from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from trainings.experiments.assignment import arm_of
from trainings.models import (
    Experiment,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    Team,
    Training,
)

VARIANT = ["120m", "45m", "15m"]  # against the seeded pre-questionnaire's 90/75/60/45/30/15
ARM_MINUTES = {0: [90, 75, 60, 45, 30, 15], 1: [120, 45, 15]}
MINUTE = dt.timedelta(minutes=1)


def squad(team: Team, experiment: Experiment, per_arm: int) -> dict[int, list[Player]]:
    """Members of `team` made until each of the experiment's two arms has `per_arm` (players are created
    one by one; a player whose arm is full is not made a member)."""
    arms: dict[int, list[Player]] = {0: [], 1: []}
    while min(len(players) for players in arms.values()) < per_arm:
        player = PlayerFactory()
        arm = arm_of(experiment.pk, player.pk, 2)
        if len(arms[arm]) < per_arm:
            MembershipFactory(team=team, player=player)
            arms[arm].append(player)
    return arms


def known_training(
    experiment: Experiment, rule: ReminderRule, start: dt.datetime, behaviours: dict[int, list[str]]
) -> Training:
    """A training at `start` of a new team whose players answer as `behaviours` says per arm."""
    team = TeamFactory()
    players = squad(team, experiment, per_arm=max(len(b) for b in behaviours.values()))
    training = training_made(team, start)
    for arm, chosen in behaviours.items():
        minutes = ARM_MINUTES[arm]
        for player, behaviour in zip(players[arm], chosen, strict=False):
            answer = {
                "before": start - 150 * MINUTE,
                "second": start - (minutes[1] - 5) * MINUTE,
                "never": None,
                "late": start + 10 * MINUTE,
            }[behaviour]
            for offset in minutes:
                at = start - offset * MINUTE
                if answer is None or at < answer:
                    Push.objects.create(
                        key=f"k-{training.pk}-{player.pk}-{offset}",
                        occurrence_key=f"o-{training.pk}-{offset}", training=training, player=player,
                        rule=rule, kind="PRE", offset=f"{offset}m", language="en", title="t", body="b",
                        fire_at=at, expires_at=start, status=PushStatus.SENT, sent_at=at,
                    )  # fmt: skip
            if answer is not None:
                QuestionnaireAnswer.objects.create(
                    training=training, player=player, phase="PRE", answered_at=answer
                )
        for player in players[arm][
            len(chosen) :
        ]:  # beyond this arm's behaviours: not on this training's list
            training.invitations.filter(player=player).delete()
    return training
