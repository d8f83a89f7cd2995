"""`make run`'s process runner (started by scripts/run-all.sh): web, worker, beat and the push gateway in the
foreground, each restarted when it exits, so one crash does not stop the stack; Ctrl-C or SIGTERM stops
them all.

Each process runs in a session of its own: a Ctrl-C in the terminal reaches only this runner, which sends
each process one SIGTERM (Celery's worker then shuts its prefork children down itself, the gateway drains),
and kills what has not stopped after STOP_SECONDS. A process that exits is started again after a pause
that doubles while it keeps failing fast (up to MAX_PAUSE_SECONDS) and starts over at one second once it
has run for a minute. On Linux a process is also told to stop when this runner dies (PR_SET_PDEATHSIG).
Every start, exit and restart is a `run-all:` line on the terminal. While it runs, the address the web
serves on is in `common.address.served_addr_file()`, so the links a command in another terminal prints
follow it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the checkout's modules
from common.address import served_addr_file

STOP_SECONDS = 30.0
MAX_PAUSE_SECONDS = 30.0
HEALTHY_SECONDS = 60.0  # a process that ran this long before exiting is restarted after the shortest pause


def commands(bin_dir: str, addr: str) -> dict[str, list[str]]:
    """The stack `make run` runs: the production processes on the embedded defaults."""
    return {
        "worker": [f"{bin_dir}/celery", "-A", "config", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--hostname", "worker@%h"],
        "beat": [f"{bin_dir}/celery", "-A", "config", "beat", "--loglevel=INFO",
                 "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler", "--pidfile="],
        "gateway": [f"{bin_dir}/python", "manage.py", "push_gateway"],
        "web": [f"{bin_dir}/python", "manage.py", "runserver", addr, "--noreload"],
    }  # fmt: skip


def say(text: str) -> None:
    print(f"run-all: {text}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the runner dies, so a killed runner leaves no orphans."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the runner's stop still signals them
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Supervised:
    name: str
    command: list[str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    pause: float = 1.0
    start_at: float = 0.0  # when a stopped process is due to start again

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - the stack's own commands
            self.command, start_new_session=True, preexec_fn=_die_with_parent
        )
        self.started_at = time.monotonic()
        say(f"started {self.name} (pid {self.process.pid})")

    def exited(self, code: int, now: float) -> None:
        """Note the exit and when to start again: after `pause`, which doubles for the next exit unless
        the process had run HEALTHY_SECONDS."""
        self.process = None
        if now - self.started_at >= HEALTHY_SECONDS:
            self.pause = 1.0
        self.restarts += 1
        self.start_at = now + self.pause
        how = f"signal {-code}" if code < 0 else f"code {code}"
        say(
            f"{self.name} exited with {how} after {now - self.started_at:.0f} s; restarting in "
            f"{self.pause:.0f} s (restart {self.restarts}); the others keep running"
        )
        self.pause = min(self.pause * 2, MAX_PAUSE_SECONDS)


class Runner:
    def __init__(self, processes: dict[str, list[str]], addr: str) -> None:
        self.supervised = [Supervised(name, command) for name, command in processes.items()]
        self.addr = addr
        self.stopping = False

    def stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.stop)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGHUP, self.stop)
        served = served_addr_file()
        served.parent.mkdir(parents=True, exist_ok=True)
        partial = served.with_name(served.name + ".part")
        partial.write_text(self.addr + "\n")
        partial.replace(served)
        try:
            return self._supervise()
        finally:
            if served.exists() and served.read_text().strip() == self.addr:
                served.unlink()

    def _supervise(self) -> int:
        for one in self.supervised:
            one.start()
        while not self.stopping:
            now = time.monotonic()
            for one in self.supervised:
                if one.process is not None:
                    code = one.process.poll()
                    if code is not None:
                        one.exited(code, now)
                elif now >= one.start_at and not self.stopping:
                    one.start()
            time.sleep(0.2)
        return self.stop_all()

    def stop_all(self) -> int:
        say("stopping web, worker, beat and gateway")
        running = [one for one in self.supervised if one.process is not None]
        for one in running:
            assert one.process is not None
            with contextlib.suppress(ProcessLookupError):
                one.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        killed = []
        for one in running:
            assert one.process is not None
            try:
                one.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(one.process.pid, signal.SIGKILL)
                one.process.wait()
                killed.append(one.name)
        if killed:
            say(f"killed {', '.join(killed)}: not stopped {STOP_SECONDS:.0f} s after SIGTERM")
        say("stopped")
        return 1 if killed else 0


def main() -> int:
    bin_dir = os.environ.get("BIN", ".venv/bin")
    addr = os.environ.get("ADDR", "127.0.0.1:8000")
    return Runner(commands(bin_dir, addr), addr).run()


if __name__ == "__main__":
    sys.exit(main())
