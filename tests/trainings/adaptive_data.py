"""An adaptive experiment's history made as the service makes it: one team's players, one past training a
day, each training's players drawn into arms as firing draws them (three hours before its start, the
newest snapshot's posteriors), then answering in time with their arm's probability."""

from __future__ import annotations

import datetime as dt
import random

from django.utils import timezone

from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from trainings.experiments.adaptive import experiment_arms
from trainings.models import Experiment, ExperimentStatus, Player, QuestionnaireAnswer, ReminderRule, Training

MINUTE = dt.timedelta(minutes=1)


def _answered(training: Training, drawn: dict[int, int], rates: dict[int, float], rng: random.Random) -> None:
    QuestionnaireAnswer.objects.bulk_create(
        QuestionnaireAnswer(
            training=training, player_id=player, phase="PRE", answered_at=training.start - 10 * MINUTE
        )
        for player, arm in drawn.items()
        if rng.random() < rates[arm]
    )


def simulated(
    experiment: Experiment,
    rule: ReminderRule,
    rates: dict[int, float],
    *,
    players: int,
    trainings: int,
    seed: int,
) -> int:
    """Up to `trainings` trainings (fewer when the stopping rule ends the experiment); how many were made.
    The experiment is moved to have started the day before the first."""
    base = (timezone.now() - dt.timedelta(days=trainings + 5)).replace(microsecond=0)
    Experiment.objects.filter(pk=experiment.pk).update(started_at=base - dt.timedelta(days=1))
    team = TeamFactory()
    squad: list[Player] = [
        MembershipFactory(team=team, player=PlayerFactory()).player for _ in range(players)
    ]
    rng, count = random.Random(seed), len(rates)
    for k in range(trainings):
        experiment.refresh_from_db()
        if experiment.status != ExperimentStatus.RUNNING:
            return k
        training = training_made(team, base + k * dt.timedelta(days=1))
        arms = experiment_arms(
            [(rule, training.pk, [p.pk for p in squad])], now=training.start - 180 * MINUTE
        )
        drawn = {p.pk: arms.of(experiment.pk, training.pk, p.pk, count) for p in squad}
        _answered(training, drawn, rates, rng)
    return trainings
