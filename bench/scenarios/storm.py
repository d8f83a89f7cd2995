"""8. The storm: one instant with N training reminders (20 players each) and their pushes, end to end.

N trainings (5,000; 100 with --quick; `--storm-reminders N`) of N teams of 20 players start at the same
minute, each scheduled by `training_create`; every player has one device (half iOS on the loopback APNs
peer, half Android on the loopback FCM peer). One rule's reminder of every training is made due at the
same instant T a few seconds ahead, and real processes do the rest: `celery beat` kicks the scan,
`celery worker -c 1` claims ahead and fires at T (recipient re-check, Push rows, publish to the push
queue), `manage.py push_gateway` sends to the peers, which stamp every push they accept. The push tables
hold each player's three earlier invitation reminders, as a production server's do; every round starts
without the last round's pushes and with every device unreached for an hour (`_round_reset`).

Rounds, in one run, on the same trainings:
- a: 1 worker + 1 gateway to the APNs/FCM peers (the storm row);
- b: the same to the logging provider (no HTTP/2, no TLS: what the gateway costs without the phones'
  services);
- c: 2 workers + 2 gateways to the peers (does throughput add up on this machine?);
- d: a with FCM unpaced (what pacing costs).
Each runs three times (once with --quick), a b c d a b c d a b c d; every row takes its configuration's
median round, and the ratios the median of the alternations' ratios.
Beside them, the raw durable publish limit (py-amqp, one AMQP transaction per 500) on the same broker.

The peers run in a granian process of their own (bench/peer_server.py: compiled HTTP/2 and TLS, the
peers' checks in Python), not on h2 in this process: h2's server cost more CPU a push than the gateway,
on the same two cores, and the gateway's rate to the peers measured them as much as the gateway.

CPU per push is read from /proc for every process of the path (worker with its pool process, beat,
gateways) and for the PostgreSQL backends serving the run's database; RabbitMQ's whole broker is reported
apart (it serves every session on this machine: an upper bound), and so are the peers (not the project's).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.cpu import CpuMeter, children, named
from bench.harness import Harness, quantile
from bench.peers import ServedPeers, served_peers_start
from bench.report import Row, Section
from bench.scenarios.storm_quota import pacing_row, quota_round, quota_row

PLAYERS = 20
LEAD_SECONDS = 4.0  # from writing the instant's rows to the instant: the workers claim it ahead
TARGET_CPU_US = 150.0
TARGET_GATEWAY_CPU = 1.3  # the gateway's CPU per push to the peers, over its CPU to the logging provider
PUSHES_AT_ONCE = 1_000_000
SECONDS_FOR_THEM = 60.0
# (label, workers, gateways, to the APNs/FCM peers rather than the logging provider, environment); the last
# is the peers round with FCM unpaced (PUSH_FCM_QUOTA_PER_MINUTE=0): what pacing costs (8k).
ROUNDS: tuple[tuple[str, int, int, bool, dict[str, str]], ...] = (
    ("peers", 1, 1, True, {}),
    ("logging", 1, 1, False, {}),
    ("peers-2x2", 2, 2, True, {}),
    ("peers-unpaced", 1, 1, True, {"PUSH_FCM_QUOTA_PER_MINUTE": "0"}),
)
# The rounds run in turn this many times (3; 1 with --quick), and each row takes its configuration's median
# round: on this 2-core machine one configuration's CPU per push moved by a third between two of its rounds
# (67 to 117 µs for the gateway, 2026-12-04), far more than most differences the rows compare.
STORM_TOKENS = 1 << 252  # the first APNs token of the storm's devices (64 hex digits)


@dataclass
class Storm:
    """The trainings of one storm, reused round after round."""

    trainings: list[Any]
    jobs: list[int]
    rule: Any
    pushes: int
    rounds: int = 0


def _setup(n: int) -> Storm:
    from django.db import connection
    from django.utils import timezone

    from delivery import models as dm
    from trainings import models as tm
    from trainings.planning import kinds
    from trainings.planning.writes import training_create

    teams = tm.Team.objects.bulk_create(
        [
            tm.Team(name=f"storm team {i}", time_zone="Europe/Berlin", quiet_start=None, quiet_end=None)
            for i in range(n)
        ]
    )
    players = tm.Player.objects.bulk_create(
        [tm.Player(name=f"storm player {i}") for i in range(n * PLAYERS)], batch_size=5000
    )
    tm.Membership.objects.bulk_create(
        [tm.Membership(team=teams[i // PLAYERS], player=p, active=True) for i, p in enumerate(players)],
        batch_size=5000,
    )
    # APNs tokens of their own: the push scenario's start at 0, and both scenarios run on one database when
    # named together (`--only push storm`).
    dm.Device.objects.bulk_create(
        [
            dm.Device(player=p, provider="apns", platform="ios", token=f"{STORM_TOKENS + i:064x}")
            if i % 2 == 0
            else dm.Device(player=p, provider="fcm", platform="android", token=f"fcm-storm-{i}")
            for i, p in enumerate(players)
        ],
        batch_size=5000,
    )
    # Every training at the same minute, days ahead: no other reminder of theirs falls due during the run.
    start = (timezone.now() + timedelta(days=4)).replace(second=0, microsecond=0)
    trainings = [
        training_create(team=team, title=f"Storm {i}", start=start, end=start + timedelta(minutes=90),
                        time_zone="Europe/Berlin")
        for i, team in enumerate(teams)
    ]  # fmt: skip
    rule = tm.ReminderRule.objects.filter(kind=kinds.PRE.code, active=True).order_by("pk").first()
    assert rule is not None, "no active pre-training rule"
    jobs = list(
        tm.TrainingJob.objects.filter(rule=rule, training__in=trainings)
        .order_by("training_id")
        .values_list("job_id", flat=True)
    )
    assert len(jobs) == n, (len(jobs), n)
    _history_seed([t.pk for t in trainings])
    # Statistics for every table the setup filled, as autovacuum keeps them on a production server (this
    # machine's PostgreSQL runs without it): without them the recipients' re-check and the gateway's
    # look-ups planned scans of whole tables, and a push cost more the bigger the storm. Here, before any
    # round, so its time is never taken from a round's lead.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return Storm(trainings, jobs, rule, n * PLAYERS)


# Earlier pushes of every storm player (the invitation reminders 3, 2 and 1 days before), as a production
# server's push tables hold: their statistics then say what such a table holds, and the storm's look-ups by
# key are planned as index scans. Emptied and analyzed before each round instead, the tables read as empty
# while a round filled them, and the gateway's and the worker's look-ups scanned them whole, once a batch.
HISTORY = (("3d", 3), ("2d", 2), ("1d", 1))
STORM_KEYS = "storm-%"  # the storm's pushes (their occurrences' keys are storm-<round>-<job>)


def _history_seed(trainings: list[Any]) -> None:
    """The history: a push and its device's accepted send (which says it finished) per player and day."""
    from django.db import connection

    from delivery import models as dm
    from trainings import models as tm
    from trainings.planning import kinds

    rule = tm.ReminderRule.objects.filter(kind=kinds.INVITATION.code).order_by("pk").first()
    assert rule is not None, "no invitation rule"
    days = ", ".join(f"('{offset}', {n})" for offset, n in HISTORY)
    push, send = (m._meta.db_table for m in (tm.Push, dm.PushSend))
    invitation, device = tm.Invitation._meta.db_table, dm.Device._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH history AS (
                INSERT INTO {push} (key, occurrence_key, occurrence_id, kind, language, title, body, fire_at,
                    status, created_at, sent_at, player_id, rule_id, training_id, expires_at, release_at,
                    status_reason, "offset", guardian_id)
                SELECT 'history-' || o.at || '-' || i.training_id || '.' || i.player_id,
                       'history-' || o.at || '-' || i.training_id, NULL, %(kind)s, 'en', 'Invitation',
                       'Are you coming?', o.fired, 'sent', o.fired, o.fired, i.player_id, %(rule)s,
                       i.training_id, NULL, NULL, '', o.at, NULL
                  FROM {invitation} AS i
                 CROSS JOIN (SELECT at, now() - days * interval '1 day' AS fired
                               FROM (VALUES {days}) AS v(at, days)) AS o
                 WHERE i.training_id = ANY(%(trainings)s)
                RETURNING key, player_id, fire_at
            )
            INSERT INTO {send} (push_key, device_id, player_id, guardian_id, coach_id, provider, status,
                provider_message_id, error, attempts, recorded_at)
            SELECT h.key, d.id, h.player_id, NULL, NULL, d.provider, 'accepted', '', '', 1, h.fire_at
              FROM history AS h JOIN {device} AS d ON d.player_id = h.player_id
            """,
            {"kind": kinds.INVITATION.code, "rule": rule.pk, "trainings": trainings},
        )


def _round_reset() -> None:
    """Before each round, outside its lead: the last round's pushes gone (the recipients' re-check would
    skip the players they reached), the history kept, and every device as if not reached within the last
    hour: the gateway stamps the devices it reaches at most once an hour (delivery/gateway/stamps.py), so
    otherwise the first round alone paid for a stamp a push and the rounds after it, the logging
    provider's among them, for none."""
    from django.db import connection

    from delivery import models as dm
    from trainings import models as tm

    by_key = ((tm.Push, "key"), (dm.PushSend, "push_key"))
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tm.ReminderRun._meta.db_table}")
        for model, column in by_key:
            cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE {column} LIKE %s", [STORM_KEYS])
        device = dm.Device._meta.db_table
        cursor.execute(f"UPDATE {device} SET last_success_at = NULL WHERE last_success_at IS NOT NULL")
        for table in [device, *(model._meta.db_table for model, _ in by_key)]:
            cursor.execute(f"VACUUM ANALYZE {table}")


