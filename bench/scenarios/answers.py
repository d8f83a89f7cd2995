"""10. Answer links through the WSGI app: answers recorded per second by gunicorn serving `config.wsgi`.

One team of N players (3,000; 600 with --quick) and one training in two days that invites them all. Each
round POSTs one answer per player to `/api/answer-links/<token>/`: half invitation links
(`{"response": ...}`), half pre-training questionnaire links (`{"answers": {...}}`), the answer changing
every round so each POST writes. The alternative, in the same round with the same server and client, is a
trivial Django view: `GET /health/live` through the same middleware, N times.

The server is `gunicorn config.wsgi` with WORKERS sync workers (2 x cores + 1), as the Procfile runs it
but without the access log. The client is wrk (Debian's `wrk`, a C event loop) with bench/answers.lua, one
thread, CONCURRENCY connections in flight: it costs a fraction of what a Python client did per request
(bench/http_load.py, the fallback when wrk is not installed, about 600 µs), so the run measures the server.
Every player answers from an address of their own (X-Forwarded-For behind one proxy, API_NUM_PROXIES=1):
the per-address limit stays on, as it is in production, and counts each phone apart. Rates are medians
over the rounds; the CPU of the workers and of their PostgreSQL backends (read from /proc by pid; the
workers keep their connection for the run, BENCH_CONN_MAX_AGE) per request says what one request costs
whatever else the shared machine runs, and so what rate two quiet cores would allow.
Target: >= 1,000 answers/s.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.harness import Harness
from bench.report import RoundRatios, Row, Section

TARGET = 1_000.0
WORKERS = 5  # gunicorn's advice: 2 x cores + 1
CONCURRENCY = 32


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) of live processes, all their threads, from /proc/<pid>/task/*/schedstat:
    the scheduler's nanosecond count, where /proc/<pid>/stat counts whole clock ticks (10 ms), too coarse
    for a round of a few hundred requests."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*/schedstat") if Path(f"/proc/{pid}").exists() else ():
            try:
                total += int(task.read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
    return total / 1e9


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _all_workers(master: int, timeout: float = 30.0) -> list[int]:
    """gunicorn's WORKERS workers, once it has forked them all."""
    deadline = time.monotonic() + timeout
    while len(workers := _children(master)) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.1)
    if len(workers) != WORKERS:
        raise RuntimeError(f"gunicorn runs {len(workers)} workers, not {WORKERS}")
    return workers


