"""9. Which reminders work: the analytics page and API against N pushes (`--analytics-pushes N`; default
10,000,000, 200,000 with --quick) and about a fifth as many answers.

The data, written by `INSERT ... SELECT generate_series` as a month of a federation's trainings: teams of
20 players training every other day, each training with the seeded pre-training rule (6 reminders) and
post-training rule (12). Player slot s of training n answers the kind after its k-th reminder, k = (7s + n)
mod (reminders + 2): 0 before any reminder, the last value never; a tenth of the players have no device
(their pushes are sent, never reached). About 195 pushes and 36 answers per training.

Then the summaries are rebuilt from those rows (`summaries_rebuild`, timed), and each view is timed (median
of rounds, through Django's test client): the operator's page and API over every team, a coach's page over
5 teams (with the player list). Beside each, the alternative measured in the same run: the same figures
computed live from the pushes, sends and answers (`_tallies`, the rebuild's own code) for that scope.
The plans of the page's statements go to bench/analytics_explain.txt.

With `--keep-data` (and a `--database-name` of its own) the month is kept: the fill is recorded when it
ends, then the rebuild. A later run with the same options reuses it (rebuilding first if the rebuild had not
ended) and times the views again in minutes, for the days it was filled for; it reports the fill, the
rebuild and the live alternative as the run that made them measured them (a live figure that run did not
reach is "not measured": at 10 M each takes many minutes).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench.harness import Harness
from bench.report import Row, Section

PLAYERS = 20
PUSHES_PER_TRAINING = 195
DAYS = 28
TARGET_MS = 300.0
ROUNDS = 7
EXPLAIN = Path(__file__).resolve().parents[1] / "analytics_explain.txt"


def _fill(pushes: int) -> dict[str, Any]:
    """The month's teams, players, trainings, pushes, sends and answers; returns the counts."""
    from django.db import connection
    from django.utils import timezone

    from delivery.models import PushSend
    from trainings.models import Membership, Player, Push, QuestionnaireAnswer, ReminderRule, Team, Training

    trainings = max(pushes // PUSHES_PER_TRAINING, DAYS)
    teams = max(trainings * 2 // DAYS, 1)
    rules = dict(ReminderRule.objects.values_list("kind", "pk"))
    today = timezone.localdate()
    t = {
        m.__name__: m._meta.db_table
        for m in (Team, Player, Membership, Training, Push, PushSend, QuestionnaireAnswer)
    }
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {t['Team']} (name, time_zone, created_at)"
            " SELECT 'Bench team ' || j, 'Europe/Paris', now() FROM generate_series(1, %s) AS j",
            [teams],
        )
        cursor.execute(
            f"INSERT INTO {t['Player']} (name, time_zone, language) SELECT 'Bench player ' || j, "
            "'Europe/Paris', 'en' FROM generate_series(1, %s) AS j",
            [teams * PLAYERS],
        )
        cursor.execute(f"SELECT min(id) FROM {t['Team']}")
        (first_team,) = cursor.fetchone()
        cursor.execute(f"SELECT min(id) FROM {t['Player']}")
        (first_player,) = cursor.fetchone()
        cursor.execute(
            f"INSERT INTO {t['Membership']} (team_id, player_id, active, joined_at) "
            "SELECT %s + (j / 20), %s + j, true, now() FROM generate_series(0, %s) AS j",
            [first_team, first_player, teams * PLAYERS - 1],
        )
        # Training n: team n mod teams, on day (n / (teams / 2)) back from yesterday, at 17:00 UTC.
        cursor.execute(
            "CREATE TEMP TABLE bench_t AS SELECT n, md5('bench-analytics-' || n)::uuid AS id,"
            " %s + (n %% %s) AS team_id, (n %% %s) AS team_n,"
            " (%s::date - 1 - (n / greatest(%s / 2, 1)) %% %s + time '17:00') AT TIME ZONE 'UTC' AS start"
            " FROM generate_series(0, %s) AS n",
            [first_team, teams, teams, today, teams, DAYS, trainings - 1],
        )
        cursor.execute(
            f'INSERT INTO {t["Training"]} (id, team_id, title, start, "end", time_zone, location, cancelled,'
            " created_at, updated_at) SELECT id, team_id, 'Bench ' || n, start,"
            " start + interval '90 minutes', 'Europe/Paris', '', false, now(), now() FROM bench_t"
        )
        # (kind, rule, reminders, before (-1) or after (+1) the training)
        kinds = (
            f"(VALUES ('PRE', {rules['PRE']}, 6, -1), ('POST', {rules['POST']}, 12, 1))"
            " AS r(kind, rule, n, sign)"
        )
        asked = (
            f"FROM bench_t AS t CROSS JOIN generate_series(0, {PLAYERS - 1}) AS s CROSS JOIN {kinds} "
            "CROSS JOIN LATERAL (SELECT (7 * s + t.n) % (r.n + 2) AS k, "
            f"{first_player} + t.team_n * {PLAYERS} + s AS player_id) AS a"
        )

        # The i-th reminder: 90, 75, ... 15 min before the start; 15, 30, ... 180 min after the end.
        def fire(i: str) -> str:
            return (
                f"CASE WHEN r.sign < 0 THEN t.start - (105 - 15 * {i}) * interval '1 minute' "
                f"ELSE t.start + interval '90 minutes' + 15 * {i} * interval '1 minute' END"
            )

        cursor.execute(
            f'INSERT INTO {t["Push"]} (key, occurrence_key, training_id, player_id, rule_id, kind, "offset",'
            " language, title, body, fire_at, expires_at, status, status_reason, created_at, sent_at)"
            f" SELECT 'bench:' || t.n || ':' || s || ':' || r.kind || ':' || i,"
            " 'bench:' || t.n || ':' || r.kind || ':' || i, t.id, a.player_id, r.rule, r.kind,"
            " (CASE WHEN r.sign < 0 THEN 105 - 15 * i ELSE 15 * i END) || 'm', 'en', 'Reminder',"
            f" 'Please answer', {fire('i')}, CASE WHEN r.sign < 0 THEN"
            " t.start ELSE t.start + interval '90 minutes' + interval '24 hours' END, 'sent', '', now(),"
            f" {fire('i')} {asked} CROSS JOIN LATERAL generate_series(1, least(a.k, r.n)) AS i"
        )
        cursor.execute(
            f"INSERT INTO {t['PushSend']} (push_key, player_id, provider, status, provider_message_id, error,"
            " attempts, recorded_at) SELECT key, player_id, 'fcm', CASE WHEN player_id % 10 = 0 THEN"
            f" 'no_device' ELSE 'accepted' END, '', '', 1, fire_at + interval '2 seconds' FROM {t['Push']}"
            " WHERE key LIKE 'bench:%'"
        )
        # Answer k: 10 min before the first reminder (k = 0), else 2 s + (s + n) mod 14 min after the k-th.
        cursor.execute(
            f"INSERT INTO {t['QuestionnaireAnswer']} (training_id, player_id, phase, answered_at, answers,"
            " source) SELECT t.id, a.player_id, r.kind, CASE WHEN a.k = 0 THEN"
            f" {fire('1')} - interval '10 minutes' ELSE {fire('a.k')} + interval '2 seconds'"
            " + ((s + t.n) % 14) * interval '1 minute' END, '{}'::jsonb, 'app'"
            f" {asked} WHERE a.k <= r.n"
        )
        for table in t.values():
            cursor.execute(f"VACUUM ANALYZE {table}")
        counts = {}
        for name in ("Push", "PushSend", "QuestionnaireAnswer", "Training", "Team"):
            cursor.execute(f"SELECT count(*) FROM {t[name]}")
            counts[name] = cursor.fetchone()[0]
    counts["fill_seconds"] = time.perf_counter() - started
    return counts


def _median_ms(call: Callable[[], Any], rounds: int, *, warm: bool = True) -> tuple[float, list[float]]:
    if warm:
        call()  # warms the caches and the connection
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), times


