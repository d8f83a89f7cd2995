"""`make run`'s stack (scripts/run-all.sh) on the embedded defaults: a process that dies is restarted, the
terminal says which, with its exit code and restart count, and the others stay up; a Ctrl-C then stops
every process. On a fresh SQLite database and file broker of its own, as a newcomer's `make run`."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.ops.processes import ROOT

# The test process's own service variables (tests/services.py sets some): the stack runs on its defaults.
NOT_PASSED = (
    "DATABASE_URL", "CELERY_BROKER_URL", "REMINDERS_CALLBACK_BROKER_URL", "PROMETHEUS_MULTIPROC_DIR", "ADDR",
    "CELERY_TASK_DEFAULT_QUEUE", "TRAININGS_PUSH_QUEUE",
)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait(condition: Callable[[], object], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{log.read_text()[-5000:]}")
        time.sleep(0.3)


def _pids(log: Path) -> dict[str, list[int]]:
    """Each process's pids, in the order the runner started them."""
    found: dict[str, list[int]] = {}
    for name, pid in re.findall(r"^run-all: started (\w+) \(pid (\d+)\)$", log.read_text(), re.MULTILINE):
        found.setdefault(name, []).append(int(pid))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_killed_worker_is_restarted_the_others_stay_up_and_ctrl_c_stops_all(tmp_path: Path) -> None:
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key not in NOT_PASSED}
    env.update({
        "REMINDERS_VAR_DIR": str(tmp_path / "var"),
        "ADDR": f"127.0.0.1:{port}",
        "DJANGO_DEBUG": "1",
        "BIN": str(Path(sys.executable).parent),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    })  # fmt: skip
    migrate = [sys.executable, "manage.py", "migrate", "--noinput", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True)
    log = tmp_path / "run-all.log"
    with log.open("w") as out:
        runner = subprocess.Popen(
            ["bash", "scripts/run-all.sh"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )  # fmt: skip
    started: dict[str, list[int]] = {}
    try:
        ready = f"http://127.0.0.1:{port}/health/ready"
        _wait(lambda: _ready(ready), 120, "/health/ready", log)
        started = _pids(log)
        assert sorted(started) == ["beat", "gateway", "web", "worker"]
        assert (tmp_path / "var" / "served-addr").read_text().strip() == f"127.0.0.1:{port}"

        worker = started["worker"][0]
        os.kill(worker, signal.SIGKILL)  # as the file broker's JSONDecodeError once ended it
        _wait(lambda: len(_pids(log).get("worker", [])) == 2, 30, "the worker's restart", log)
        assert re.search(
            r"^run-all: worker exited with signal 9 after \d+ s; restarting in 1 s \(restart 1\); "
            r"the others keep running$",
            log.read_text(),
            re.MULTILINE,
        ), log.read_text()[-3000:]
        restarted = _pids(log)
        assert restarted["worker"][1] != worker and _alive(restarted["worker"][1])
        for name in ("web", "beat", "gateway"):
            assert restarted[name] == started[name] and _alive(started[name][0]), name
        _wait(lambda: _ready(ready), 60, "/health/ready with the new worker", log)

        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground process group
        assert runner.wait(timeout=60) == 0
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        for pids in _pids(log).values():
            for pid in pids:
                if _alive(pid):
                    os.killpg(pid, signal.SIGKILL)
        print(log.read_text()[-6000:])
    output = log.read_text()
    assert "run-all: stopped" in output and "run-all: killed" not in output
    every = [pid for pids in _pids(log).values() for pid in pids]
    assert not [pid for pid in every if _alive(pid)]
    assert not (tmp_path / "var" / "served-addr").exists()
    assert "push gateway stopped" in output  # the gateway drained and said so