def _arm(storm: Storm, instant: datetime) -> None:
    """Make the rule's reminder of every training due at `instant`: the trainings move so that the rule
    wants that instant (the fire-time check), and each job gets one fresh scheduled row for it."""
    from django.db import connection

    from trainings import models as tm

    first = tm.Training.objects.get(pk=storm.trainings[0].pk)
    wanted = storm.rule.instants_for(first)[0][0]
    shift = instant - wanted
    ids = [t.pk for t in storm.trainings]
    storm.rounds += 1
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM reminders_occurrence WHERE job_id = ANY(%s)", [storm.jobs])
        cursor.execute(
            'UPDATE trainings_training SET start = start + %s, "end" = "end" + %s WHERE id = ANY(%s)',
            [shift, shift, ids],
        )
        cursor.execute(
            """
            INSERT INTO reminders_occurrence (job_id, fire_at, next_attempt_at, priority, status, attempts,
                                              last_error, idempotency_key, job_version, created_at)
            SELECT j.id, %(at)s, %(at)s, j.priority, 'scheduled', 0, '',
                   'storm-' || %(round)s || '-' || j.id, j.version, now()
              FROM reminders_job AS j WHERE j.id = ANY(%(jobs)s) ORDER BY j.id
            """,
            {"at": instant, "round": storm.rounds, "jobs": storm.jobs},
        )
        # The instant's rows (the push tables were analyzed by `_round_reset`).
        cursor.execute(f"ANALYZE reminders_occurrence, {tm.ReminderRun._meta.db_table}")