def _backends() -> list[int]:
    """The PostgreSQL backends of the run's database other than this process's own: the workers'
    persistent connections (CONN_MAX_AGE), whose CPU is the database's share of each request."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [row[0] for row in cursor.fetchall()]


def _address(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


LUA = Path(__file__).resolve().parent.parent / "answers.lua"


class _Client:
    """The load generator: wrk with bench/answers.lua when installed, else bench/http_load.py. `run` sends
    one round (every player's answer, or as many GET /health/live) and returns its result: statuses,
    seconds from the first request to the last answer, latencies, and the client's own CPU seconds."""

    def __init__(self, h: Harness, port: int, links: list[tuple[int, str, str]]) -> None:
        self.h, self.port, self.links = h, port, links
        self.wrk = shutil.which("wrk")
        self.name = "wrk (bench/answers.lua)" if self.wrk else "bench/http_load.py (wrk not installed)"
        self.links_file = h.log_dir / "answer-links.txt"
        self.links_file.write_text(
            "".join(f"{kind} {token} {_address(player_id)}\n" for player_id, kind, token in links)
        )

    def run(self, mode: str, round_: int, links: list[tuple[int, str, str]] | None = None) -> dict[str, Any]:
        links = self.links if links is None else links
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = self._wrk(mode, round_, links) if self.wrk else self._python(mode, round_, links)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return result

    def _wrk(self, mode: str, round_: int, links: list[tuple[int, str, str]]) -> dict[str, Any]:
        path = self.links_file
        if links is not self.links:
            path = self.h.log_dir / "answer-links-warm.txt"
            path.write_text("".join(f"{k} {t} {_address(p)}\n" for p, k, t in links))
        done = subprocess.run(
            [str(self.wrk), "-t1", f"-c{CONCURRENCY}", "-d600s", "--timeout", "30s", "-s", str(LUA),
             f"http://127.0.0.1:{self.port}", "--", str(path), str(round_), mode],
            capture_output=True, check=True, timeout=660,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        return result

    def _python(self, mode: str, round_: int, links: list[tuple[int, str, str]]) -> dict[str, Any]:
        requests: list[list[Any]] = []
        for player_id, kind, token in links:
            headers = {"X-Forwarded-For": _address(player_id)}
            if mode == "trivial":
                requests.append(["GET", "/health/live", headers, None])
                continue
            body = (
                {"response": "accepted" if round_ % 2 == 0 else "denied"}
                if kind == "INVITATION"
                else {"answers": {"sleep_quality": 1 + round_ % 7, "fatigue": 3, "stress": 2, "soreness": 4}}
            )
            requests.append(["POST", f"/api/answer-links/{token}/", headers, json.dumps(body)])
        done = subprocess.run(
            [sys.executable, "-m", "bench.http_load", "127.0.0.1", str(self.port), str(CONCURRENCY)],
            input="\n".join(json.dumps(r) for r in requests).encode(),
            capture_output=True, check=True, env=self.h.child_env(), timeout=600,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        result.pop("cpu", None)  # counted by the caller, like wrk's
        return result


def run(h: Harness) -> Section:
    from django.utils import timezone

    from trainings import models as tm
    from trainings.answers.links import answer_token
    from trainings.planning.writes import training_create

    section = Section("answers")
    n = 600 if h.quick else 3_000
    rounds = 3 if h.quick else 5
    team = tm.Team.objects.create(
        name="bench answers", time_zone="Europe/Paris", quiet_start=None, quiet_end=None
    )
    players = tm.Player.objects.bulk_create([tm.Player(name=f"bench answer {i}") for i in range(n)])
    tm.Membership.objects.bulk_create([tm.Membership(team=team, player=p, active=True) for p in players])
    start = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    training = training_create(
        team=team, title="Bench answers", start=start, end=start + timedelta(minutes=90),
        time_zone="Europe/Paris",
    )  # fmt: skip
    links = [
        (p.pk, "INVITATION" if i % 2 == 0 else "PRE",
         answer_token(player_id=p.pk, training_id=training.pk, kind="INVITATION" if i % 2 == 0 else "PRE"))
        for i, p in enumerate(players)
    ]  # fmt: skip

    port = _free_port()
    server = h.start(
        "gunicorn-answers",
        [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(WORKERS), "--graceful-timeout", "5"],
        API_NUM_PROXIES="1",
        BENCH_CONN_MAX_AGE="3600",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
    )  # fmt: skip
    try:
        _wait_for_port(port, server)
        client = _Client(h, port, links)
        # Warm each worker (imports, URL resolver, the database connection, the prepared statements) before
        # the clock starts: answers the rounds do not count (the first links, answered twice).
        client.run("trivial", 0, links[:200])
        client.run("answers", rounds + 1, links[:200])
        client.run("answers", rounds + 2, links[:200])
        # gunicorn listens before it has forked every worker: the ones whose CPU is counted are read once all
        # of them run (a worker missing from the list would make a request look cheaper than it is).
        workers = [server.pid, *_all_workers(server.pid)]

        answers_rates: list[float] = []
        trivial_rates: list[float] = []
        answer_cpu: list[float] = []
        database_cpu: list[float] = []
        trivial_cpu: list[float] = []
        client_cpu: list[float] = []
        statuses: dict[str, int] = {}
        latencies: list[tuple[float, float]] = []
        load_start = os.getloadavg()[0]
        for r in range(rounds):
            backends = _backends()  # the same pids all run (BENCH_CONN_MAX_AGE); read again to be sure
            cpu, database = _cpu_seconds(workers), _cpu_seconds(backends)
            answered = client.run("answers", r)
            answer_cpu.append((_cpu_seconds(workers) - cpu) / n)
            database_cpu.append((_cpu_seconds(backends) - database) / n)
            cpu = _cpu_seconds(workers)
            served = client.run("trivial", r)
            trivial_cpu.append((_cpu_seconds(workers) - cpu) / n)
            answers_rates.append(answered["statuses"].get("200", 0) / answered["seconds"])
            trivial_rates.append(served["statuses"].get("200", 0) / served["seconds"])
            client_cpu.append(answered["cpu"] / n)
            latencies.append((answered["p50_ms"], answered["p99_ms"]))
            for code, count in answered["statuses"].items():
                statuses[code] = statuses.get(code, 0) + count
            print(
                f"  round {r + 1}: {answers_rates[-1]:,.0f} answers/s ({answered['statuses']}), "
                f"trivial {trivial_rates[-1]:,.0f}/s; worker CPU {answer_cpu[-1] * 1e6:,.0f} µs "
                f"(+ PostgreSQL {database_cpu[-1] * 1e6:,.0f} µs) vs {trivial_cpu[-1] * 1e6:,.0f} µs per "
                "request",
                flush=True,
            )
        load_end = os.getloadavg()[0]
    finally:
        h.stop(server)

    recorded_invitations = tm.Invitation.objects.filter(training=training).exclude(status="PENDING").count()
    recorded_answers = tm.QuestionnaireAnswer.objects.filter(training=training).count()
    ratios = RoundRatios(tuple(a / t for a, t in zip(answers_rates, trivial_rates, strict=True)))
    rate = RoundRatios(tuple(answers_rates)).median
    trivial_rate = RoundRatios(tuple(trivial_rates)).median
    cpu_ratio = RoundRatios(tuple(a / max(t, 1e-6) for a, t in zip(answer_cpu, trivial_cpu, strict=True)))
    all_ok = statuses.get("200", 0) == n * rounds
    worker_us = RoundRatios(tuple(x * 1e6 for x in answer_cpu)).median
    database_us = RoundRatios(tuple(x * 1e6 for x in database_cpu)).median
    server_us = RoundRatios(
        tuple((a + d) * 1e6 for a, d in zip(answer_cpu, database_cpu, strict=True))
    ).median
    trivial_us = RoundRatios(tuple(x * 1e6 for x in trivial_cpu)).median
    capacity = (os.cpu_count() or 1) * 1e6 / server_us
    section.rows += [
        Row(
            f"10a answer links, POST through gunicorn ({WORKERS} workers, {n:,} answers x {rounds} rounds)",
            rate,
            trivial_rate,
            "trivial view /health/live",
            "answers/s",
            ratios.median,
            "of trivial",
            "≥ 1,000 answers/s",
            passed=rate >= TARGET and all_ok,
            note=f"rates are medians of {rounds} rounds; answers/trivial {ratios.describe()}; statuses "
            f"{statuses}; {recorded_invitations:,} invitations and {recorded_answers:,} questionnaires "
            f"recorded; latency p50/p99 of the median round "
            f"{sorted(latencies)[len(latencies) // 2][0]:.1f}/{sorted(latencies)[len(latencies) // 2][1]:.1f}"
            f" ms at {CONCURRENCY} in flight from {client.name}; load average {load_start:.1f} at the start, "
            f"{load_end:.1f} at the end",
        ),
        Row(
            "10b answer link, CPU per answer: gunicorn worker + its PostgreSQL backend",
            server_us,
            trivial_us,
            "trivial view (worker)",
            "µs",
            server_us / max(trivial_us, 1.0),
            "of trivial",
            note=f"worker {worker_us:,.0f} µs + PostgreSQL backend {database_us:,.0f} µs per answer (medians "
            f"of {rounds} rounds; worker CPU answer/trivial {cpu_ratio.describe()}); the client spent "
            f"{RoundRatios(tuple(x * 1e6 for x in client_cpu)).median:,.0f} µs per answer. At that CPU "
            f"cost the server side alone could serve {capacity:,.0f} answers/s on this machine's "
            f"{os.cpu_count()} cores if it had them to itself (client, WAL writer and other sessions not "
            "counted)",
        ),
    ]
    section.data = {
        "answers_rates": answers_rates, "trivial_rates": trivial_rates, "answer_cpu": answer_cpu,
        "trivial_cpu": trivial_cpu, "client_cpu": client_cpu,
        "database_cpu": database_cpu, "statuses": statuses,
    }  # fmt: skip
    return section


def _wait_for_port(port: int, proc: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not listen on {port} within {timeout}s")
