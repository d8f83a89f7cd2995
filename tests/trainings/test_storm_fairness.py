"""When many trainings' reminders fall due at one instant, no team waits behind a bigger one: the order in
which their pushes reach the push queue (the order the gateway sends them in) is checked, not wall time.

Scaled down from the issue's one team of 5,000 beside 100 teams of 15: one team of 1,000 beside 100 teams
of 15 keeps the property (the big team is the top 1 % of teams, over three chunks of the engine).
"""

from __future__ import annotations

import datetime as dt
import json
import statistics

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.factories import TeamFactory, training_made
from trainings.models import Membership, Player, ReminderRule, Team, Training, TrainingJob
from trainings.planning import kinds

pytestmark = [pytest.mark.django_db, pytest.mark.rabbitmq]  # reads the order off the push queue

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _team(players: int, name: str) -> Team:
    team = TeamFactory(name=name)
    made = Player.objects.bulk_create([Player(name=f"{name} {i}") for i in range(players)])
    Membership.objects.bulk_create([Membership(team=team, player=p, active=True) for p in made])
    return team


def _storm(trainings: list[Training]) -> int:
    """Make one rule's first reminder of every training due now, and fire them all through the engine."""
    rule = ReminderRule.objects.filter(kind=kinds.PRE.code, active=True).order_by("pk").first()
    assert rule is not None
    instant = rule.instants_for(trainings[0])[0][0]
    jobs = TrainingJob.objects.filter(rule=rule, training__in=trainings).values_list("job_id", flat=True)
    due = Occurrence.objects.filter(job_id__in=jobs, fire_at=instant)
    assert due.count() == len(trainings)
    due.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    delivered = 0
    while (result := occurrences_dispatch_batch()).claimed:
        delivered += result.delivered
    return delivered


def _completions(push_queue: str, expect: int, team_of: dict[str, int]) -> dict[int, int]:
    """Each team's completion: the position (1-based) of its last push on the queue."""
    messages = drain_queue(push_queue, expect=expect, timeout=20)
    assert len(messages) == expect
    done: dict[int, int] = {}
    for position, message in enumerate(messages, start=1):
        done[team_of[json.loads(message.body)["training"]]] = position
    return done


def _p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[round(0.99 * (len(ordered) - 1))]


def test_it_drains_small_teams_before_a_big_one_that_was_due_first(push_queue: str) -> None:
    big = _team(1000, "big")
    small = [_team(15, f"small{i}") for i in range(100)]
    # The big team's training is created first: without fairness its reminder is claimed first.
    trainings = [training_made(team, START) for team in [big, *small]]
    team_of = {str(t.pk): t.team_id for t in trainings}

    assert _storm(trainings) == 101
    done = _completions(push_queue, 1000 + 100 * 15, team_of)

    small_done = [done[team.pk] for team in small]
    # A perfect round-robin finishes a team of 15 by 101 x 15 pushes; none waits for the big team's 1,000.
    assert max(small_done) <= 101 * 15
    assert done[big.pk] == 2500
    everyone = list(done.values())
    assert _p99(everyone) <= 2 * statistics.median(everyone)


def test_inside_one_chunk_pushes_are_published_round_robin_across_trainings(push_queue: str) -> None:
    big = _team(200, "big")
    small = [_team(15, f"small{i}") for i in range(20)]
    trainings = [training_made(team, START) for team in [big, *small]]  # 21 reminders: one chunk
    team_of = {str(t.pk): t.team_id for t in trainings}

    assert _storm(trainings) == 21
    done = _completions(push_queue, 200 + 20 * 15, team_of)

    # Fifteen rounds of one push per training: every team of 15 is complete after 21 x 15 pushes.
    assert max(done[team.pk] for team in small) <= 21 * 15
    assert done[big.pk] == 500
