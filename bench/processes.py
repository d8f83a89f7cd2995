"""Child processes and AMQP consumers, shared by the benchmark (bench/harness.py) and the fault suite
(tests/faults/harness.py), so both start, stop and wait for processes and count what arrived on a queue
the same way.

No Django here: the benchmark imports this before it has chosen its settings, so URLs are passed in.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

import amqp

ROOT = Path(__file__).resolve().parent.parent


# --- processes ------------------------------------------------------------------------------------------


def start_process(argv: Sequence[str], *, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start a child in its own session (Ctrl-C reaches only us; `stop_process` ends its whole group),
    its output appended to `log_path`."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_process(proc: subprocess.Popen[bytes], *, grace: float = 0.0) -> None:
    """TERM the child and give it `grace` seconds (a Celery worker then stops its own pool), then KILL its
    whole process group (children a dead parent left behind). A frozen child is thawed first."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            if grace > 0:
                os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def wait_until(condition: Callable[[], bool], *, timeout: float, every: float = 0.1) -> bool:
    """Poll `condition` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


# --- broker ---------------------------------------------------------------------------------------------


def amqp_connection(url: str) -> amqp.Connection:
    """A connected py-amqp connection for an `amqp://user:pass@host:port/vhost` URL."""
    parts = urlsplit(url)
    conn = amqp.Connection(
        host=f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}",
        userid=unquote(parts.username or "guest"),
        password=unquote(parts.password or "guest"),
        virtual_host=unquote(parts.path[1:]) if len(parts.path) > 1 else "/",
        connect_timeout=5,
    )
    conn.connect()
    return conn


def declared_counts(channel: amqp.Channel, name: str) -> tuple[int, int]:
    """(messages ready, consumers) of an existing queue, by a passive declare."""
    declared = channel.queue_declare(name, passive=True)
    assert declared is not None  # py-amqp returns queue_declare_ok_t unless nowait
    _, messages, consumers = declared
    return int(messages), int(consumers)


def delete_queue(url: str, name: str, *, exchange: bool = False) -> None:
    """Delete a queue (and, with `exchange`, the exchange of the same name Celery declares), if it exists."""
    with contextlib.suppress(Exception), contextlib.closing(amqp_connection(url)) as conn:
        conn.channel().queue_delete(name)
    if exchange:
        with contextlib.suppress(Exception), contextlib.closing(amqp_connection(url)) as conn:
            conn.channel().exchange_delete(name)


# --- what arrived ---------------------------------------------------------------------------------------


@dataclass
class Arrivals:
    """The messages a consumer read, each with the wall time it arrived."""

    received: list[tuple[float, amqp.Message]] = field(default_factory=list)

    @property
    def messages(self) -> list[amqp.Message]:
        return [message for _, message in self.received]

    @property
    def by_message_id(self) -> Counter[str | None]:
        return Counter(m.properties.get("message_id") for _, m in self.received)

    @property
    def duplicates(self) -> int:
        return len(self.received) - len(self.by_message_id)

    def ids_per_fire_at(self) -> dict[str | None, set[str | None]]:
        """fire_at header -> the message ids seen for it; one id per occurrence if duplicates agree."""
        seen: dict[str | None, set[str | None]] = {}
        for _, message in self.received:
            headers = message.properties.get("application_headers") or {}
            seen.setdefault(headers.get("fire_at"), set()).add(message.properties.get("message_id"))
        return seen

    def lateness(self) -> list[float]:
        """Arrival minus fire time, in seconds, sorted; messages that carry no fire time are left out."""
        late = []
        for at, message in self.received:
            fire_at = _fire_at(message)
            if fire_at is not None:
                late.append(at - fire_at.timestamp())
        return sorted(late)

    @property
    def unreadable(self) -> int:
        return sum(1 for _, message in self.received if _fire_at(message) is None)


def _fire_at(message: amqp.Message) -> datetime | None:
    """The `fire_at` header, or for a Celery task message beat sent straight to the queue, its kwarg."""
    try:
        fire_at = (message.properties.get("application_headers") or {}).get("fire_at")
        if fire_at is None:
            fire_at = json.loads(message.body)[1]["fire_at"]
        return datetime.fromisoformat(str(fire_at))
    except (ValueError, KeyError, IndexError, TypeError):
        return None


class Consumer(threading.Thread):
    """A real AMQP consumer (basic.consume, no acks) that notes when each message of `queue` arrived.

    "Time on the queue" is the moment this consumer receives the message: with a deep prefetch and no
    acks it is never the bottleneck at the rates measured here. `declare` creates the queue (durable) if
    needed; without it a missing queue is an error.
    """

    def __init__(self, url: str, queue: str, *, prefetch: int = 2000, declare: bool = True) -> None:
        super().__init__(daemon=True, name=f"consumer-{queue}")
        self.url, self.queue, self.prefetch, self.declare = url, queue, prefetch, declare
        self.arrivals = Arrivals()
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        self._ready = threading.Event()

    def run(self) -> None:
        try:
            with contextlib.closing(amqp_connection(self.url)) as conn:
                channel = conn.channel()
                if self.declare:
                    channel.queue_declare(self.queue, durable=True, auto_delete=False)
                channel.basic_qos(0, self.prefetch, False)
                channel.basic_consume(self.queue, callback=self._on_message, no_ack=True)
                self._ready.set()
                while not self._stop_event.is_set():
                    with contextlib.suppress(socket.timeout, TimeoutError):
                        conn.drain_events(timeout=0.2)
        except BaseException as exc:
            self.error = exc
            self._ready.set()

    def _on_message(self, message: amqp.Message) -> None:
        self.arrivals.received.append((time.time(), message))

    def __enter__(self) -> Consumer:
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
        return wait_until(lambda: self.count() >= expected, timeout=until - time.monotonic())

    def wait_quiet(self, expected: int, *, timeout: float, quiet: float = 0.5) -> None:
        """Wait until at least `expected` arrived and nothing more for `quiet` seconds, or `timeout`."""
        deadline = time.monotonic() + timeout
        seen, quiet_since = self.count(), time.monotonic()
        while time.monotonic() < deadline and self.error is None:
            time.sleep(0.05)
            if self.count() != seen:
                seen, quiet_since = self.count(), time.monotonic()
            elif seen >= expected and time.monotonic() - quiet_since > quiet:
                return


def read_queue(url: str, queue: str, *, expect: int, timeout: float = 30, prefetch: int = 500) -> Arrivals:
    """Consume every message on an existing `queue` until at least `expect` arrived and it stays empty for
    a moment, or `timeout` passes."""
    with Consumer(url, queue, prefetch=prefetch, declare=False) as consumer:
        consumer.wait_quiet(expect, timeout=timeout)
    return consumer.arrivals
