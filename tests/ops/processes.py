"""Real `celery worker`, `celery beat` and `gunicorn` processes on the test database, for the ops tests.

Each process gets its own session so the test can freeze and resume the worker with all its prefork
children at once (SIGSTOP/SIGCONT to the process group), as a stalled host would be.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from tests.conftest import delete_queue

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def service(
    logs: Path, *, concurrency: int = 1, extra_env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start a prefork worker and beat; yields the worker (its pid is its process group id)."""
    call_command("ensure_beat")  # transactional tests flush the rows the migration created
    kicks = f"test.kicks.{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": kicks,
        "REMINDERS_SCAN_SECONDS": "1",
        **(extra_env or {}),
    }
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    files = [open(logs / name, "w") for name in ("worker.log", "beat.log")]  # noqa: SIM115
    processes = [
        subprocess.Popen([*celery, "worker", "-c", str(concurrency), "--loglevel=INFO", "--without-heartbeat",
                          "--without-gossip", "--without-mingle", "-n", f"ops-{uuid.uuid4().hex[:6]}@%h"],
                         cwd=ROOT, env=env, stdout=files[0], stderr=subprocess.STDOUT,
                         start_new_session=True),
        subprocess.Popen([*celery, "beat", "--loglevel=INFO", "--pidfile=",
                          "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                         cwd=ROOT, env=env, stdout=files[1], stderr=subprocess.STDOUT,
                         start_new_session=True),
    ]  # fmt: skip
    try:
        yield processes[0]
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for file in files:
            file.close()
        delete_queue(kicks)
        for name in ("worker.log", "beat.log"):
            print(f"--- {name}\n" + (logs / name).read_text()[-3000:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def gunicorn(*, workers: int = 1, extra_env: dict[str, str] | None = None) -> Iterator[int]:
    """`gunicorn config.wsgi` with `workers` sync workers on a free loopback port, on the test database
    and broker; yields the port once it accepts connections and every worker runs."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DJANGO_ALLOWED_HOSTS": "localhost,127.0.0.1",
        **(extra_env or {}),
    }
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-b", f"127.0.0.1:{port}",
               "-w", str(workers)]  # fmt: skip
    quiet = subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=quiet, stderr=quiet)
    try:
        deadline = time.monotonic() + 60
        while not (_listens(port) and _children(process.pid) >= workers):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("gunicorn did not start")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _children(pid: int) -> int:
    try:
        return len(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except FileNotFoundError:
        return 0
