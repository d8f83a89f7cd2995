"""6. The trainings path: scheduling trainings, then one due minute's reminders turned into pushes.

1. Schedule: `trainings.services.training_create` for N trainings (10,000; 500 with --quick) of teams of 20
   players, each saving the training, its invitations and its 22 reminders (6 pre, 12 post, 4 invitation)
   in one transaction. Trainings/s and occurrences/s.
2. One due minute: the minute holding the most reminders is made due now; a quarter of those trainings'
   players have answered (both questionnaires, invitation accepted). The scan loop drains it: each
   chunk of occurrences runs the trainings batch handler, which re-checks who is still pending and
   publishes one push per remaining player to the push queue. Pushes/s, counted on the queue and in the
   Push table.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import Harness, timed
from bench.report import Row, Section

PLAYERS_PER_TEAM = 20
TRAININGS_PER_TEAM = 20
SLOTS = 100  # distinct start times, half an hour apart


def run(h: Harness) -> Section:
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from reminders.engine.dispatch import occurrences_dispatch_batch
    from reminders.models import Occurrence, OccurrenceStatus
    from trainings import kinds
    from trainings import models as tm
    from trainings.services import training_create

    section = Section("trainings")

    n = h.sizes.trainings
    h.truncate_engine()
    push_queue = settings.TRAININGS_PUSH_QUEUE
    h.declare(push_queue)
    team_count = max(1, n // TRAININGS_PER_TEAM)
    teams = tm.Team.objects.bulk_create(
        [tm.Team(name=f"bench team {i}", time_zone="Europe/Berlin") for i in range(team_count)]
    )
    players = tm.Player.objects.bulk_create(
        [tm.Player(name=f"bench player {i}") for i in range(team_count * PLAYERS_PER_TEAM)]
    )
    tm.Membership.objects.bulk_create(
        [
            tm.Membership(team=teams[i // PLAYERS_PER_TEAM], player=p, active=True)
            for i, p in enumerate(players)
        ]
    )
    # Starts more than three days out, so the invitation reminders (3 d before) are in the future too.
    base = (datetime.now(UTC) + timedelta(days=3, hours=2)).replace(minute=0, second=0, microsecond=0)

    statements = _Statements()
    cpu_schedule = time.process_time()
    with timed() as t_schedule, connection.execute_wrapper(statements):
        for i in range(n):
            start = base + timedelta(minutes=30 * (i % SLOTS))
            training_create(
                team=teams[i % team_count],
                title=f"Session {i}",
                start=start,
                end=start + timedelta(minutes=90),
                time_zone="Europe/Berlin",
            )
    cpu_schedule = time.process_time() - cpu_schedule
    schedule_statements = statements.reset()
    scheduled = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).count()

    # The fullest minute, made due now; a quarter of its trainings' players have answered.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT date_trunc('minute', fire_at) AS m, count(*) FROM reminders_occurrence "
            "WHERE status = 'scheduled' GROUP BY m ORDER BY count(*) DESC, m LIMIT 1"
        )
        minute, in_minute = cursor.fetchone()
    due = Occurrence.objects.filter(
        status=OccurrenceStatus.SCHEDULED, fire_at__gte=minute, fire_at__lt=minute + timedelta(minutes=1)
    )
    training_ids = {
        str(p["training"]) for p in due.values_list("job__payload", flat=True) if isinstance(p, dict)
    }
    trainings = list(tm.Training.objects.filter(pk__in=training_ids))
    team_index = {team.pk: i for i, team in enumerate(teams)}
    answered: list[Any] = []
    for training in trainings:
        first = team_index[training.team_id] * PLAYERS_PER_TEAM  # teams and players were created in step
        answered += [(training, player) for player in players[first : first + PLAYERS_PER_TEAM // 4]]
    now = timezone.now()
    tm.QuestionnaireAnswer.objects.bulk_create(
        [
            tm.QuestionnaireAnswer(training=t, player=p, phase=phase, answers={}, answered_at=now)
            for t, p in answered
            for phase in (kinds.PRE.code, kinds.POST.code)
        ],
        ignore_conflicts=True,
    )
    for t, p in answered:
        tm.Invitation.objects.filter(training=t, player=p).update(
            status=tm.InvitationStatus.ACCEPTED, responded_at=now
        )
    due.update(next_attempt_at=now)

    start_clock, cpu_fire = time.perf_counter(), time.process_time()
    occurrences = 0
    with connection.execute_wrapper(statements):
        while True:
            result = occurrences_dispatch_batch()
            occurrences += result.delivered
            if result.claimed == 0:
                break
    elapsed, cpu_fire = time.perf_counter() - start_clock, time.process_time() - cpu_fire
    pushes = tm.Push.objects.filter(status=tm.PushStatus.SENT).count()
    on_queue, _ = h.queue_depth(push_queue)
    most = in_minute * PLAYERS_PER_TEAM
    section.rows += [
        Row(
            f"6a trainings: schedule {n:,} trainings x 22 (training_create)",
            scheduled / t_schedule[0],
            unit="occ/s",
            note=f"{n / t_schedule[0]:,.0f} trainings/s; {scheduled:,} occurrences in {t_schedule[0]:.1f} s "
            f"(each training with its invitations and reminders in one transaction); this process's CPU "
            f"{cpu_schedule / max(scheduled, 1) * 1e6:,.0f} µs per occurrence; "
            f"{schedule_statements / max(n, 1):.1f} SQL statements per training (COPY apart)",
        ),
        Row(
            f"6b trainings: one due minute ({in_minute:,} reminders) to pushes",
            pushes / elapsed if elapsed else None,
            unit="pushes/s",
            note=f"{occurrences:,} occurrences delivered, {pushes:,} pushes sent ({on_queue:,} on the queue) "
            f"of at most {most:,} in {elapsed:.1f} s; a quarter of the players had answered; this process's "
            f"CPU {cpu_fire / max(pushes, 1) * 1e6:,.0f} µs per push; {statements.count:,} SQL statements "
            f"({statements.count / max(occurrences, 1):.2f} per occurrence)",
        ),
    ]
    section.data = {
        "trainings": n,
        "schedule_seconds": t_schedule[0],
        "scheduled": scheduled,
        "minute": minute,
        "in_minute": in_minute,
        "delivered": occurrences,
        "pushes": pushes,
        "on_queue": on_queue,
        "fire_seconds": elapsed,
        "schedule_cpu_seconds": cpu_schedule,
        "schedule_statements": schedule_statements,
        "fire_statements": statements.count,
        "fire_cpu_seconds": cpu_fire,
    }
    h.delete_queue(push_queue)
    h.truncate_engine()
    return section


class _Statements:
    """A `connection.execute_wrapper` that counts the statements sent (a figure the machine's load does not
    change, unlike the rates)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)

    def reset(self) -> int:
        count, self.count = self.count, 0
        return count
