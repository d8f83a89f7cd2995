"""Adaptive timing experiments (`mode: "adaptive"`): each training's players are drawn into arms by Thompson
sampling on the arms' answer rates so far, and the experiment ends itself when the stopping rule is met.

- When a rule's reminders first meet a player on a training (firing, `experiment_arms`), the player's arm
  is drawn from the newest snapshot's posteriors with a generator seeded from (experiment, training,
  player), and stored (`AdaptiveAssignment`); later instants of that training read it, never redraw.
- A snapshot (`AdaptiveSnapshot`) is the posterior at a moment: the results' units per arm (the
  trainings covered whole whose window has closed), each arm's probability of being best and the
  leader's chance that no arm beats it by more than a point (bandit.py). One is taken when a training's
  players are drawn and the newest is older than `REFRESH`; the analytics page draws them over time.
- A snapshot that meets the stopping rule ends the experiment: the leading variant is promoted (its
  offsets become the rule's), or, when the rule's own offsets lead, the experiment stops.
The arms' offsets are checked at the start (adaptive_checks.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

from django.core.exceptions import ValidationError
from django.utils import timezone

from trainings.experiments.assignment import arm_of, assignments_record
from trainings.experiments.bandit import report, seeded, thompson_arm
from trainings.experiments.control import experiment_promote, experiment_stop
from trainings.experiments.results import experiment_results
from trainings.models import Experiment, ExperimentStatus, ReminderRule, Training
from trainings.models.experiments import AdaptiveAssignment, AdaptiveSnapshot, ExperimentMode

logger = logging.getLogger(__name__)

REFRESH = timedelta(hours=1)


@dataclass
class Arms:
    """The arm of each player a chunk's reminders meet: drawn for adaptive experiments, the hash else."""

    adaptive: set[int] = field(default_factory=set)
    drawn: dict[tuple[int, UUID, int], int] = field(default_factory=dict)  # (experiment, training, player)

    def of(self, experiment_id: int, training_id: UUID, player_id: int, count: int) -> int:
        if experiment_id in self.adaptive:
            return self.drawn[experiment_id, training_id, player_id]
        return arm_of(experiment_id, player_id, count)

    def record(self, met: Iterable[tuple[ReminderRule, list[int]]], *, now: datetime) -> None:
        """Record the fixed experiments' arms of the players met (adaptive ones are stored when drawn)."""
        for rule, players in met:
            if rule.experiment_id is not None and rule.experiment_id not in self.adaptive and players:
                assignments_record(rule.experiment_id, players, arms=len(rule.arm_offsets()), now=now)


def experiment_arms(
    met: Iterable[tuple[ReminderRule, UUID, Iterable[int]]], *, now: datetime | None = None
) -> Arms:
    """The arms of the players (rule, training id, player ids) meets, drawing and storing those of
    adaptive experiments not drawn yet. A fixed number of queries per chunk, plus a snapshot per
    adaptive experiment whose newest is older than REFRESH."""
    wanted: dict[tuple[int, UUID], set[int]] = {}
    for rule, training_id, players in met:
        if rule.experiment_id is not None:
            wanted.setdefault((rule.experiment_id, training_id), set()).update(players)
    if not wanted:
        return Arms()
    experiments = {
        e.pk: e
        for e in Experiment.objects.filter(pk__in={e for e, _t in wanted}, mode=ExperimentMode.ADAPTIVE)
        .select_related("rule")
        .prefetch_related("variants")
    }
    arms = Arms(adaptive=set(experiments))
    wanted = {key: players for key, players in wanted.items() if key[0] in experiments}
    if not wanted:
        return arms
    arms.drawn = _drawn(wanted)
    missing = {
        key: sorted(p for p in players if (*key, p) not in arms.drawn) for key, players in wanted.items()
    }
    missing = {key: players for key, players in missing.items() if players}
    if not missing:
        return arms
    now = now or timezone.now()
    rows = []
    for experiment_id in sorted({e for e, _t in missing}):
        experiment = experiments[experiment_id]
        snapshot = snapshot_current(experiment, now=now)
        count = 1 + len(experiment.variants.all())
        in_time = snapshot.in_time if snapshot else [0] * count
        asked = snapshot.asked if snapshot else [0] * count
        for (e, training_id), players in sorted(missing.items()):
            if e != experiment_id:
                continue
            for player_id in players:
                arm = thompson_arm(seeded("adaptive", e, training_id, player_id), in_time, asked)
                rows.append(AdaptiveAssignment(experiment_id=e, training_id=training_id, player_id=player_id,
                                               arm=arm, assigned_at=now, snapshot=snapshot))  # fmt: skip
    AdaptiveAssignment.objects.bulk_create(rows, ignore_conflicts=True, batch_size=5000)
    arms.drawn.update(_drawn(missing))  # a concurrent worker's draw, stored first, is the one
    return arms


