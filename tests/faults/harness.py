"""The pieces every fault scenario is built from: real worker processes, a beat stand-in, a TCP proxy to
cut the broker with, and the results table the suite writes. Processes, consumers and arrival counting are
shared with the benchmark (bench/processes.py).

A scenario starts `WorkerProcess`es, keeps a `Kicker` running, injects its fault (kill/freeze at a
reported phase, cut the proxy, terminate backends), asserts on the database and on what `read_queue()`
consumed, and `record()`s one row for the table.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Count
from django.utils import timezone

from bench import processes
from bench.processes import Arrivals
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from tests.fault_table import record  # noqa: F401 - the scenarios call harness.record
from tests.faults.tcp_proxy import TcpProxy, broker_address  # noqa: F401 - the scenarios call harness.*

LEASE_SECONDS = 5


# --- database and broker addresses for the worker processes -------------------------------------------


def worker_database_url(application_name: str, *, port: int | None = None) -> str:
    """The URL of the test database pytest-django created, tagged so its backends can be found; with
    `port`, through 127.0.0.1:port (a proxy)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    address = f"127.0.0.1:{port}" if port else f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    return f"postgres://{auth}@{address}/{db['NAME']}?application_name={application_name}"


def database_address() -> tuple[str, int]:
    db = connection.settings_dict
    return db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)


def broker_url_via(port: int) -> str:
    """CELERY_BROKER_URL with its host and port replaced by 127.0.0.1:port (the proxy)."""
    parts = urlsplit(settings.CELERY_BROKER_URL)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit((parts.scheme, f"{auth}127.0.0.1:{port}", parts.path, parts.query, parts.fragment))


# --- worker processes ----------------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """One `celery -A config worker --pool solo` process with the probes of tests.faults.fault_worker."""

    name: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    phase_delay: float = 0.0
    # Another launcher (e.g. a push consumer with its own probes) can reuse all of this if it reports its
    # phases with tests.faults.fault_worker.report_phase and calls `main(name)`-style with argv[1].
    module: str = "tests.faults.fault_worker"
    # A command the worker runs under, e.g. `ip netns exec hostA` for a worker on another "host".
    wrap: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def phase_file(self) -> Path:
        return self.workdir / f"{self.name}.phases"

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, *, wait: bool = True) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": worker_database_url(f"fault-{self.name}"),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "REMINDERS_CALLBACK_BROKER_URL": settings.CELERY_BROKER_URL,
            "REMINDERS_LEASE_SECONDS": str(LEASE_SECONDS),
            "REMINDERS_SCAN_SECONDS": "0.5",
            "REMINDERS_VAR_DIR": str(self.workdir / "var"),
            "LOG_LEVEL": "WARNING",
            "FAULT_PHASE_FILE": str(self.phase_file),
            "FAULT_PHASE_DELAY": str(self.phase_delay),
            **self.env,
        }
        ready_before = self.count("ready")
        argv = [*self.wrap, sys.executable, "-m", self.module, self.name]
        self.process = processes.start_process(argv, env=env, log_path=self.log_file)
        self.starts += 1
        if wait:
            wait_for(
                lambda: self.count("ready") > ready_before,
                timeout=60,
                what=f"{self.name} to start",
                worker=self,
            )

    def kill(self) -> None:
        """kill -9: no cleanup, no ack, no mark."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    @property
    def ready(self) -> bool:
        """Started and consuming (its latest start has reported `ready`)."""
        return self.is_ready()

    def is_ready(self) -> bool:
        return self.alive and self.count("ready") >= self.starts

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Kill it (thawed first, if frozen), whatever it is doing."""
        if self.process is not None:
            processes.stop_process(self.process)

    def phases(self) -> list[tuple[str, int]]:
        if not self.phase_file.exists():
            return []
        lines = self.phase_file.read_text().splitlines()
        return [(parts[1], int(parts[2])) for parts in (line.split() for line in lines) if len(parts) == 3]

    def count(self, phase: str) -> int:
        return sum(1 for name, _ in self.phases() if name == phase)

    def wait_phase(self, phase: str, *, after: int, timeout: float = 30) -> bool:
        """Wait until this worker reports `phase` for the (after+1)-th time; False if it never does."""
        processes.wait_until(
            lambda: self.count(phase) > after or not self.alive, timeout=timeout, every=0.005
        )
        return self.count(phase) > after

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def start_together(workers: Iterable[WorkerProcess], *, timeout: float = 60) -> None:
    """Start the workers side by side (each boot takes seconds) and wait until every one is ready."""
    started = list(workers)
    for worker in started:
        worker.start(wait=False)
    for worker in started:
        wait_for(worker.is_ready, timeout=timeout, what=f"{worker.name} to start", worker=worker)


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str, worker: WorkerProcess | None = None
) -> None:
    if processes.wait_until(condition, timeout=timeout):
        return
    detail = f"\n--- {worker.name} log ---\n{worker.log_tail()}" if worker else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")


