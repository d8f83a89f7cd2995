"""The chaos list of a PostgreSQL queue benchmark, each fault against a burst on a PostgreSQL of our own:
a restart, repeated worker kills, repeated backend kills, a session idle in transaction holding the xmin
horizon, the connection slots exhausted, priority starvation, and a retry storm of a failing HTTP endpoint
beside a healthy stream (every attempt checked against the requests the endpoint saw and the policy).

Each scenario runs two real workers on a burst of jobs spread over BURST seconds, applies its fault while
the burst is due, and records, for the occurrences due while the fault lasted, their lateness (delivered_at
- fire_at: p50, p99, max), that nothing was lost (every occurrence delivered and on its queue under its
own message id), and the table's bloat afterwards (n_dead_tup of reminders_occurrence, and pgstattuple's
dead tuple share). The xmin hold lasts FAULT_XMIN_HOLD_SECONDS (60 in CI; docs/operations/faults.md
gives the 10-minute figure of a run by hand).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from bench.processes import read_queue
from reminders.engine.retry import RetryPolicy
from tests.faults import harness
from tests.faults.pg_pair import PgPair, PgTemplate
from tests.http_receiver import QuietHandler, serving

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
    return {
        "lateness": f"lateness of the {n} due during the fault: p50 {p50 or 0:.2f} s, p99 {p99 or 0:.2f} s, "
        f"max {late_max or 0:.2f} s",
        "bloat": bloat(chaos),
        "duplicates": f"{duplicates} duplicates (same message_id)",
    }


def bloat(chaos: Chaos) -> str:
    """reminders_occurrence's dead tuples after the run, by the statistics and by pgstattuple."""
    node = chaos.pair.primary
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
    return (
        f"afterwards {dead} dead / {live} live tuples in reminders_occurrence "
        f"({dead_share:.0f}% dead by pgstattuple)"
    )


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


# --- a retry storm: many jobs whose HTTP endpoint fails for a stretch, beside a healthy stream ----------

STORM_JOBS, DOWN_JOBS, HEALTHY_JOBS = 1000, 200, 1500
STORM_SECONDS = 20.0  # how long the storm's endpoint fails after its jobs fall due
STORM_READ_TIMEOUT = 1.0
# Every n-th failing request hangs past the read timeout (FAULT_STORM_HANG_EVERY=0: all answer 500 at once).
STORM_HANG_EVERY = int(os.environ.get("FAULT_STORM_HANG_EVERY", "5"))
STORM_POLICY = RetryPolicy(max_attempts=8, base_seconds=1.0, max_seconds=8.0)
# HTTP chunks out at once on each worker's lane (FAULT_STORM_LANE_CHUNKS=0: inside the scan, as before).
STORM_LANE_CHUNKS = int(os.environ.get("FAULT_STORM_LANE_CHUNKS", "4"))


@dataclass
class StormEndpoint:
    """The failing endpoint: `/storm` answers 500 (every fifth request hangs past the read timeout) until
    `recover_at`, then 200; `/down` fails always. Keeps every request it saw, per Idempotency-Key."""

    recover_at: float = float("inf")  # epoch seconds
    seen: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, key: str) -> str:
        with self.lock:
            self.requests += 1
            if path == "/down" or time.time() < self.recover_at:
                hang = STORM_HANG_EVERY and self.requests % STORM_HANG_EVERY == 0
                answer = "timeout" if hang else "500"
            else:
                answer = "200"
            self.seen.setdefault(key, []).append((time.monotonic(), answer))
            return answer


@contextlib.contextmanager
def storm_endpoint() -> Iterator[tuple[StormEndpoint, int]]:
    state = StormEndpoint()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            answer = state.answer(self.path, self.headers.get("Idempotency-Key", ""))
            if answer == "timeout":
                time.sleep(STORM_READ_TIMEOUT * 2)
            with contextlib.suppress(OSError):  # a timed-out caller has hung up
                self.answer(200 if answer == "200" else 500)

    with serving(Handler) as port:
        yield state, port


def _seed(*args: object, url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "tests.faults.cluster_seed", *(str(a) for a in args)],
        env={**os.environ, "DATABASE_URL": url},
        check=True,
        timeout=300,
    )


