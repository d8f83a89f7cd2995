"""What the players answered, per question over a period: for one team, each scale question of its
questionnaires (the wellness check's four, the session RPE, a coach's own) as a series per player and the
team's mean per training, for the effectiveness page's charts (trainings/admin/analytics_charts.py).

Read from the answers themselves (one query for the team's period: a season of a team is a few thousand
answers), against the team's questionnaire as it stands: an answer to a question it no longer asks is not
charted, and a value outside the question's range today is left out rather than drawn off the chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from statistics import fmean
from zoneinfo import ZoneInfo

from trainings.answers.presets import SCALE, QuestionSpec
from trainings.answers.questionnaires import definition_of
from trainings.models import QuestionnaireAnswer, Team
from trainings.planning import kinds


@dataclass
class Series:
    """One question's answers: the trainings it was asked at (their local day) and each player's values."""

    phase: str
    question: QuestionSpec
    days: list[date] = field(default_factory=list)  # per training, in order
    players: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # name: (training index, value)

    def mean(self) -> list[tuple[int, float]]:
        """The team's mean per training, over the players who answered it."""
        values: dict[int, list[int]] = {}
        for points in self.players.values():
            for index, value in points:
                values.setdefault(index, []).append(value)
        return [(index, fmean(given)) for index, given in sorted(values.items())]


def answers_over_time(team: Team, since: date, until: date) -> list[Series]:
    """Each scale question of the team's questionnaires, with what its players answered from `since` to
    `until` (local training days, in the team's zone)."""
    zone = ZoneInfo(team.time_zone)
    start = datetime.combine(since, time.min, zone)
    end = datetime.combine(until + timedelta(days=1), time.min, zone)
    rows = (
        QuestionnaireAnswer.objects.filter(
            training__team=team, training__start__gte=start, training__start__lt=end
        )
        .order_by("training__start", "training_id", "player__name")
        .values_list("phase", "training_id", "training__start", "player__name", "answers")
    )
    series: dict[tuple[str, str], Series] = {}
    for kind in kinds.questionnaire_kinds():
        for question in definition_of(team.pk, kind.code).questions:
            if question.type == SCALE and question.minimum is not None and question.maximum is not None:
                series[(kind.code, question.id)] = Series(kind.code, question)
    trainings: dict[tuple[str, str], dict[object, int]] = {key: {} for key in series}
    for phase, training_id, training_start, player, answers in rows:
        for (code, key), one in series.items():
            value = answers.get(key) if code == phase and isinstance(answers, dict) else None
            if not isinstance(value, int) or not _charted(value, one.question):
                continue
            seen = trainings[(code, key)]
            if training_id not in seen:
                seen[training_id] = len(one.days)
                one.days.append(training_start.astimezone(zone).date())
            one.players.setdefault(player, []).append((seen[training_id], value))
    return list(series.values())


def _charted(value: object, question: QuestionSpec) -> bool:
    """A whole number within the question's range as it stands (an older answer may be neither)."""
    low, high = question.minimum, question.maximum
    if isinstance(value, bool) or not isinstance(value, int) or low is None or high is None:
        return False
    return low <= value <= high