def _live(teams: list[Any] | None, since: Any, until: Any) -> Callable[[], Any]:
    """The alternative: the same figures computed from pushes, sends and answers at request time."""
    from trainings.analytics.summary import _tallies
    from trainings.models import Training

    def run() -> Any:
        first = since - timedelta(days=1)
        trainings = Training.objects.filter(
            start__date__gte=first, start__date__lte=until + timedelta(days=1)
        )
        if teams is not None:
            trainings = trainings.filter(team__in=teams)
        return _tallies(list(trainings.only("id", "team_id", "start", "end", "time_zone")))

    return run


def _explain(since: Any, until: Any, teams: list[int]) -> list[str]:
    """The plans of the page's statements (EXPLAIN ANALYZE), written to bench/analytics_explain.txt."""
    from django.db import connection
    from django.db.models import Sum

    from trainings.analytics.figures import Scope
    from trainings.models import OffsetDay, PlayerDay, Team

    scoped = Scope(tuple(Team.objects.filter(pk__in=teams)))
    statements = {
        "every team, offsets": Scope(None).rows(OffsetDay, since, until),
        "5 teams, offsets": scoped.rows(OffsetDay, since, until),
        "5 teams, players": scoped.rows(PlayerDay, since, until)
        .values("player_id", "player__name")
        .annotate(n=Sum("never")),
    }
    out = []
    with connection.cursor() as cursor:
        for name, queryset in statements.items():
            sql, params = queryset.query.sql_with_params()
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            out += ["", f"## {name}", *(row[0] for row in cursor.fetchall())]
    return out


