"""The Procfile, run by honcho as the runbook says: web (gunicorn), worker, beat and the push gateway
against PostgreSQL and RabbitMQ. The test waits for /health/ready, delivers a reminder posted through the
web's API, stops honcho as an operator would (SIGTERM) and checks every process is gone and nothing is
left claimed."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token

from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import delete_queue, drain_queue
from tests.ops.processes import ROOT, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

MARK = "REMINDERS_PROCFILE_TEST"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _marked_processes(mark: str) -> list[int]:
    """Processes whose environment carries `mark` (honcho's children inherit it, orphans included)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _wait(condition: Callable[[], object], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def _lines_with(log: Path, text: str) -> str:
    return "\n".join(line for line in log.read_text().splitlines() if text in line)


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_honcho_runs_the_procfile_delivers_a_reminder_and_stops_cleanly(
    tmp_path: Path, queue_name: str, user: object
) -> None:
    call_command("ensure_beat")  # transactional tests flush the rows the migration created
    token = Token.objects.create(user=user).key
    mark = uuid.uuid4().hex[:12]
    port = _free_port()
    env_file = tmp_path / "empty.env"  # not the checkout's .env, if a developer has one
    env_file.write_text("")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": f"test.kicks.{mark}",
        "TRAININGS_PUSH_QUEUE": f"test.push.{mark}",
        "REMINDERS_VAR_DIR": str(tmp_path / "var"),
        # Beat's "Sending due task" lines (silenced by default: the scan is due every second) are its
        # readiness signal here: beat is in its loop, scheduler and remote control set up.
        "CELERY_TASK_LOG_LEVEL": "INFO",
        MARK: mark,
    }
    log = tmp_path / "honcho.log"
    with log.open("w") as out:
        honcho = subprocess.Popen(
            [str(Path(sys.executable).parent / "honcho"), "start", "--no-colour", "-f", "Procfile",
             "-d", str(ROOT), "-e", str(env_file), "-p", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _wait(lambda: _get(f"{base}/health/ready") == 200, 120, "/health/ready", log)
        for name in ("web.1", "worker.1", "beat.1", "gateway.1"):
            assert f"{name} " in log.read_text(), name
        fire_at = timezone.now() + dt.timedelta(seconds=2)
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{base}/api/jobs/",
            data=json.dumps({
                "key": f"procfile-{mark}",
                "schedules": [fire_at.isoformat()],
                "callback": {"type": "rabbitmq", "data": {"queue": queue_name, "payload": {"via": "honcho"}}},
            }).encode(),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            assert response.status == 201
        messages = drain_queue(queue_name, expect=1, timeout=45)
        assert [json.loads(m.body) for m in messages] == [{"via": "honcho"}]
        _wait(
            lambda: Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).count() == 1,
            10,
            "the delivery's mark",
            log,
        )
        # On a loaded machine beat can still be starting when the delivery is done (the web's kick does
        # not need it); a SIGTERM in the middle of its start-up can leave it running past honcho's KILL_WAIT.
        _wait(lambda: "beat.1" in _lines_with(log, "Sending due task"), 120, "beat's first kick", log)
        running = _marked_processes(mark)
        assert len(running) >= 5, running  # honcho, web (gunicorn master and worker), worker, beat, gateway

        honcho.send_signal(signal.SIGTERM)
        honcho.wait(timeout=60)
        _wait(lambda: not _marked_processes(mark), 15, "every process to end", log)
    finally:
        if honcho.poll() is None:
            os.killpg(honcho.pid, signal.SIGKILL)
            honcho.wait()
        for pid in _marked_processes(mark):
            os.kill(pid, signal.SIGKILL)
        delete_queue(f"test.kicks.{mark}")
        delete_queue(f"test.push.{mark}")
        print(log.read_text()[-6000:])
    output = log.read_text()
    assert "SIGKILL" not in output, "honcho had to kill a process that did not stop on SIGTERM"
    assert "Traceback" not in output
    for name in ("web.1", "worker.1", "beat.1", "gateway.1"):
        assert f"{name} stopped" in output, name
    assert not Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED).exists()
    assert "push gateway stopped" in output  # the gateway drained and said so