def _pg_backends(h: Harness, conn: Any) -> Callable[[], list[int]]:
    """The pids of the backends serving the run's database, other than this process's own, as read on
    `conn` (a connection to another database, so that reading them is not counted)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]

    def pids() -> list[int]:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", [h.database_name, own]
        ).fetchall()
        return [row[0] for row in rows]

    return pids


def _tree(procs: Iterable[Any]) -> Callable[[], list[int]]:
    return lambda: [pid for proc in procs for pid in (proc.pid, *children(proc.pid))]


def _round(h: Harness, storm: Storm, label: str, *, workers: int, gateways: int,
           peers: ServedPeers | None, env: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """One storm: processes started, the instant armed, every push accepted (or the timeout)."""
    from django.db.models import Max, Min

    from delivery import models as dm
    from trainings import models as tm

    h.purge_queue(h.push_queue)
    h.purge_queue(h.celery_queue)
    _round_reset()
    before = dm.PushSend.objects.aggregate(at=Max("pk"))["at"] or 0  # this round's rows come after it
    env = {**(peers.env if peers else {}), **(env or {})}
    gateway_procs = [
        h.start(f"storm-{label}-gateway{i}",
                [sys.executable, "manage.py", "push_gateway", "--idle-seconds", "600"], **env)
        for i in range(gateways)
    ]  # fmt: skip
    worker_procs = [h.worker(f"storm-{label}-worker{i}") for i in range(workers)]
    beat = h.beat(f"storm-{label}-beat")
    h.wait_for_log(f"storm-{label}-beat", "beat: Starting", timeout=30, proc=beat)
    for i, proc in enumerate(gateway_procs):
        h.wait_for_log(f"storm-{label}-gateway{i}", "push gateway:", timeout=60, proc=proc)
    if peers:
        peers.clear()
    instant = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS)
    since = instant - timedelta(seconds=LEAD_SECONDS + 1)  # this round's rows (the history's are days old)
    _arm(storm, instant)
    pg = h._maintenance()
    served = [peers.process] if peers else []
    meter = CpuMeter({
        "worker": _tree(worker_procs), "beat": _tree([beat]), "gateway": _tree(gateway_procs),
        "postgresql": _pg_backends(h, pg), "rabbitmq": lambda: named("beam.smp"),
        "peers": _tree(served),  # the loopback APNs/FCM peers' process (stand-ins for Apple's and Google's)
        "bench": lambda: [os.getpid()],  # this loop's polling
    })  # fmt: skip
    meter.start()
    load_before = _load()
    timeout = LEAD_SECONDS + 120 + storm.pushes / 100  # a loaded 2-core machine drains 200-500 pushes/s
    deadline = time.monotonic() + timeout
    done = 0
    while time.monotonic() < deadline:
        done = dm.PushSend.objects.filter(pk__gt=before).count()  # one device a player: a row a push
        if done >= storm.pushes:
            break
        time.sleep(0.2)
    cpu = meter.stop()
    pg.close()
    load_after = _load()
    for proc in [beat, *worker_procs, *gateway_procs]:
        h.stop(proc)
    at = instant.timestamp()
    if peers:
        stamps = [s - at for s in peers.accepted()]
    else:
        stamps = sorted(
            (d - instant).total_seconds()
            for d in dm.PushSend.objects.filter(pk__gt=before).values_list("recorded_at", flat=True)
        )
    first_send = dm.PushSend.objects.filter(recorded_at__gte=since).aggregate(at=Min("recorded_at"))["at"]
    last_done = dm.PushSend.objects.filter(pk__gt=before).aggregate(at=Max("recorded_at"))["at"]
    sent = tm.Push.objects.filter(status=tm.PushStatus.SENT, key__startswith="storm-").count()
    ran = tm.ReminderRun.objects.aggregate(first=Min("ran_at"), last=Max("ran_at"))
    steps = {"first_fired": ran["first"], "last_fired": ran["last"], "first_send": first_send,
             "last_done": last_done}  # fmt: skip
    accepted = len(stamps)
    last = stamps[-1] if stamps else math.nan
    teams = _team_completions(instant)
    return {
        "label": label, "workers": workers, "gateways": gateways, "pushes": storm.pushes, "instant_at": at,
        "published": sent, "done": done, "accepted": accepted,
        "instant_to_last": last, "rate": accepted / last if last and last > 0 else math.nan,
        "p50": quantile(stamps, 0.5), "p99": quantile(stamps, 0.99),
        "first": stamps[0] if stamps else math.nan,
        "gateway_seconds": (last_done - first_send).total_seconds() if first_send and last_done else math.nan,
        "steps": {k: (v - instant).total_seconds() if v else math.nan for k, v in steps.items()},
        "team_p50": quantile(teams, 0.5), "team_p99": quantile(teams, 0.99),
        "cpu_seconds": cpu, "cpu_us": {k: v / max(accepted, 1) * 1e6 for k, v in cpu.items()},
        "load": (load_before, load_after),
    }  # fmt: skip


def _team_completions(instant: datetime) -> list[float]:
    """Seconds from the instant to each training's last push done (its PushSend row), sorted."""
    from django.db import connection

    from delivery import models as dm
    from trainings import models as tm

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT max(d.recorded_at) FROM {tm.Push._meta.db_table} AS p
              JOIN {dm.PushSend._meta.db_table} AS d ON d.push_key = p.key
             WHERE p.key LIKE %s
             GROUP BY p.training_id
            """,
            [STORM_KEYS],
        )
        return sorted((row[0] - instant).total_seconds() for row in cursor.fetchall())


def _load() -> float:
    import os

    return os.getloadavg()[0]


# Processes of the project whose CPU the target counts (RabbitMQ's broker is reported apart).
_PROJECT = ("worker", "beat", "gateway", "postgresql")


def _total_us(result: dict[str, Any]) -> float:
    return sum(result["cpu_us"][k] for k in _PROJECT)


def _cpu_note(result: dict[str, Any]) -> str:
    us = result["cpu_us"]
    parts = ", ".join(f"{k} {us[k]:,.0f}" for k in _PROJECT)
    broker = f"RabbitMQ broker {us['rabbitmq']:,.0f} µs/push (shared by every session: an upper bound)"
    # Not the project's: the loopback APNs/FCM peers (stand-ins for Apple's and Google's servers), on the
    # same cores as the path they serve, and the benchmark's own polling.
    peers, bench = us.get("peers", 0), us.get("bench", 0)
    others = f"the peers {peers:,.0f} and the bench process {bench:,.0f} µs/push (not counted)"
    return f"{parts} µs/push; {broker}; {others}"


def run(h: Harness, reminders: int | None = None) -> Section:
    from bench.scenarios.dispatch import _raw_publish

    n = reminders or h.sizes.storm_reminders
    section = Section("storm")
    h.truncate_engine()
    h.declare(h.push_queue)
    h.declare(h.celery_queue)
    setup_start = time.perf_counter()
    storm = _setup(n)
    print(f"  {n:,} trainings of {PLAYERS} players scheduled in {time.perf_counter() - setup_start:.0f} s",
          flush=True)  # fmt: skip
    peers = served_peers_start(Path(h.log_dir) / "storm-peers", log_path=Path(h.log_dir) / "storm-peers.log")
    try:
        raw_count = min(storm.pushes, 20_000)
        raw_seconds, _ = _raw_publish(h, raw_count, per_transaction=500)
        raw = raw_count / raw_seconds
        repeats: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in ROUNDS}
        for _ in range(h.sizes.storm_repeats):
            for label, workers, gateways, to_peers, env in ROUNDS:
                result = _round(h, storm, label, workers=workers, gateways=gateways,
                                peers=peers if to_peers else None, env=env)  # fmt: skip
                repeats[label].append(result)
                print(
                    f"  {label}: {result['accepted']:,}/{storm.pushes:,} accepted, last "
                    f"{result['instant_to_last']:.2f} s after the instant, p50 {result['p50']:.2f} s, "
                    f"p99 {result['p99']:.2f} s, "
                    f"{_total_us(result):,.0f} µs CPU/push (load {result['load'][0]:.2f}); steps (s after "
                    f"the instant): {', '.join(f'{k} {v:.2f}' for k, v in result['steps'].items())}",
                    flush=True,
                )
        quota = quota_round(storm, peers, lambda label, **kw: _round(h, storm, label, peers=peers, **kw))
        print(f"  quota: {quota['quota']}", flush=True)
    finally:
        peers.stop()
    ours, logging_run, scaled, unpaced = (_median_round(repeats[label]) for label, *_ in ROUNDS)
    section.rows += _rows(n, storm.pushes, raw, raw_count, ours, logging_run, scaled, repeats)
    section.rows += [
        pacing_row(ours, unpaced, _median_ratio(repeats["peers"], repeats["peers-unpaced"])),
        quota_row(quota, storm.pushes),
    ]
    rounds = [r for label, *_ in ROUNDS for r in repeats[label]] + [quota]
    section.data = {"reminders": n, "pushes": storm.pushes, "raw_publish": raw, "rounds": rounds}
    h.truncate_engine()
    return section


def _median_round(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of the median CPU per push end to end (the lower middle of an even count): its figures
    stay one round's, consistent with each other."""
    return sorted(results, key=_total_us)[(len(results) - 1) // 2]


def _median_ratio(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], part: str = "gateway") -> float:
    """The median over the alternations of `part`'s CPU per push in our round over the other's."""
    return statistics.median(a["cpu_us"][part] / b["cpu_us"][part] for a, b in zip(ours, theirs, strict=True))


