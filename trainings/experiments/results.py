"""How each arm of an experiment did: answer rates with Wilson intervals, times to answer, sample sizes,
and each variant's difference from the rule, said plainly (significant or not yet).

The unit is one player owing one answer for one training the experiment covered whole: its reminders
could all be sent under the experiment (for reminders before the anchor, the anchor at least the longest
offset of any arm after the start; the anchor before the stop) and its answer window has closed, so the
figure will not change. Per unit: answered in time (before the kind's window closed: the start, for the
pre-training questionnaire and invitations) or not, and, for those reminded before they answered, the time
from the first reminder sent to the answer. A player's arm is their recorded assignment (the hash); in an
adaptive experiment, the arm drawn for them on that training (a player never drawn for it, because they had
answered before its first reminder under any arm, is no unit: every arm treated them alike).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from django.db.models import Case, F, OuterRef, Subquery, When
from django.utils import timezone

from trainings.experiments.assignment import arm_of
from trainings.experiments.statistics import Difference, rate_difference, wilson
from trainings.models import (
    Experiment,
    ExperimentAssignment,
    Invitation,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    Team,
    Training,
)
from trainings.models.experiments import AdaptiveAssignment, ExperimentMode
from trainings.planning import kinds
from trainings.planning.offsets import parse_stored_offsets

CONFIDENCES = (0.8, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class Outcome:
    """One player's answer for one training of the experiment."""

    player: int
    arm: int
    in_time: bool
    minutes_to_answer: float | None  # from the first reminder; None: answered before any, or not in time


@dataclass(frozen=True)
class Arm:
    arm: int
    label: str
    offsets: list[str]


@dataclass(frozen=True)
class ArmResult:
    arm: int
    label: str
    offsets: list[str]
    players: int  # distinct players with at least one unit
    asked: int  # units: (training, player) pairs
    in_time: int
    rate: float | None
    low: float  # Wilson interval of the rate
    high: float
    timed: int  # answers in time after a reminder: the sample of the median
    median_minutes: float | None
    difference: Difference | None = None  # rate minus the rule's (arm 0); None for arm 0
    verdict: str = ""


@dataclass(frozen=True)
class ExperimentResult:
    confidence: float
    trainings: int
    arms: list[ArmResult] = field(default_factory=list)


def arms_of(experiment: Experiment) -> list[Arm]:
    """The rule's arm (its offsets when the experiment started) and the variants, by arm number."""
    return [
        Arm(0, "rule", list(experiment.control_offsets)),
        *(Arm(v.arm, str(v), list(v.offsets)) for v in experiment.variants.all()),
    ]


def arms_compare(outcomes: Iterable[Outcome], arms: Sequence[Arm], confidence: float) -> list[ArmResult]:
    """Each arm's figures, and each variant against the rule. Pure."""
    by_arm: dict[int, list[Outcome]] = {arm.arm: [] for arm in arms}
    for outcome in outcomes:
        by_arm.setdefault(outcome.arm, []).append(outcome)
    counts = {a: (sum(o.in_time for o in rows), len(rows)) for a, rows in by_arm.items()}
    results = []
    for arm in arms:
        rows = by_arm[arm.arm]
        in_time, asked = counts[arm.arm]
        times = [o.minutes_to_answer for o in rows if o.minutes_to_answer is not None]
        low, high = wilson(in_time, asked, confidence)
        difference = rate_difference(counts[0], counts[arm.arm], confidence) if arm.arm else None
        results.append(
            ArmResult(
                arm=arm.arm,
                label=arm.label,
                offsets=arm.offsets,
                players=len({o.player for o in rows}),
                asked=asked,
                in_time=in_time,
                rate=in_time / asked if asked else None,
                low=low,
                high=high,
                timed=len(times),
                median_minutes=statistics.median(times) if times else None,
                difference=difference,
                verdict=verdict(arm.label, difference, confidence) if arm.arm else "",
            )
        )
    return results


def verdict(label: str, difference: Difference | None, confidence: float) -> str:
    """The comparison in one sentence a coach can act on."""
    level = f"{confidence:.0%}"
    if difference is None:
        return f"{label}: no answers to compare yet."
    points = (
        f"{100 * difference.estimate:+.1f} points against the rule ({level} interval "
        f"{100 * difference.low:+.1f} to {100 * difference.high:+.1f})"
    )
    if not difference.significant:
        return f"{label}: {points}. Not yet significant at {level}: the difference may be chance."
    better = "more" if difference.estimate > 0 else "fewer"
    return f"{label}: {points}. Significant at {level}: {better} players answer in time than with the rule."