class _Due(Protocol):
    @property
    def rule(self) -> ReminderRule: ...
    @property
    def training(self) -> Training: ...
    @property
    def at_creation(self) -> bool: ...


class _Person(Protocol):
    @property
    def pk(self) -> int: ...


def chunk_arms(dues: Iterable[_Due], pending: Mapping[tuple[UUID, str], Sequence[_Person]]) -> Arms:
    """`experiment_arms` for a firing chunk: each occurrence's pending players (the invitation at
    creation goes to every arm, so it draws nobody)."""
    return experiment_arms(
        (d.rule, d.training.pk, [p.pk for p in pending[d.training.pk, d.rule.kind]])
        for d in dues
        if not d.at_creation
    )


def _drawn(wanted: Mapping[tuple[int, UUID], Iterable[int]]) -> dict[tuple[int, UUID, int], int]:
    rows = AdaptiveAssignment.objects.filter(
        experiment_id__in={e for e, _t in wanted}, training_id__in={t for _e, t in wanted}
    ).values_list("experiment_id", "training_id", "player_id", "arm")
    keys = {(e, t, p) for (e, t), players in wanted.items() for p in players}
    return {(e, t, p): arm for e, t, p, arm in rows if (e, t, p) in keys}


def snapshot_current(experiment: Experiment, *, now: datetime | None = None) -> AdaptiveSnapshot | None:
    """The newest snapshot, taken anew when older than REFRESH while the experiment runs."""
    now = now or timezone.now()
    newest = snapshot_newest(experiment)
    if experiment.status != ExperimentStatus.RUNNING or (newest and newest.taken_at > now - REFRESH):
        return newest
    return snapshot_take(experiment, now=now)


def snapshot_newest(experiment: Experiment) -> AdaptiveSnapshot | None:
    return AdaptiveSnapshot.objects.filter(experiment=experiment).order_by("-taken_at", "-id").first()


def snapshot_take(experiment: Experiment, *, now: datetime | None = None) -> AdaptiveSnapshot:
    """The posterior now, stored; ends the experiment when it meets the stopping rule."""
    now = now or timezone.now()
    result = experiment_results(experiment, now=now)
    in_time = [arm.in_time for arm in result.arms]
    asked = [arm.asked for arm in result.arms]
    figures = report(in_time, asked, rng=seeded("report", experiment.pk, *in_time, *asked))
    decided = experiment.status == ExperimentStatus.RUNNING and figures.decided(result.trainings)
    snapshot = AdaptiveSnapshot.objects.create(
        experiment=experiment, taken_at=now, trainings=result.trainings, asked=asked, in_time=in_time,
        best=figures.best, leader=figures.leader, leader_within=figures.within, decided=decided,
    )  # fmt: skip
    if decided:
        _decide(experiment, figures.leader, now)
    return snapshot


def _decide(experiment: Experiment, leader: int, now: datetime) -> None:
    """The stopping rule is met: the leading variant's offsets become the rule's, or the rule's stay."""
    try:
        variant = experiment.variants.filter(arm=leader).first() if leader else None
        if variant is None:
            experiment_stop(experiment=experiment, now=now)
        else:
            experiment_promote(experiment=experiment, variant=variant, now=now)
    except ValidationError:  # ended meanwhile (an operator, another worker): nothing left to do
        logger.info("adaptive experiment %s had ended before its stopping rule was met", experiment.pk)