def _spread(results: list[dict[str, Any]]) -> str:
    return " / ".join(f"{_total_us(r):,.0f}" for r in results)


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def _rows(
    n: int,
    pushes: int,
    raw: float,
    raw_count: int,
    ours: dict[str, Any],
    logging_run: dict[str, Any],
    scaled: dict[str, Any],
    repeats: dict[str, list[dict[str, Any]]],
) -> list[Row]:
    total = _total_us(ours)
    cores = _cores(total)
    complete = all(r["accepted"] == pushes for label, *_ in ROUNDS for r in repeats[label])
    gateway_ratio = ours["rate"] / logging_run["rate"] if logging_run["rate"] else math.nan
    gateway_cpu_ratio = _median_ratio(repeats["peers"], repeats["logging"])
    medians = (
        f"the median of {len(repeats['peers'])} alternated rounds each (µs/push end to end, in turn: to the "
        f"peers {_spread(repeats['peers'])}; logging provider {_spread(repeats['logging'])})"
    )
    scale_ratio = scaled["rate"] / ours["rate"] if ours["rate"] else math.nan
    loads = " / ".join(
        f"{r['label']} {r['load'][0]:.2f}→{r['load'][1]:.2f}" for r in (ours, logging_run, scaled)
    )
    with_broker = _cores(total + ours["cpu_us"]["rabbitmq"])
    busy = f"{ours['gateway_seconds']:.2f} s vs {logging_run['gateway_seconds']:.2f} s"
    last_scaled = f"last {scaled['instant_to_last']:.2f} s after the instant"
    return [
        Row(
            f"8a storm: {n:,} reminders x {PLAYERS} at one instant → last push accepted",
            ours["instant_to_last"],
            unit="s",
            note=f"{ours['accepted']:,}/{pushes:,} accepted by the APNs/FCM peers, {ours['published']:,} "
            f"published; first {ours['first']:.3f} s after the instant; load average (1 min) per round "
            f"{loads}",
        ),
        Row(
            "8b storm throughput, instant → last accepted",
            ours["rate"],
            raw,
            "raw publish, tx per 500",
            "pushes/s",
            ours["rate"] / raw if raw else None,
            "of raw",
            note=f"raw durable publish limit measured in the same run ({raw_count:,} messages)",
        ),
        Row("8c storm per-push lateness at the peer p50", ours["p50"], logging_run["p50"], "logging", "s"),
        Row("8d storm per-push lateness at the peer p99", ours["p99"], logging_run["p99"], "logging", "s"),
        Row(
            "8e storm CPU per push, end to end",
            total,
            _total_us(logging_run),
            "logging provider",
            "µs",
            target=f"≤ {TARGET_CPU_US:.0f} µs",
            passed=complete and total <= TARGET_CPU_US,
            note=f"{medians}; to the peers: {_cpu_note(ours)}; logging provider: {_cpu_note(logging_run)}",
        ),
        Row(
            f"8f storm cores for {PUSHES_AT_ONCE:,} pushes in {SECONDS_FOR_THEM:.0f} s",
            cores,
            unit="cores",
            target="≤ 3",
            passed=complete and cores <= 3,
            note=f"{total:,.0f} µs/push x {PUSHES_AT_ONCE:,} / {SECONDS_FOR_THEM:.0f} s; "
            f"{with_broker:.1f} with the RabbitMQ broker's upper bound",
        ),
        Row(
            "8g storm gateway CPU per push, to the peers / to the logging provider",
            ours["cpu_us"]["gateway"],
            logging_run["cpu_us"]["gateway"],
            "logging provider",
            "µs",
            gateway_cpu_ratio,
            "of logging",
            f"≤ {TARGET_GATEWAY_CPU}x",
            passed=complete and gateway_cpu_ratio <= TARGET_GATEWAY_CPU,
            note=f"same run, the median of the alternations' ratios (median rounds' µs above); throughput "
            f"{ours['rate']:,.0f} vs {logging_run['rate']:,.0f} pushes/s end to "
            f"end ({gateway_ratio:.2f}x: on two cores the loopback peers' CPU caps it); gateway busy {busy} "
            "(first send → last done)",
        ),
        Row(
            "8h storm fairness: per-team completion p99 / median",
            ours["team_p99"] / ours["team_p50"] if ours["team_p50"] else None,
            unit="x",
            target="≤ 2x",
            passed=complete and ours["team_p99"] <= 2 * ours["team_p50"],
            note=f"each training's last push done, after the instant: p50 {ours['team_p50']:.2f} s, p99 "
            f"{ours['team_p99']:.2f} s (teams of one size here; a big team beside small ones is "
            "tests/trainings/test_storm_fairness.py, which checks the publishing order)",
        ),
        Row(
            "8i storm 2 workers + 2 gateways / 1 + 1",
            scaled["rate"],
            ours["rate"],
            "1 worker + 1 gateway",
            "pushes/s",
            scale_ratio,
            "of 1+1",
            note=f"{scaled['accepted']:,}/{pushes:,} accepted, {last_scaled}; {_total_us(scaled):,.0f} µs "
            f"CPU/push ({_cpu_note(scaled)}); on {_cpus()} cores shared with PostgreSQL, RabbitMQ, the peers "
            "and other sessions, more processes add throughput only while a core is idle",
        ),
    ]


def _cores(us_per_push: float) -> float:
    """Cores busy for PUSHES_AT_ONCE pushes in SECONDS_FOR_THEM at this CPU cost per push."""
    return us_per_push * PUSHES_AT_ONCE / SECONDS_FOR_THEM / 1e6
