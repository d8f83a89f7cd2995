"""The chaos list of a PostgreSQL queue benchmark, each fault against a burst on a PostgreSQL of our own:
a restart, repeated worker kills, repeated backend kills, a session idle in transaction holding the xmin
horizon, the connection slots exhausted, and priority starvation.

Each scenario runs two real workers on a burst of jobs spread over BURST seconds, applies its fault while
the burst is due, and records, for the occurrences due while the fault lasted, their lateness (delivered_at
- fire_at: p50, p99, max), that nothing was lost (every occurrence delivered and on its queue under its
own message id), and the table's bloat afterwards (n_dead_tup of reminders_occurrence, and pgstattuple's
dead tuple share). The xmin hold lasts FAULT_XMIN_HOLD_SECONDS (60 in CI; docs/operations/faults.md
gives the 10-minute figure of a run by hand).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from bench.processes import read_queue
from tests.faults import harness
from tests.faults.pg_pair import PgPair, PgTemplate

pytestmark = [pytest.mark.faults, pytest.mark.clusters, pytest.mark.rabbitmq]

JOBS = 1000
BURST = 30.0
XMIN_HOLD = float(os.environ.get("FAULT_XMIN_HOLD_SECONDS", "60"))


@dataclass
class Chaos:
    """One scenario's cluster, workers and queue, and what the fault window was."""

    pair: PgPair
    workers: list[harness.WorkerProcess]
    queue: str
    fault_from: float = 0.0  # epoch seconds
    fault_to: float = 0.0

    def value(self, sql: str, params: tuple[object, ...] = ()) -> object:
        return self.pair.primary.value(sql, params)

    def delivered(self) -> int:
        return int(self.value("SELECT count(*) FROM reminders_occurrence WHERE status = 'delivered'"))

    def wait_delivered(self, count: int, timeout: float = 180) -> None:
        harness.wait_for(lambda: self.delivered() >= count, timeout=timeout, what=f"{count} delivered")


@pytest.fixture
def chaos_cluster(pg_template: PgTemplate) -> Iterator[Callable[..., PgPair]]:
    made: list[PgPair] = []

    def make(**kwargs: object) -> PgPair:
        pair = PgPair(pg_template, standby=False, **kwargs)
        made.append(pair)
        return pair

    yield make
    for pair in made:
        pair.remove()