def experiment_results(
    experiment: Experiment,
    *,
    confidence: float = 0.95,
    team: Team | None = None,
    now: datetime | None = None,
) -> ExperimentResult:
    """The experiment's figures so far (every team, or one)."""
    now = now or timezone.now()
    arms = arms_of(experiment)
    outcomes, trainings = experiment_outcomes(experiment, arms=len(arms), team=team, now=now)
    return ExperimentResult(confidence, trainings, arms_compare(outcomes, arms, confidence))


def experiment_outcomes(
    experiment: Experiment, *, arms: int, team: Team | None, now: datetime
) -> tuple[list[Outcome], int]:
    """The experiment's units (see the module's docstring) and how many trainings they come from."""
    rule = experiment.rule
    kind = kinds.of(rule.kind)
    offsets = [experiment.control_offsets, *(v.offsets for v in experiment.variants.all())]
    span = max(
        (o.approximate() for texts in offsets for o in parse_stored_offsets(texts)), default=timedelta()
    )
    begin, end = experiment.started_at, experiment.stopped_at or now
    if kind.sign < 0:
        first, last = begin + span, end
    else:
        first, last = begin, end - span
    trainings = Training.objects.filter(cancelled=False, **{f"{kind.anchor}__gte": first,
                                                            f"{kind.anchor}__lte": last})  # fmt: skip
    if team is not None:
        trainings = trainings.filter(team=team)
    closes = {t.pk: kind.closes(t) for t in trainings.only("id", "start", "end") if kind.closes(t) <= now}
    if not closes:
        return [], 0
    invitations = Invitation.objects.filter(kind.audience, training_id__in=closes)
    first_push = Push.objects.filter(
        training_id=OuterRef("training_id"), player_id=OuterRef("player_id"), rule=rule,
        guardian__isnull=True, status=PushStatus.SENT,
    ).order_by("sent_at").values("sent_at")[:1]  # fmt: skip
    if isinstance(kind.answer, kinds.Questionnaire):
        answered = QuestionnaireAnswer.objects.filter(
            training_id=OuterRef("training_id"), player_id=OuterRef("player_id"), phase=kind.answer.phase
        ).values("answered_at")[:1]
        rows = invitations.annotate(answered=Subquery(answered))
    else:  # the invitation's own response
        rows = invitations.annotate(
            answered=Case(When(status="PENDING", then=None), default=F("responded_at"))
        )
    rows = rows.annotate(reminded=Subquery(first_push))
    recorded = dict(
        ExperimentAssignment.objects.filter(experiment=experiment).values_list("player_id", "arm")
    )
    drawn = adaptive_arms_drawn(experiment, closes) if experiment.mode == ExperimentMode.ADAPTIVE else None
    outcomes, seen = [], set()
    for training_id, player_id, answered, reminded in rows.values_list(
        "training_id", "player_id", "answered", "reminded"
    ):
        if drawn is not None:  # adaptive: the arm drawn for this training; none drawn, not in the sample
            if (arm := drawn.get((training_id, player_id))) is None:
                continue
            recorded[player_id] = arm
        in_time = answered is not None and answered <= closes[training_id]
        minutes = None
        if in_time and reminded is not None and reminded <= answered:
            minutes = (answered - reminded).total_seconds() / 60
        seen.add(training_id)
        arm = recorded.get(player_id)
        outcomes.append(
            Outcome(
                player_id, arm_of(experiment.pk, player_id, arms) if arm is None else arm, in_time, minutes
            )
        )
    return outcomes, len(seen)


def adaptive_arms_drawn(experiment: Experiment, trainings: Iterable[UUID]) -> dict[tuple[UUID, int], int]:
    """The arms an adaptive experiment drew on these trainings, by (training, player)."""
    rows = AdaptiveAssignment.objects.filter(experiment=experiment, training_id__in=list(trainings))
    return {(t, p): arm for t, p, arm in rows.values_list("training_id", "player_id", "arm")}
