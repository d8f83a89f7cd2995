"""What every scenario needs: the run's database, its queues, the processes it starts, an AMQP consumer
that times arrivals, peak-RSS readings and fast SQL fills. Everything created here is registered so that
`Harness.cleanup()` removes it, whatever way the run ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import amqp

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAYLOAD = {"kind": "questionnaire", "training": "00000000-0000-0000-0000-000000000000", "minutes_before": 60}


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

    @classmethod
    def for_run(cls, quick: bool) -> Sizes:
        if quick:
            return cls(
                service_jobs=200,
                service_instants=22,
                bulk_jobs=100,
                bulk_instants=1000,
                beat_create=100,
                eta_publish=1000,
                dispatch_backlog=20_000,
                raw_tx=20_000,
                raw_confirm=2_000,
                lateness_seconds=10,
                lateness_rate=1000,
                beat_reminders=1000,
                beat_seconds=8,
                pending=4000,
                eta_reminders=1000,
                eta_seconds=8,
                claim_sizes=[10_000, 200_000, 1_000_000],
                claim_reps=8,
                memory_sizes=[10_000, 1_000_000],
                memory_due=5_000,
                eta_memory_sizes=[5_000],
                trainings=500,
            )
        return cls(
            service_jobs=1000,
            service_instants=22,
            bulk_jobs=1000,
            bulk_instants=1000,
            beat_create=1000,
            eta_publish=10_000,
            dispatch_backlog=100_000,
            raw_tx=100_000,
            raw_confirm=5_000,
            lateness_seconds=60,
            lateness_rate=1000,
            beat_reminders=5000,
            beat_seconds=60,
            pending=0,
            eta_reminders=5000,
            eta_seconds=60,
            claim_sizes=[10_000, 1_000_000, 5_000_000],
            claim_reps=20,
            memory_sizes=[10_000, 1_000_000],
            memory_due=20_000,
            eta_memory_sizes=[10_000, 100_000],
            trainings=10_000,
        )


def declared_counts(channel: amqp.Channel, name: str) -> tuple[int, int]:
    """(messages ready, consumers) of an existing queue, by a passive declare."""
    declared = channel.queue_declare(name, passive=True)
    assert declared is not None  # py-amqp returns queue_declare_ok_t unless nowait
    _, messages, consumers = declared
    return int(messages), int(consumers)


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
    run_id: str = field(default_factory=lambda: time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6])
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    queues: set[str] = field(default_factory=set)
    exchanges: set[str] = field(default_factory=set)
    database_created: bool = False

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

        url = database_url_named(self.base_database_url, "postgres")
        return psycopg.connect(url.replace("postgresql://", "postgres://", 1), autocommit=True)

    def create_database(self) -> None:
        with self._maintenance() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.database_name}"')
        self.database_created = True

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
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it until it exits
        proc = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=self.child_env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
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

    def log_text(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_log(
        self, name: str, text: str, *, timeout: float, proc: subprocess.Popen[bytes] | None = None
    ) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if text in self.log_text(name):
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
        if proc.poll() is None:
            # TERM to the main process only: a Celery worker then stops its own pool children.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # prefork children left behind by a dead parent
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc in self.processes:
            self.processes.remove(proc)

    # --- broker -----------------------------------------------------------------------------------
    def amqp_connection(self) -> amqp.Connection:
        parts = urlsplit(self.broker_url)
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        conn = amqp.Connection(
            host=f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}",
            userid=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            virtual_host=vhost,
            connect_timeout=5,
        )
        conn.connect()
        return conn

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
        with contextlib.suppress(Exception), contextlib.closing(self.amqp_connection()) as conn:
            channel = conn.channel()
            channel.queue_delete(name)
        with contextlib.suppress(Exception), contextlib.closing(self.amqp_connection()) as conn:
            conn.channel().exchange_delete(
                name
            )  # Celery declares an exchange named like each queue it routes to

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


# --- arrival timing -------------------------------------------------------------------------------
@dataclass
class Arrivals:
    received: list[tuple[float, str]] = field(default_factory=list)

    def lateness(self) -> list[float]:
        return sorted(at - datetime.fromisoformat(fire_at).timestamp() for at, fire_at in self.received)


class Consumer(threading.Thread):
    """Consumes a queue and notes, for each message, when it arrived and the fire time it carries.

    "Time on the queue" is taken as the moment this consumer receives the message: the consumer has a
    deep prefetch and no acks, so it is never the bottleneck at these rates.
    """

    def __init__(self, harness: Harness, queue: str) -> None:
        super().__init__(daemon=True, name=f"consumer-{queue}")
        self.harness, self.queue = harness, queue
        self.arrivals = Arrivals()
        self._stop_event = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self.unreadable = 0

    def run(self) -> None:
        try:
            with contextlib.closing(self.harness.amqp_connection()) as conn:
                channel = conn.channel()
                channel.queue_declare(self.queue, durable=True, auto_delete=False)
                channel.basic_qos(0, 2000, False)
                channel.basic_consume(self.queue, callback=self._on_message, no_ack=True)
                self._ready.set()
                while not self._stop_event.is_set():
                    with contextlib.suppress(socket.timeout, TimeoutError):
                        conn.drain_events(timeout=0.2)
        except BaseException as exc:
            self.error = exc
            self._ready.set()

    def _on_message(self, message: amqp.Message) -> None:
        now = time.time()
        try:
            fire_at = (message.headers or {}).get("fire_at")
            if fire_at is None:  # a Celery task message sent straight here by beat: the time is in kwargs
                fire_at = json.loads(message.body)[1]["fire_at"]
            self.arrivals.received.append((now, str(fire_at)))
        except (ValueError, KeyError, IndexError, TypeError):
            self.unreadable += 1

    def __enter__(self) -> Consumer:
        self.harness.queues.add(self.queue)
        self.start()
        self._ready.wait(10)
        if self.error:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_event.set()
        self.join(5)

    def count(self) -> int:
        return len(self.arrivals.received)

    def wait_for(self, expected: int, *, until: float) -> bool:
        """Wait until `expected` messages arrived or the monotonic clock passes `until`."""
        while time.monotonic() < until:
            if self.count() >= expected:
                return True
            time.sleep(0.1)
        return self.count() >= expected


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