def run(
    pair: PgPair,
    tmp_path: Path,
    fault: Callable[[Chaos], None],
    *,
    jobs: int = JOBS,
    burst: float = BURST,
    env: dict[str, str] | None = None,
    seed: Callable[[Chaos], None] | None = None,
    restart_dead: bool = False,
) -> tuple[Chaos, dict[str, str]]:
    """The burst, the fault once a quarter of it is delivered, then every occurrence delivered; figures."""
    chaos = Chaos(pair, [], f"test.chaos.{uuid.uuid4().hex[:10]}")
    chaos.workers = [
        harness.WorkerProcess(
            name=f"chaos-{n}",
            workdir=tmp_path,
            env={"DATABASE_URL": pair.url(f"fault-chaos-{n}"), "REMINDERS_BATCH_SIZE": "50", **(env or {})},
        )
        for n in range(2)
    ]
    try:
        harness.start_together(chaos.workers)
        if seed is not None:
            seed(chaos)
        else:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.faults.cluster_seed",
                    "engine",
                    chaos.queue,
                    str(jobs),
                    "2",
                    str(burst),
                ],
                env={**os.environ, "DATABASE_URL": pair.url()},
                check=True,
                timeout=300,
            )
        total = int(chaos.value("SELECT count(*) FROM reminders_occurrence"))
        with harness.Kicker():
            chaos.wait_delivered(total // 4)
            chaos.fault_from = time.time()
            fault(chaos)
            chaos.fault_to = time.time()
            chaos.wait_delivered(total)
        if not restart_dead:
            for worker in chaos.workers:
                assert worker.alive and worker.starts == 1, f"{worker.name} restarted\n{worker.log_tail()}"
        statuses = dict(
            pair.primary.connect().execute("SELECT status, count(*) FROM reminders_occurrence GROUP BY 1")
        )
        assert statuses == {"delivered": total}, statuses
        arrivals = read_queue(settings.CELERY_BROKER_URL, chaos.queue, expect=total, timeout=60)
        keys = {
            k for (k,) in pair.primary.connect().execute("SELECT idempotency_key FROM reminders_occurrence")
        }
        assert set(arrivals.by_message_id) == keys, "an occurrence never reached its queue"
        return chaos, figures(chaos, arrivals.duplicates)
    finally:
        for worker in chaos.workers:
            worker.stop()
        harness.delete_queue(chaos.queue)


def figures(chaos: Chaos, duplicates: int) -> dict[str, str]:
    node = chaos.pair.primary
    p50, p99, late_max, n = (
        node.connect()
        .execute(
            """SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s),
                  percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s), count(*)
             FROM (SELECT EXTRACT(EPOCH FROM delivered_at - fire_at) AS s FROM reminders_occurrence
                    WHERE fire_at BETWEEN to_timestamp(%s) AND to_timestamp(%s)) t""",
            [chaos.fault_from, max(chaos.fault_to, chaos.fault_from + 1)],
        )
        .fetchone()
    )
    time.sleep(1.5)  # the backends' statistics reach pg_stat_user_tables within a second
    dead, live = (
        node.connect()
        .execute(
            "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relname = 'reminders_occurrence'"
        )
        .fetchone()
    )
    with contextlib.closing(node.connect()) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        dead_share = conn.execute(
            "SELECT dead_tuple_percent FROM pgstattuple('reminders_occurrence')"
        ).fetchone()[0]
    return {
        "lateness": f"lateness of the {n} due during the fault: p50 {p50 or 0:.2f} s, p99 {p99 or 0:.2f} s, "
        f"max {late_max or 0:.2f} s",
        "bloat": f"afterwards {dead} dead / {live} live tuples in reminders_occurrence "
        f"({dead_share:.0f}% dead by pgstattuple)",
        "duplicates": f"{duplicates} duplicates (same message_id)",
    }


def test_postgres_restarted_mid_burst(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    pair = chaos_cluster()

    def restart(chaos: Chaos) -> None:
        pair.primary.stop("immediate")  # a crash: recovery replays the WAL at the start
        time.sleep(2)
        pair.primary.start()

    _, fig = run(pair, tmp_path, restart)
    harness.record(
        "chaos: PostgreSQL restarted",
        f"`pg_ctl stop -m immediate`, 2 s down, start (crash recovery) during a {JOBS} burst over "
        f"{BURST:.0f} s",
        f"{JOBS}/{JOBS} delivered by the same 2 workers; {fig['lateness']}; {fig['duplicates']}; "
        f"{fig['bloat']}",
    )


def test_workers_killed_again_and_again(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    pair = chaos_cluster()
    kills = 6

    def kill_repeatedly(chaos: Chaos) -> None:
        for n in range(kills):
            worker = chaos.workers[n % 2]
            worker.kill()
            worker.start()  # the supervisor's restart (systemd Restart=always)
            time.sleep(1)

    _, fig = run(pair, tmp_path, kill_repeatedly, restart_dead=True)
    harness.record(
        "chaos: workers killed repeatedly",
        f"kill -9 of a worker {kills} times, each restarted at once (as systemd does), during a {JOBS} burst",
        f"{JOBS}/{JOBS} delivered; {fig['lateness']} (lease {harness.LEASE_SECONDS} s); {fig['duplicates']}; "
        f"{fig['bloat']}",
    )


def test_backends_killed_again_and_again(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    pair = chaos_cluster()
    rounds = 8

    def terminate_repeatedly(chaos: Chaos) -> None:
        for _ in range(rounds):
            pair.primary.value(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name LIKE 'fault-%'"
            )
            time.sleep(1)

    _, fig = run(pair, tmp_path, terminate_repeatedly)
    harness.record(
        "chaos: backends killed repeatedly",
        f"pg_terminate_backend of every worker backend (LISTEN ones included) every second, {rounds} times",
        f"{JOBS}/{JOBS} delivered by the same 2 workers; {fig['lateness']}; {fig['duplicates']}; "
        f"{fig['bloat']}",
    )


def test_an_idle_transaction_holds_the_xmin_horizon(
    chaos_cluster: Callable[..., PgPair], tmp_path: Path
) -> None:
    pair = chaos_cluster()
    held: dict[str, object] = {}
    # The burst lasts as long as the hold, so the whole of it is delivered under the held horizon.
    jobs, burst = max(JOBS, int(XMIN_HOLD * 25)), XMIN_HOLD

    def hold(chaos: Chaos) -> None:
        conn = psycopg.connect(
            host="127.0.0.1",
            port=pair.primary.port,
            user="postgres",
            dbname="reminders",
            application_name="holder",
        )
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute(
            "SELECT count(*) FROM reminders_occurrence"
        ).fetchone()  # the snapshot: xmin held from here
        time.sleep(XMIN_HOLD)
        pair.primary.value("VACUUM reminders_occurrence")  # what autovacuum would do: it cannot remove them
        time.sleep(1.5)
        held["dead"] = pair.primary.value(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'reminders_occurrence'"
        )
        conn.rollback()
        conn.close()

    _, fig = run(pair, tmp_path, hold, jobs=jobs, burst=burst)
    pair.primary.value("VACUUM reminders_occurrence")
    time.sleep(1.5)
    after = pair.primary.value(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'reminders_occurrence'"
    )
    assert int(held["dead"]) > int(after)
    harness.record(
        "chaos: idle in transaction holding xmin",
        f"a REPEATABLE READ session left idle in transaction for {XMIN_HOLD:.0f} s during a {jobs} "
        f"burst over {burst:.0f} s (FAULT_XMIN_HOLD_SECONDS)",
        f"{jobs}/{jobs} delivered by the same 2 workers; {fig['lateness']}; {fig['duplicates']}; "
        f"{held['dead']} dead tuples VACUUM could not remove while it was held, {after} after it ended and "
        f"VACUUM ran",
    )


def test_every_connection_slot_taken(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    # No slots kept for superusers: the workers connect as the cluster's superuser too.
    pair = chaos_cluster(max_connections=24)
    pair.primary.value("ALTER SYSTEM SET superuser_reserved_connections = 0")
    pair.primary.stop()
    pair.primary.start()
    hold_seconds = 15.0
    refused: list[str] = []

    def exhaust(chaos: Chaos) -> None:
        hogs = []
        while True:
            try:
                hogs.append(pair.primary.connect(application_name="hog"))
            except psycopg.OperationalError as exc:
                refused.append(str(exc).strip().splitlines()[-1])
                break
        # The workers' connections go (as a restart of the database's clients would do to them); their
        # reconnections find no slot until the hogs let go.
        hogs[-1].execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name LIKE 'fault-%'"
        )
        # The slots they freed: taken again before the workers reconnect (they retry on their next kick).
        until = time.monotonic() + 3
        while time.monotonic() < until:
            with contextlib.suppress(psycopg.OperationalError):
                hogs.append(pair.primary.connect(application_name="hog"))
        count = "SELECT count(*) FROM reminders_occurrence WHERE status = 'delivered'"
        held_at = hogs[0].execute(count).fetchone()[0]
        time.sleep(hold_seconds)
        delivered = hogs[0].execute(count).fetchone()[0] - held_at
        refused.append(f"{delivered} delivered while every slot was taken")
        for hog in hogs:
            hog.close()

    _, fig = run(pair, tmp_path, exhaust)
    assert "too many clients" in refused[0] or "remaining connection slots" in refused[0], refused
    harness.record(
        "chaos: connection slots exhausted",
        f"max_connections (24) taken by idle sessions for {hold_seconds:.0f} s after the workers' "
        "backends were terminated",
        f"{JOBS}/{JOBS} delivered by the same 2 workers once slots were free ({refused[-1]}); "
        f"{fig['lateness']}; {fig['duplicates']}; {fig['bloat']}",
    )


def test_low_priority_is_not_starved(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    pair = chaos_cluster()
    high, low, aging = 3000, 100, 5.0

    def seed(chaos: Chaos) -> None:
        # All due at once: more high-priority work than the workers clear in the aging window.
        for priority, count in ((9, high), (0, low)):
            subprocess.run(
                [sys.executable, "-m", "tests.faults.cluster_seed", "engine", chaos.queue, str(count),
                 "2", "0", str(priority)],
                env={**os.environ, "DATABASE_URL": pair.url()},
                check=True,
                timeout=300,
            )  # fmt: skip

    def watch(chaos: Chaos) -> None:
        chaos.fault_from -= 10  # the whole burst is the fault: it was due at once
        harness.wait_for(
            lambda: (
                chaos.value(
                    "SELECT count(*) FROM reminders_occurrence WHERE priority = 0 AND status <> 'delivered'"
                )
                == 0
            ),
            timeout=180,
            what="the low-priority rows delivered",
        )

    run(pair, tmp_path, watch, seed=seed, env={"REMINDERS_PRIORITY_AGING_SECONDS": str(aging)})
    lows = (
        pair.primary.connect()
        .execute(
            """SELECT max(EXTRACT(EPOCH FROM delivered_at - fire_at)) FILTER (WHERE priority = 0),
                  max(EXTRACT(EPOCH FROM delivered_at - fire_at)) FILTER (WHERE priority = 9)
             FROM reminders_occurrence"""
        )
        .fetchone()
    )
    low_max, high_max = float(lows[0]), float(lows[1])
    assert low_max < high_max, "the low-priority rows were served last: starved"
    harness.record(
        "chaos: priority starvation",
        f"{high} priority-9 and {low} priority-0 occurrences due at once; "
        f"REMINDERS_PRIORITY_AGING_SECONDS={aging:.0f}",
        f"{high + low}/{high + low} delivered; the last priority-0 row {low_max:.1f} s late, the last "
        f"priority-9 {high_max:.1f} s late (aged rows take a share of every batch: none waits for the "
        "whole backlog)",
    )