def _data(h: Harness, pushes: int) -> dict[str, Any]:
    """The month filled and its summaries rebuilt, or what a kept database holds of them (a fill whose
    rebuild did not finish is rebuilt now). Each step is recorded as it ends (`Harness.keep`)."""
    from django.db import connection
    from django.utils import timezone

    from trainings.analytics.summary import summaries_rebuild
    from trainings.models import OffsetDay, PlayerDay

    kept = h.kept("analytics")
    if kept is not None and kept["requested"] != pushes:
        raise RuntimeError(
            f"the kept database holds {kept['requested']:,} requested pushes, not {pushes:,}: pass "
            f"--analytics-pushes {kept['requested']} or another --database-name"
        )
    if kept is None:
        counts = _fill(pushes)
        print(f"  filled {counts} ", flush=True)
        today = timezone.localdate()
        kept = {"requested": pushes, "counts": counts, "live_ms": {}, "rebuilt": False,
                "since": (today - timedelta(days=DAYS)).isoformat(),
                "until": (today - timedelta(days=1)).isoformat()}  # fmt: skip
        h.keep("analytics", kept)
    else:
        print(
            f"  reusing the kept data: {kept['counts']}, days {kept['since']} to {kept['until']}", flush=True
        )
    if kept.get("rebuilt", True):
        return kept
    started = time.perf_counter()
    team_days = summaries_rebuild(
        since=date.fromisoformat(kept["since"]), until=date.fromisoformat(kept["until"])
    )
    rebuild_s = time.perf_counter() - started
    with connection.cursor() as cursor:  # as autovacuum would after the rebuild's inserts
        for model in (OffsetDay, PlayerDay):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    summary_rows = (OffsetDay.objects.count(), PlayerDay.objects.count())
    print(f"  rebuilt {team_days:,} team days in {rebuild_s:.1f} s; summary rows {summary_rows}", flush=True)
    kept.update(rebuilt=True, team_days=team_days, rebuild_seconds=rebuild_s, summary_rows=summary_rows)
    h.keep("analytics", kept)
    return kept