class Kicker:
    """Beat's stand-in: sends the scan task every `interval` seconds, as beat's PeriodicTask does.

    Beat itself reads its schedule from django-celery-beat's tables, which the transactional test
    database flushes between tests; the kick it sends is the same `scan_due` message.
    """

    def __init__(self, interval: float = 0.5, *, expires: float | None = 3) -> None:
        self.interval = interval
        # Celery stamps the expiry with the sender's clock: a worker whose clock is ahead by more than this
        # discards every kick, so the shifted-clock scenario kicks without one.
        self.expires = expires
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-kicker", daemon=True)

    def __enter__(self) -> Kicker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from reminders.tasks import scan_due

        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a missed kick is what the next one is for
                scan_due.apply_async(expires=self.expires)
            self._stop.wait(self.interval)


# --- the data and what arrived -------------------------------------------------------------------------


def due_occurrences(
    queue: str, count: int, *, key: str = "fault", in_seconds: float = 0.0, spread_seconds: float = 0.0
) -> Job:
    """`count` occurrences already due (or due from `in_seconds` on, over `spread_seconds`), each with its
    own fire_at so a message names its occurrence."""
    job = Job.objects.create(
        key=f"{key}-{queue}", callback_type=CallbackType.RABBITMQ, target=queue, payload={"k": key}
    )
    base = timezone.now() + (timedelta(seconds=in_seconds) if in_seconds else timedelta(minutes=-5))
    step = timedelta(seconds=spread_seconds / count) if in_seconds else timedelta(milliseconds=1)
    fires = [base + step * i for i in range(count)]
    due = fires if in_seconds else [base] * count
    Occurrence.objects.bulk_create(
        [
            Occurrence(job=job, fire_at=fire, next_attempt_at=at, priority=job.priority)
            for fire, at in zip(fires, due, strict=True)
        ],
        batch_size=2000,
    )
    return job


def status_counts() -> dict[str, int]:
    return dict(Occurrence.objects.values_list("status").annotate(n=Count("id")).order_by())


def all_delivered(total: int) -> bool:
    return status_counts().get(OccurrenceStatus.DELIVERED, 0) == total


def read_queue(queue: str, *, expect: int, timeout: float = 30) -> Arrivals:
    """Consume every message on `queue` (acking it) with basic.consume, until it is empty and at least
    `expect` arrived or `timeout` passes."""
    return processes.read_queue(settings.CELERY_BROKER_URL, queue, expect=expect, timeout=timeout)


def queue_is_durable(queue: str) -> bool:
    """Re-declaring with durable=True succeeds only on a durable queue (PRECONDITION_FAILED otherwise)."""
    with contextlib.closing(processes.amqp_connection(settings.CELERY_BROKER_URL)) as conn:
        try:
            conn.channel().queue_declare(queue=queue, durable=True, auto_delete=False)
        except Exception:
            return False
    return True


def delete_queue(queue: str) -> None:
    processes.delete_queue(settings.CELERY_BROKER_URL, queue)


def assert_every_occurrence_arrived(arrivals: Arrivals, total: int) -> None:
    """Each occurrence's key is on the queue at least once, and its duplicates carry that same key."""
    keys = dict(Occurrence.objects.values_list("idempotency_key", "fire_at"))
    assert len(keys) == total
    missing = set(keys) - set(arrivals.by_message_id)
    assert not missing, f"{len(missing)} occurrences never reached the queue"
    unknown = set(arrivals.by_message_id) - set(keys)
    assert not unknown, f"{len(unknown)} messages carry no occurrence's key"
    per_fire_at = arrivals.ids_per_fire_at()
    split = {fire_at: ids for fire_at, ids in per_fire_at.items() if len(ids) != 1}
    assert not split, f"duplicates with different message ids: {list(split.items())[:3]}"
    expected = {fire_at.isoformat(): {key} for key, fire_at in keys.items()}
    assert per_fire_at == expected


# --- the database's clock, moved forward for the workers ------------------------------------------------


