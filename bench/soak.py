"""`python -m bench.soak [--minutes 30] [--stress | --no-stress]` (or `make soak`): `make run`'s stack on the
embedded defaults (SQLite, the file broker) with the demo for a while, under `stress-ng --cpu 2` where it
is installed (`--stress`: it must be, else the soak refuses to start); then how many processes exited,
and how many reminders fired on time.

It runs in a folder of its own (a fresh SQLite database and broker folder, `--var`, a temporary one by
default) on a port of its own, runs `demo_trainings` every `--demo-every` minutes (each run's reminders
fall due 2 to 4 minutes later; none is started in the last five minutes, so every one of them is due
before the end), and stops the stack with a Ctrl-C as a developer would. A reminder is on time when it was
delivered within ON_TIME_SECONDS of its instant (the SQLite scan polls every second).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ON_TIME_SECONDS = 5.0
NOT_PASSED = (
    "DATABASE_URL", "CELERY_BROKER_URL", "REMINDERS_CALLBACK_BROKER_URL", "PROMETHEUS_MULTIPROC_DIR", "ADDR",
    "CELERY_TASK_DEFAULT_QUEUE", "TRAININGS_PUSH_QUEUE", "REMINDERS_VAR_DIR",
)  # fmt: skip


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the stack runs (default 30)")
    parser.add_argument("--demo-every", type=float, default=3.0, metavar="MINUTES", help="default 3")
    stress = parser.add_mutually_exclusive_group()
    stress.add_argument(
        "--stress", action="store_true", help="under stress-ng --cpu 2, which must be installed"
    )
    stress.add_argument("--no-stress", action="store_true", help="without stress-ng even where installed")
    parser.add_argument("--var", type=Path, default=None, help="its folder (default: a new one in /tmp)")
    return parser.parse_args()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return int(response.status) == 200
    except OSError:
        return False


def _reminders(database: Path, until: dt.datetime) -> dict[str, object]:
    """Occurrences due before `until`: how many, delivered on time, late, not delivered; lateness."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT status, fire_at, delivered_at FROM reminders_occurrence WHERE fire_at <= ?",
            (until.strftime("%Y-%m-%d %H:%M:%S.%f"),),
        ).fetchall()
    lateness = sorted(
        (dt.datetime.fromisoformat(delivered) - dt.datetime.fromisoformat(fire_at)).total_seconds()
        for status, fire_at, delivered in rows
        if status == "delivered" and delivered
    )
    return {
        "due": len(rows),
        "on_time": sum(1 for late in lateness if late <= ON_TIME_SECONDS),
        "late": sum(1 for late in lateness if late > ON_TIME_SECONDS),
        "not_delivered": len(rows) - len(lateness),
        "lateness_p50_s": round(lateness[len(lateness) // 2], 2) if lateness else None,
        "lateness_max_s": round(lateness[-1], 2) if lateness else None,
        "statuses": dict(sorted(Counter(status for status, _, _ in rows).items())),
    }


def main() -> int:
    args = _parse()
    var = args.var or Path(tempfile.mkdtemp(prefix="reminders-soak-"))
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key not in NOT_PASSED}
    env.update({
        "REMINDERS_VAR_DIR": str(var), "ADDR": f"127.0.0.1:{port}", "DJANGO_DEBUG": "1",
        "BIN": str(Path(sys.executable).parent), "PROMETHEUS_MULTIPROC_DIR": str(var / "prometheus"),
    })  # fmt: skip
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    stress_ng = None if args.no_stress else shutil.which("stress-ng")
    if args.stress and stress_ng is None:
        print("--stress: stress-ng is not installed (apt-get install -y stress-ng)", file=sys.stderr)
        return 2
    stress = None
    if stress_ng:
        stress = subprocess.Popen(
            [stress_ng, "--cpu", "2", "--timeout", f"{int(args.minutes * 60) + 120}s", "--quiet"]
        )
    log = var / "run-all.log"
    started = time.monotonic()
    with log.open("w") as out:
        runner = subprocess.Popen(
            ["bash", "scripts/run-all.sh"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    ready = f"http://127.0.0.1:{port}/health/ready"
    end = started + args.minutes * 60
    last_demo_by = end - 5 * 60
    demos, not_ready, checks, next_demo = 0, 0, 0, started
    last_demo_at = dt.datetime.now(dt.UTC)
    try:
        while time.monotonic() < end and runner.poll() is None:
            now = time.monotonic()
            if now >= next_demo and now <= last_demo_by:
                subprocess.run([*manage, "demo_trainings"], cwd=ROOT, env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
                demos += 1
                last_demo_at = dt.datetime.now(dt.UTC)
                next_demo = now + args.demo_every * 60
            if now - started > 90:  # past the start-up
                checks += 1
                not_ready += 0 if _ready(ready) else 1
            time.sleep(10)
    finally:
        stopped_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C
            try:
                runner.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()
        if stress is not None:
            stress.terminate()
            stress.wait()
    output = log.read_text()
    figures = {
        "minutes": args.minutes,
        "stress_ng": bool(stress_ng),
        "demo_runs": demos,
        "exits": len(re.findall(r"^run-all: \w+ exited with", output, re.MULTILINE)),
        "runner_exit_code": runner.returncode,
        "tracebacks": output.count("Traceback (most recent call last)"),
        "json_decode_errors": output.count("JSONDecodeError"),
        "pushes_logged": len(re.findall(r"\bPUSH player=", output)),
        "health_ready_failed": f"{not_ready} of {checks}",
        **_reminders(var / "db.sqlite3", stopped_at - dt.timedelta(seconds=ON_TIME_SECONDS * 2)),
        "last_demo_utc": f"{last_demo_at:%H:%M:%S}",
        "load_average_1_5_15": " ".join(f"{load:.1f}" for load in os.getloadavg()),
        "log": str(log),
    }
    for key, value in figures.items():
        print(f"{key}: {value}")
    return 0 if figures["exits"] == 0 and figures["not_delivered"] == 0 and runner.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