def run(h: Harness, pushes: int | None = None) -> Section:
    import django.conf
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from trainings.models import Team

    pushes = pushes or (200_000 if h.quick else 10_000_000)
    kept = _data(h, pushes)
    counts, team_days, rebuild_s = kept["counts"], kept["team_days"], kept["rebuild_seconds"]
    summary_rows = tuple(kept["summary_rows"])
    since, until = date.fromisoformat(kept["since"]), date.fromisoformat(kept["until"])

    django.conf.settings.ALLOWED_HOSTS = [*django.conf.settings.ALLOWED_HOSTS, "testserver"]
    users = get_user_model()
    operator, _ = users.objects.get_or_create(
        username="bench-operator", defaults={"is_staff": True, "is_superuser": True}
    )
    coach, _ = users.objects.get_or_create(username="bench-coach", defaults={"is_staff": True})
    teams = list(Team.objects.order_by("pk")[:5])
    for team in teams:
        team.coaches.add(coach)
    as_operator, as_coach = Client(), Client()
    as_operator.force_login(operator)
    as_coach.force_login(coach)
    query = {"since": since.isoformat(), "until": until.isoformat()}
    views = (
        ("9a", "operator page, every team", lambda: as_operator.get("/admin/analytics/", query), None),
        (
            "9b",
            "operator API offsets, every team",
            lambda: as_operator.get("/api/analytics/offsets/", query),
            None,
        ),
        ("9c", "coach page, 5 teams with players", lambda: as_coach.get("/admin/analytics/", query), teams),
    )
    section = Section("analytics")
    live_rounds = 1 if counts["Push"] > 500_000 else 3
    load = f"load {os.getloadavg()[0]:.1f}"
    if h.database_reused:
        load += "; kept data: its fill, rebuild and live figures are the run's that made it"
    for number, label, call, scope_teams in views:
        assert call().status_code == 200
        ours, times = _median_ms(call, ROUNDS)
        live: float | None = kept["live_ms"].get(number)
        if live is None and not h.database_reused:  # minutes each at 10 M: a re-timing run skips it
            live, _ = _median_ms(_live(scope_teams, since, until), live_rounds, warm=live_rounds > 1)
            kept["live_ms"][number] = live
            h.keep("analytics", kept)
        print(
            f"  {label}: median {ours:.1f} ms (rounds {', '.join(f'{x:.0f}' for x in times)}); "
            f"computed live {'not measured' if live is None else f'{live:.0f} ms'}",
            flush=True,
        )
        section.rows.append(
            Row(
                f"{number} analytics {label}, {DAYS} days, {counts['Push'] / 1e6:g} M pushes, "
                f"{counts['QuestionnaireAnswer'] / 1e6:g} M answers",
                ours,
                live,
                "computed live from pushes and answers",
                "ms",
                None if live is None else live / ours,
                "live/ours",
                f"≤ {TARGET_MS:.0f} ms",
                ours <= TARGET_MS,
                note=f"summary rows {summary_rows[0]:,} offset-days, {summary_rows[1]:,} player-days; {load}",
            )
        )
    section.rows.append(
        Row(
            f"9d analytics summary rebuild, {team_days:,} team days",
            counts["Push"] / rebuild_s,
            unit="pushes/s",
            note=f"{rebuild_s:.1f} s for {counts['Push']:,} pushes; fill {counts['fill_seconds']:.0f} s",
        )
    )
    plans = _explain(since, until, [team.pk for team in teams])
    header = (
        f"# EXPLAIN (ANALYZE, BUFFERS) of the analytics page's statements: {counts['Push']:,} pushes, "
        f"{counts['QuestionnaireAnswer']:,} answers, {summary_rows[0]:,} offset-day rows, "
        f"{summary_rows[1]:,} player-day rows ({timezone.now():%Y-%m-%d %H:%M} UTC, {load})"
    )
    EXPLAIN.write_text("\n".join([header, *plans]) + "\n")
    print(f"  plans: {EXPLAIN}", flush=True)
    section.data = {"counts": counts, "rebuild_seconds": rebuild_s, "summary_rows": summary_rows}
    connection.close()
    return section
