"""What every scenario needs: the run's database, its queues, the processes it starts, an AMQP consumer
that times arrivals, peak-RSS readings and fast SQL fills. Everything created here is registered so that
`Harness.cleanup()` removes it, whatever way the run ends. Processes and consumers themselves are
bench/processes.py, which the fault suite uses too."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import amqp

from bench.processes import (
    ROOT,
    Consumer,
    amqp_connection,
    declared_counts,
    delete_queue,
    start_process,
    stop_process,
)

RESULTS = ROOT / "bench" / "results"
PAYLOAD = {"kind": "questionnaire", "training": "00000000-0000-0000-0000-000000000000", "minutes_before": 60}


# Every size a scenario uses, as (--quick, full run), side by side.
_SIZES: dict[str, tuple[Any, Any]] = {
    "service_jobs": (200, 1000),
    "service_instants": (22, 22),
    "bulk_jobs": (100, 1000),
    "bulk_instants": (1000, 1000),
    "beat_create": (100, 1000),
    "eta_publish": (1000, 10_000),
    "dispatch_backlog": (20_000, 100_000),
    "raw_tx": (20_000, 100_000),
    "raw_confirm": (2_000, 5_000),
    "lateness_seconds": (10, 60),
    "lateness_rate": (1000, 1000),
    "lateness_fast_rate": (3000, 3000),
    "lateness_fast_seconds": (5, 30),
    "posted_jobs": (100, 300),
    "beat_reminders": (1000, 5000),
    "beat_seconds": (8, 60),
    "pending": (4000, 0),
    "eta_reminders": (5000, 30_000),
    "eta_seconds": (5, 30),
    "claim_sizes": ([10_000, 200_000, 1_000_000], [10_000, 1_000_000, 5_000_000]),
    "claim_reps": (8, 20),
    "memory_sizes": ([10_000, 1_000_000], [10_000, 1_000_000]),
    "memory_due": (5_000, 20_000),
    "eta_memory_sizes": ([5_000], [10_000, 100_000]),
    "trainings": (500, 10_000),
    "storm_reminders": (100, 5_000),
    "storm_repeats": (1, 3),
}


@dataclass
class Sizes:
    """Every size a scenario uses; `--quick` picks the small set."""

    service_jobs: int
    service_instants: int
    bulk_jobs: int
    bulk_instants: int
    beat_create: int
    eta_publish: int
    dispatch_backlog: int
    raw_tx: int
    raw_confirm: int
    lateness_seconds: int
    lateness_rate: int
    lateness_fast_rate: int
    lateness_fast_seconds: int
    posted_jobs: int
    beat_reminders: int
    beat_seconds: int
    pending: int
    eta_reminders: int
    eta_seconds: int
    claim_sizes: list[int]
    claim_reps: int
    memory_sizes: list[int]
    memory_due: int
    eta_memory_sizes: list[int]
    trainings: int
    storm_reminders: int
    storm_repeats: int

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        return cls(**{name: sizes[0 if quick else 1] for name, sizes in _SIZES.items()})


def database_url_named(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@dataclass
class Harness:
    """One run: its id, database, queues and child processes."""

    quick: bool
    base_database_url: str
    broker_url: str
    database_name: str = "bench_reminders"
    maintenance_database: str = "postgres"
    run_id: str = field(default_factory=lambda: time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6])
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # Where each child's log stood when it was started: a name started again appends to its log, and what
    # its last run logged must not answer `wait_for_log` for this one.
    log_from: dict[str, int] = field(default_factory=dict)
    queues: set[str] = field(default_factory=set)
    exchanges: set[str] = field(default_factory=set)
    database_created: bool = False
    keep_database: bool = False
    database_reused: bool = False

    def __post_init__(self) -> None:
        self.sizes = Sizes.for_run(self.quick)
        self.database_url = database_url_named(self.base_database_url, self.database_name)
        self.celery_queue = self.queue_name("celery")
        self.push_queue = self.queue_name("push")  # the trainings app's push queue, when it is installed
        self.log_dir = RESULTS / "logs" / self.run_id
        self.log_dir.mkdir(parents=True, exist_ok=True)

    # --- environment ------------------------------------------------------------------------------
    def child_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="bench.settings",
            DATABASE_URL=self.database_url,
            CELERY_BROKER_URL=self.broker_url,
            REMINDERS_CALLBACK_BROKER_URL=self.broker_url,
            BENCH_CELERY_QUEUE=self.celery_queue,
            TRAININGS_PUSH_QUEUE=self.push_queue,
            PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            LOG_LEVEL="INFO",
        )
        env.update(extra)
        return env

    def queue_name(self, purpose: str) -> str:
        name = f"bench.{self.run_id}.{purpose}"
        self.queues.add(name)
        return name

    # --- database ---------------------------------------------------------------------------------
    def _maintenance(self) -> Any:
        import psycopg

        url = database_url_named(self.base_database_url, self.maintenance_database)
        return psycopg.connect(url.replace("postgresql://", "postgres://", 1), autocommit=True)

    def create_database(self) -> None:
        """A fresh database; with `keep_database`, the one a finished earlier run kept, when there is one.

        A kept database is one whose scenario finished writing its data (the `bench_kept` table, see
        `kept` and `keep`); one without it (a fill cut short) is made afresh."""
        if self.keep_database and self._has_kept_data():
            self.database_reused = True
            return
        with self._maintenance() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.database_name}"')
        self.database_created = not self.keep_database

    def _has_kept_data(self) -> bool:
        import psycopg

        with self._maintenance() as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [self.database_name])
            if not found.fetchone():
                return False
        url = self.database_url.replace("postgresql://", "postgres://", 1)
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass('bench_kept') IS NOT NULL").fetchone()
            return bool(row and row[0])

    def kept(self, scenario: str) -> dict[str, Any] | None:
        """What `keep` recorded for the scenario in this (reused) database, or None."""
        from django.db import connection

        if not self.database_reused:
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT data FROM bench_kept WHERE scenario = %s", [scenario])
            row = cursor.fetchone()
        return None if row is None else dict(json.loads(row[0]) if isinstance(row[0], str) else row[0])

    def keep(self, scenario: str, data: dict[str, Any]) -> None:
        """Mark the scenario's data complete, with what a later run needs to time it again unfilled."""
        from django.db import connection

        if not self.keep_database:
            return
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE IF NOT EXISTS bench_kept (scenario text PRIMARY KEY, data jsonb)")
            cursor.execute(
                "INSERT INTO bench_kept VALUES (%s, %s)"
                " ON CONFLICT (scenario) DO UPDATE SET data = EXCLUDED.data",
                [scenario, json.dumps(data, default=str)],
            )

    def drop_database(self) -> None:
        if not self.database_created:
            return
        from django.db import connections

        connections.close_all()
        with self._maintenance() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database_name}" WITH (FORCE)')
        self.database_created = False

    # --- processes --------------------------------------------------------------------------------
    def start(self, name: str, argv: Sequence[str], **env: str) -> subprocess.Popen[bytes]:
        """Start a child in its own session (so Ctrl-C reaches only us, and we stop it by its group id)."""
        log_path = self.log_dir / f"{name}.log"
        self.log_from[name] = log_path.stat().st_size if log_path.exists() else 0
        proc = start_process(argv, env=self.child_env(**env), log_path=log_path)
        proc.bench_name = name  # type: ignore[attr-defined]
        self.processes.append(proc)
        return proc

    def celery(self, name: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        return self.start(name, [str(Path(sys.executable).with_name("celery")), "-A", "config", *args], **env)

    def worker(self, name: str, *args: str, pool: str = "prefork", **env: str) -> subprocess.Popen[bytes]:
        proc = self.celery(
            name,
            "worker",
            "--loglevel=INFO",
            "-c",
            "1",
            "-P",
            pool,
            "-n",
            f"{name}-{self.run_id}@%h",
            "-Q",
            self.celery_queue,
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
            *args,
            **env,
        )
        self.wait_for_log(name, "ready.", timeout=60, proc=proc)
        return proc

    def beat(self, name: str) -> subprocess.Popen[bytes]:
        return self.celery(
            name,
            "beat",
            "--loglevel=INFO",
            "-S",
            "django_celery_beat.schedulers:DatabaseScheduler",
            "--pidfile=",
        )

    def log_text(self, name: str, *, this_run: bool = False) -> str:
        """The child's log; with `this_run`, only what its latest start has logged."""
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        data = path.read_bytes()
        return data[self.log_from.get(name, 0) if this_run else 0 :].decode(errors="replace")

    def wait_for_log(
        self, name: str, text: str, *, timeout: float, proc: subprocess.Popen[bytes] | None = None
    ) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if text in self.log_text(name, this_run=True):
                return time.monotonic() - start
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}"
                )
            time.sleep(0.1)
        raise RuntimeError(
            f"{name} did not log {text!r} within {timeout}s; see {self.log_dir / (name + '.log')}"
        )

    def stop(self, proc: subprocess.Popen[bytes], *, grace: float = 10.0) -> None:
        """TERM the child; after `grace` seconds KILL its whole process group (it has its own session)."""
        stop_process(proc, grace=grace)
        if proc in self.processes:
            self.processes.remove(proc)

    # --- broker -----------------------------------------------------------------------------------
    def amqp_connection(self) -> amqp.Connection:
        return amqp_connection(self.broker_url)

    def consumer(self, queue: str) -> Consumer:
        """A consumer that notes when each message of `queue` arrives; the queue is removed at cleanup."""
        self.queues.add(queue)
        return Consumer(self.broker_url, queue)

    def declare(self, name: str) -> None:
        self.queues.add(name)
        with contextlib.closing(self.amqp_connection()) as conn:
            conn.channel().queue_declare(name, durable=True, auto_delete=False)

    def queue_depth(self, name: str) -> tuple[int, int]:
        """(messages ready, consumers) of a queue, by a passive declare."""
        with contextlib.closing(self.amqp_connection()) as conn:
            return declared_counts(conn.channel(), name)

    def purge_queue(self, name: str) -> int:
        """Empty a queue; returns how many messages it held."""
        with contextlib.closing(self.amqp_connection()) as conn:
            return int(conn.channel().queue_purge(name) or 0)

    def delete_queue(self, name: str) -> None:
        # Celery declares an exchange named like each queue it routes to.
        delete_queue(self.broker_url, name, exchange=True)

    def cleanup(self) -> None:
        for proc in list(self.processes):
            self.stop(proc, grace=5)
        for name in sorted(self.queues):
            self.delete_queue(name)
        self.queues.clear()
        self.drop_database()

    # --- SQL fills --------------------------------------------------------------------------------
    def insert_jobs(self, tag: str, count: int, *, queue: str, callback_type: str = "rabbitmq") -> list[int]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO reminders_job (key, callback_type, target, payload, http_secret, priority,
                                           version, created_at, updated_at)
                SELECT %s || '-' || g, %s, %s, %s::jsonb, '', 5, 1, now(), now()
                  FROM generate_series(1, %s) AS g
                RETURNING id
                """,
                [f"bench-{tag}", callback_type, queue, json.dumps(PAYLOAD), count],
            )
            return sorted(row[0] for row in cursor.fetchall())

    def insert_occurrences(
        self,
        tag: str,
        job_ids: list[int],
        count: int,
        *,
        first: datetime,
        step_seconds: float,
        offset: int = 0,
    ) -> None:
        """`count` scheduled rows, fire_at = first + i*step, spread round-robin over `job_ids`."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO reminders_occurrence (job_id, fire_at, next_attempt_at, priority, status,
                                                  attempts, last_error, idempotency_key, job_version,
                                                  created_at)
                SELECT (%(ids)s::bigint[])[1 + g %% %(njobs)s], f, f, 5, 'scheduled', 0, '',
                       %(tag)s || '-' || lpad(g::text, 10, '0'), 1, now()
                  FROM generate_series(%(lo)s, %(hi)s) AS g,
                       LATERAL (SELECT %(first)s::timestamptz + g * %(step)s * interval '1 second') AS t(f)
                """,
                {
                    "ids": job_ids,
                    "njobs": len(job_ids),
                    "tag": f"bench-{tag}",
                    "lo": offset,
                    "hi": offset + count - 1,
                    "first": first - timedelta(seconds=offset * step_seconds),
                    "step": step_seconds,
                },
            )

    def truncate_engine(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE reminders_occurrence, reminders_job RESTART IDENTITY CASCADE")


# --- peak memory ----------------------------------------------------------------------------------
def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def _tree(pid: int) -> list[int]:
    """The process and its children (a prefork worker's pool processes)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        children = []
    return [pid, *(int(c) for c in children)]


def peak_rss_kib(pid: int) -> int:
    """Sum of VmHWM (peak resident set since start) over the process and its children."""
    return sum(_status_kib(p, "VmHWM") for p in _tree(pid))


def rss_kib(pid: int) -> int:
    return sum(_status_kib(p, "VmRSS") for p in _tree(pid))


def quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    """`with timed() as t: ...` then t[0] is the elapsed wall time in seconds."""
    box: list[float] = []
    start = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - start)
