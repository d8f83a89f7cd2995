"""6. The trainings path: scheduling trainings, then one due minute's reminders turned into pushes.

1. Schedule: `trainings.planning.writes.training_create` for N trainings (10,000; 500 with --quick) of
   teams of 20 players, each saving the training, its invitations and its 22 reminders (6 pre, 12 post,
   4 invitation) in one transaction. Trainings/s and occurrences/s.
2. One due minute: the minute holding the most reminders is made due now; a quarter of those trainings'
   players have answered (both questionnaires, invitation accepted). The scan loop drains it: each
   chunk of occurrences runs the trainings batch handler, which re-checks who is still pending and
   publishes one push per remaining player to the push queue. Pushes/s, counted on the queue and in the
   Push table.
3. Guardians: every player gets a guardian, then the next fullest minutes fire in turns, one with the
   trainings' teams reminding the player only (as in 2) and one with them reminding player and guardian
   (`Team.reminds = both`: two recipients per pending player), GUARDIAN_ROUNDS of each. Pushes/s of each
   (median), and their ratio: the cost of the second recipient on the due-minute path.
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
GUARDIAN_ROUNDS = 3  # due minutes fired with guardians, and as many without, in turns


def run(h: Harness) -> Section:
    from django.conf import settings
    from django.db import connection

    from reminders.engine.dispatch import occurrences_dispatch_batch
    from reminders.models import Occurrence, OccurrenceStatus
    from trainings import models as tm
    from trainings.planning.writes import training_create

    section = Section("trainings")

    n = h.sizes.trainings
    h.truncate_engine()
    push_queue = settings.TRAININGS_PUSH_QUEUE
    h.declare(push_queue)
    team_count = max(1, n // TRAININGS_PER_TEAM)
    teams = tm.Team.objects.bulk_create(
        [
            tm.Team(name=f"bench team {i}", time_zone="Europe/Berlin", quiet_start=None, quiet_end=None)
            for i in range(team_count)
        ]
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
    team_index = {team.pk: i for i, team in enumerate(teams)}
    _make_due(minute, teams=team_index, players=players)

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
    section.rows.append(_guardian_rounds(h, teams=team_index, players=players, data=section.data))
    h.delete_queue(push_queue)
    h.truncate_engine()
    return section


def _make_due(minute: datetime, *, teams: dict[Any, int], players: list[Any]) -> set[Any]:
    """Make this minute's scheduled reminders due now, a quarter of their trainings' players having
    answered (both questionnaires, invitation accepted); returns the trainings' teams."""
    from django.utils import timezone

    from reminders.models import Occurrence, OccurrenceStatus
    from trainings import models as tm
    from trainings.planning import kinds

    due = Occurrence.objects.filter(
        status=OccurrenceStatus.SCHEDULED, fire_at__gte=minute, fire_at__lt=minute + timedelta(minutes=1)
    )
    training_ids = {
        str(p["training"]) for p in due.values_list("job__payload", flat=True) if isinstance(p, dict)
    }
    trainings = list(tm.Training.objects.filter(pk__in=training_ids))
    answered: list[Any] = []
    for training in trainings:
        first = teams[training.team_id] * PLAYERS_PER_TEAM  # teams and players were created in step
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
    return {training.team_id for training in trainings}


def _guardian_rounds(h: Harness, *, teams: dict[Any, int], players: list[Any], data: dict[str, Any]) -> Row:
    """Step 3: a guardian per player; the next fullest minutes fired in turns without and with them."""
    import statistics

    from django.conf import settings
    from django.db import connection

    from reminders.engine.dispatch import occurrences_dispatch_batch
    from trainings import models as tm

    guardians = tm.Guardian.objects.bulk_create(
        [tm.Guardian(name=f"bench guardian {i}", language="fr") for i in range(len(players))]
    )
    tm.Guardianship.objects.bulk_create(
        [
            tm.Guardianship(guardian=g, player=p, relation="mother")
            for g, p in zip(guardians, players, strict=True)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT date_trunc('minute', fire_at) AS m, count(*) FROM reminders_occurrence "
            "WHERE status = 'scheduled' GROUP BY m ORDER BY count(*) DESC, m LIMIT %s",
            [2 * GUARDIAN_ROUNDS],
        )
        minutes = cursor.fetchall()
    rates: dict[str, list[float]] = {"player": [], "both": []}
    per_player: list[float] = []
    for i, (minute, _) in enumerate(minutes):
        reminds = tm.Reminds.BOTH if i % 2 else tm.Reminds.PLAYER
        fired = _make_due(minute, teams=teams, players=players)
        tm.Team.objects.update(reminds=tm.Reminds.PLAYER)
        tm.Team.objects.filter(pk__in=fired).update(reminds=reminds)
        before = tm.Push.objects.filter(status=tm.PushStatus.SENT).count()
        start = time.perf_counter()
        while occurrences_dispatch_batch().claimed:
            pass
        elapsed = time.perf_counter() - start
        sent = tm.Push.objects.filter(status=tm.PushStatus.SENT).count() - before
        rates[reminds].append(sent / elapsed if elapsed else 0.0)
        if reminds == tm.Reminds.BOTH:
            in_minute = {"fire_at__gte": minute, "fire_at__lt": minute + timedelta(minutes=1)}
            to_guardians = tm.Push.objects.filter(guardian__isnull=False, **in_minute).count()
            per_player.append(sent / max(sent - to_guardians, 1))
        h.purge_queue(settings.TRAININGS_PUSH_QUEUE)  # the gateway is not part of this scenario
    both, alone = statistics.median(rates["both"]), statistics.median(rates["player"])
    data["guardian_rounds"] = {
        "minutes": [str(m) for m, _ in minutes],
        "rates": rates,
        "per_player": per_player,
    }
    return Row(
        f"6c trainings: due minutes with a guardian per player (team reminds both), {GUARDIAN_ROUNDS} rounds",
        both,
        alternative=alone,
        alternative_label="the player only",
        unit="pushes/s",
        ratio=both / alone if alone else None,
        ratio_label="with guardians / player only",
        target=">= 3,000 pushes/s",
        passed=both >= 3000,
        note=f"median of {len(rates['both'])} minutes {both:,.0f} pushes/s vs {alone:,.0f} pushes/s for the "
        f"same kind of minute reminding the player only, in turns in this run: ratio "
        f"{both / alone if alone else 0:.2f}x; {statistics.median(per_player) if per_player else 0:.2f} "
        "recipients per pending player",
    )


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