class DatabaseClock:
    """The database's clock as the scenario's worker processes see it: the real one plus a shift the test
    moves, so an outage of a minute passes for the engine in an instant instead of a minute.

    The engine takes every decision by PostgreSQL's `clock_timestamp()` (reminders/engine/clock.py). A worker
    started with `env=clock.worker_env(name)` connects with the search path `fault_clock, public,
    pg_catalog`, so the unqualified `clock_timestamp()` it calls is `fault_clock.clock_timestamp()`: naming
    pg_catalog last is PostgreSQL's documented way to let a function shadow a built-in (unnamed, it is
    searched first). The engine's code is untouched; this test process, RabbitMQ and Celery's kick expiry
    keep the real clock. Made in the scenario's transactional test database and dropped after it.
    """

    SCHEMA = "fault_clock"  # the name the SQL below spells out

    def __init__(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("CREATE SCHEMA fault_clock")
            cursor.execute("CREATE TABLE fault_clock.shift (seconds double precision NOT NULL)")
            cursor.execute("INSERT INTO fault_clock.shift VALUES (0)")
            cursor.execute(
                """CREATE FUNCTION fault_clock.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE
                   AS $$ SELECT pg_catalog.clock_timestamp()
                                + make_interval(secs => (SELECT seconds FROM fault_clock.shift)) $$"""
            )

    def worker_env(self, name: str) -> dict[str, str]:
        """The environment of a WorkerProcess whose database connections read this clock."""
        options = quote(f"-c search_path={self.SCHEMA},public,pg_catalog")
        return {"DATABASE_URL": f"{worker_database_url(f'fault-{name}')}&options={options}"}

    def now(self) -> datetime:
        """The time the workers' database connections read now."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT fault_clock.clock_timestamp()")
            return cursor.fetchone()[0]

    def set(self, instant: datetime) -> None:
        """From now on the workers' clock reads `instant`, and runs on from it at the real pace."""
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE fault_clock.shift"
                " SET seconds = EXTRACT(EPOCH FROM %s - pg_catalog.clock_timestamp())",
                [instant],
            )

    def drop(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA IF EXISTS fault_clock CASCADE")


# --- PostgreSQL backends of the workers ----------------------------------------------------------------


def terminate_worker_backends(*, worker: WorkerProcess | None = None, only_waiting: bool = False) -> int:
    """pg_terminate_backend on the fault workers' connections to the test database (one worker's, or
    every worker's), and nothing else: filtered by database name and application_name. Returns once each
    of them has exited (up to 5 s each), so its transaction is rolled back when the caller looks."""
    name = f"fault-{worker.name}" if worker else "fault-%"
    condition = "AND wait_event_type = 'Lock'" if only_waiting else ""
    with connection.cursor() as cursor:
        _clear_activity_snapshot(cursor)
        cursor.execute(
            f"""SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
                 WHERE datname = %s AND application_name LIKE %s AND pid <> pg_backend_pid() {condition}""",  # noqa: S608
            [connection.settings_dict["NAME"], name],
        )
        return int(cursor.fetchone()[0])


def waiting_worker_backends() -> int:
    with connection.cursor() as cursor:
        _clear_activity_snapshot(cursor)
        cursor.execute(
            """SELECT count(*) FROM pg_stat_activity
                WHERE datname = %s AND application_name LIKE 'fault-%%' AND wait_event_type = 'Lock'""",
            [connection.settings_dict["NAME"]],
        )
        return int(cursor.fetchone()[0])


def _clear_activity_snapshot(cursor: CursorWrapper) -> None:
    """PostgreSQL reads pg_stat_activity once per transaction and shows that snapshot until it ends, so a
    poll from inside the transaction holding a lock would see, forever, the moment the lock was taken."""
    cursor.execute("SELECT pg_stat_clear_snapshot()")


# The steps of a scan a scenario interrupts (phases reported by tests.faults.fault_worker), as the table
# names them.
SCAN_STEPS = {
    "claimed": "after claim",
    "publishing": "mid-publish",
    "published": "after publish, before mark",
}


def seeded_rng() -> tuple[int, random.Random]:
    """A random order of faults, replayable: FAULT_SEED=<the seed a failure names> repeats it."""
    seed = int(os.environ.get("FAULT_SEED", random.randrange(1 << 32)))
    return seed, random.Random(seed)


def shuffled(items: Iterable[str], times: int, rng: random.Random) -> list[str]:
    """Each item `times` times, in a random order (so every kill point is hit, in no fixed sequence)."""
    out = [item for item in items for _ in range(times)]
    rng.shuffle(out)
    return out