def test_a_retry_storm_beside_a_healthy_stream(chaos_cluster: Callable[..., PgPair], tmp_path: Path) -> None:
    pair = chaos_cluster()
    policy = STORM_POLICY
    queue = f"test.chaos.{uuid.uuid4().hex[:10]}"
    chaos = Chaos(pair, [], queue)
    env = {
        "REMINDERS_BATCH_SIZE": "50",
        "REMINDERS_HTTP_ALLOW_PRIVATE": "true",  # the endpoint is on loopback
        "REMINDERS_HTTP_READ_TIMEOUT": str(STORM_READ_TIMEOUT),
        "REMINDERS_HTTP_LANE_CHUNKS": str(STORM_LANE_CHUNKS),
        "REMINDERS_MAX_ATTEMPTS": str(policy.max_attempts),
        "REMINDERS_RETRY_BASE_SECONDS": str(policy.base_seconds),
        "REMINDERS_RETRY_MAX_SECONDS": str(policy.max_seconds),
    }
    chaos.workers = [
        harness.WorkerProcess(
            name=f"storm-{n}", workdir=tmp_path, env={"DATABASE_URL": pair.url(f"fault-storm-{n}"), **env}
        )
        for n in range(2)
    ]
    total = HEALTHY_JOBS + STORM_JOBS + DOWN_JOBS
    try:
        with storm_endpoint() as (endpoint, port):
            harness.start_together(chaos.workers)
            # The healthy stream starts first; the storm's jobs all fall due at once a few seconds into it.
            _seed("engine", queue, HEALTHY_JOBS, 8, 50, url=pair.url())
            _seed("http", f"http://127.0.0.1:{port}/down", DOWN_JOBS, 12, 0, url=pair.url())
            _seed("http", f"http://127.0.0.1:{port}/storm", STORM_JOBS, 10, 0, url=pair.url())
            storm_from, storm_due = (
                float(v)
                for v in pair.primary.connect()
                .execute(
                    "SELECT EXTRACT(EPOCH FROM min(o.fire_at)), EXTRACT(EPOCH FROM max(o.fire_at))"
                    " FROM reminders_occurrence o JOIN reminders_job j ON j.id = o.job_id"
                    " WHERE j.callback_type = 'http'"
                )
                .fetchone()
            )
            endpoint.recover_at = storm_due + STORM_SECONDS
            with harness.Kicker():
                harness.wait_for(
                    lambda: (
                        chaos.value(
                            "SELECT count(*) FROM reminders_occurrence"
                            " WHERE status NOT IN ('delivered', 'failed')"
                        )
                        == 0
                    ),
                    timeout=300,
                    what="every occurrence delivered or failed",
                )
        for worker in chaos.workers:
            assert worker.alive and worker.starts == 1, f"{worker.name} restarted\n{worker.log_tail()}"
        rows = (
            pair.primary.connect()
            .execute(
                """SELECT j.target, o.idempotency_key, o.status, o.attempts, o.claimed_until IS NULL,
                      EXTRACT(EPOCH FROM COALESCE(o.delivered_at, o.finished_at)), o.last_error
                 FROM reminders_occurrence o JOIN reminders_job j ON j.id = o.job_id"""
            )
            .fetchall()
        )
        assert len(rows) == total
        healthy = [r for r in rows if r[0] == queue]
        storm = [r for r in rows if r[0].endswith("/storm")]
        down = [r for r in rows if r[0].endswith("/down")]
        assert (len(healthy), len(storm), len(down)) == (HEALTHY_JOBS, STORM_JOBS, DOWN_JOBS)
        assert {r[2] for r in healthy} == {"delivered"}
        assert all(r[4] for r in rows), "a finished row still holds a lease"
        storm_to = float(max(r[5] for r in storm + down))

        # Every attempt the database counts is a request the endpoint saw, no more: the policy's, exactly.
        gaps_short: list[tuple[str, int, float]] = []
        waits: dict[int, list[float]] = {}
        for _, key, status, attempts, _, _, error in storm + down:
            seen = endpoint.seen.get(key, [])
            answers = [answer for _, answer in seen]
            assert attempts == len(seen), (key, status, attempts, answers, error)
            assert attempts <= policy.max_attempts, (key, attempts)
            if status == "delivered":
                assert answers[-1] == "200" and "200" not in answers[:-1], (key, answers)
            else:
                assert status == "failed" and attempts == policy.max_attempts, (key, status, answers)
                assert "200" not in answers, (key, answers)
            for n, ((at, _), (later, _)) in enumerate(itertools.pairwise(seen), start=1):
                wait = later - at
                waits.setdefault(n, []).append(wait)
                ceiling = min(policy.max_seconds, policy.base_seconds * 2 ** (n - 1))
                if wait < ceiling / 2 - 0.05:
                    gaps_short.append((key, n, wait))
        assert not gaps_short, f"retried sooner than the backoff allows: {gaps_short[:5]}"
        assert {r[2] for r in down} == {"failed"}
        storm_delivered = sum(1 for r in storm if r[2] == "delivered")

        arrivals = read_queue(settings.CELERY_BROKER_URL, queue, expect=HEALTHY_JOBS, timeout=60)
        assert set(arrivals.by_message_id) == {r[1] for r in healthy}, "a healthy occurrence never arrived"

        def lateness(start: float, end: float) -> tuple[int, float, float, float]:
            n, p50, p99, most = (
                pair.primary.connect()
                .execute(
                    """SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY s),
                              percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s)
                         FROM (SELECT EXTRACT(EPOCH FROM o.delivered_at - o.fire_at) AS s
                                 FROM reminders_occurrence o JOIN reminders_job j ON j.id = o.job_id
                                WHERE j.target = %s AND o.fire_at >= to_timestamp(%s)
                                  AND o.fire_at < to_timestamp(%s)) t""",
                    [queue, start, end],
                )
                .fetchone()
            )
            return int(n), float(p50 or 0), float(p99 or 0), float(most or 0)

        before = lateness(0, storm_from)
        during = lateness(storm_from, storm_to)
        chaos.fault_from, chaos.fault_to = storm_from, storm_to
        table_bloat = bloat(chaos)
    finally:
        for worker in chaos.workers:
            worker.stop()
        harness.delete_queue(queue)

    # The storm's chunks go out on each worker's HTTP lane, beside its scan: the healthy stream stays on
    # time (a second run of today's machine: p99 0.02 s, max 0.12 s). Without the lane each HTTP chunk held
    # the scan for its timeouts (p99 16.86 s, max 18.13 s): then only "never stalled for the whole
    # failing stretch" holds (docs/operations/faults.md).
    if STORM_LANE_CHUNKS:
        assert during[2] < 1.0 and during[3] < 3.0, f"healthy jobs held by the storm: {before}, {during}"
    else:
        assert during[3] < STORM_SECONDS, f"healthy jobs stalled by the storm: {before}, {during}"
    requests = sum(len(s) for s in endpoint.seen.values())
    first_waits = ", ".join(f"#{n} {min(w):.2f}-{max(w):.2f} s" for n, w in sorted(waits.items()) if n <= 4)
    hangs = (
        f"every {STORM_HANG_EVERY}th request hanging past the {STORM_READ_TIMEOUT:.0f} s read timeout"
        if STORM_HANG_EVERY
        else "at once, none hanging"
    )
    harness.record(
        "chaos: retry storm of a failing endpoint",
        f"{STORM_JOBS} HTTP jobs due at once to a loopback endpoint answering 500 ({hangs}) "
        f"for {STORM_SECONDS:.0f} s, then 200, "
        f"and {DOWN_JOBS} to one that always fails; beside {HEALTHY_JOBS} RabbitMQ jobs over 50 s; "
        f"retry policy {policy.max_attempts} attempts, base {policy.base_seconds:.0f} s, max "
        f"{policy.max_seconds:.0f} s; 2 workers, REMINDERS_HTTP_LANE_CHUNKS={STORM_LANE_CHUNKS}",
        f"healthy lateness before the storm (n {before[0]}): p50 {before[1]:.2f} s, p99 {before[2]:.2f} s, "
        f"max {before[3]:.2f} s; during it ({storm_to - storm_from:.0f} s, n {during[0]}): p50 "
        f"{during[1]:.2f} s, p99 {during[2]:.2f} s, max {during[3]:.2f} s; {HEALTHY_JOBS}/{HEALTHY_JOBS} "
        f"healthy delivered; storm: {storm_delivered} delivered after the endpoint recovered, "
        f"{STORM_JOBS - storm_delivered} `failed` after {policy.max_attempts} attempts; {DOWN_JOBS}/"
        f"{DOWN_JOBS} `failed` after {policy.max_attempts}; every attempt counted = a request the endpoint "
        f"saw ({requests} in all), none sooner than its backoff (waits {first_waits}), 0 left claimed; "
        f"{table_bloat}",
    )
