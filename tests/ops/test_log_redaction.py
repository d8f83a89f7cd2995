"""Answer-link and unsubscribe tokens are credentials: no log line the service configures carries one.

gunicorn runs exactly as the systemd unit and the Procfile start it (their command line, the environment
file's GUNICORN_CMD_ARGS and LOG_FORMAT) on loopback, and is asked for such URLs: working links, forged
ones, 404s below them, a query string and a Referer naming one. Neither its access log nor its error log
nor Django's loggers (`django.request`) write a token. runserver's request lines (`django.server`), every
handler Django's LOGGING installs (the web, the gateway, Celery under LOG_FORMAT=json) and Celery's own
handlers under LOG_FORMAT=text carry the same filter, and every route of the URL conf that takes a token
is one the filter knows.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from delivery.channels.email.message import unsubscribe_token
from reminders.ops.logfilters import (
    REDACTED,
    SHOWS_CREDENTIAL,
    TOKEN_PATH_PREFIXES,
    TokenRedaction,
    redact_tokens,
)
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from tests.ops.env_template import template_variables
from tests.ops.processes import ROOT, database_url
from trainings.answers.links import answer_token

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
UNIT = ROOT / "deploy" / "systemd" / "reminders-web.service"
VENV_BIN = Path(sys.executable).parent


# --- The filter ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "redacted"),
    [
        ("GET /answer/WzEsIm:1vX:sig-_A/ HTTP/1.1", f"GET /answer/{REDACTED}/ HTTP/1.1"),
        ("Not Found: /api/answer-links/abc:def/extra/", f"Not Found: /api/answer-links/{REDACTED}/extra/"),
        ('"https://x.example/email/unsubscribe/t0k:en"', f'"https://x.example/email/unsubscribe/{REDACTED}"'),
        ("/health/live?next=%2Fanswer%2Ft0k%3Aen&x=1", f"/health/live?next=%2Fanswer%2F{REDACTED}&x=1"),
        ("/api/answer-links/abc?x=1 /answer/def#f", f"/api/answer-links/{REDACTED}?x=1 /answer/{REDACTED}#f"),
        ("GET /api/jobs/ 200", "GET /api/jobs/ 200"),
    ],
)
def test_it_redacts_the_token_of_every_credential_path(line: str, redacted: str) -> None:
    assert redact_tokens(line) == redacted


def _routes(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern), entry


def test_every_route_that_takes_a_token_is_one_the_filter_redacts() -> None:
    taking = [route for route, _ in _routes(get_resolver()) if re.search(r"<(?:\w+:)?\w*token\w*>", route)]
    assert len(taking) >= 3, taking
    for route in taking:
        path = "/" + re.sub(r"<(?:\w+:)?\w*token\w*>", "S3CRET:t0ken", route)
        assert "S3CRET" not in redact_tokens(path), f"{route}: add its prefix to TOKEN_PATH_PREFIXES"
    assert len(TOKEN_PATH_PREFIXES) == len(taking)


# --- Every handler of the processes' logging ---------------------------------------------------------------

_HANDLERS = """
import logging, sys
{setup}
from reminders.ops.logfilters import TokenRedaction
bare = []
for name in [None, *logging.Logger.manager.loggerDict]:
    logger = logging.getLogger(name)
    for handler in getattr(logger, "handlers", []):
        if not isinstance(handler, logging.NullHandler):
            if not any(isinstance(f, TokenRedaction) for f in handler.filters):
                bare.append(f"{{name}}: {{handler!r}}")
print("BARE", bare, file=sys.stdout, flush=True)
logging.getLogger("django.request").warning("Not Found: %s", "/answer/SECRET1:a/")
logging.getLogger("django.server").info('"%s" %s %s', "GET /email/unsubscribe/SECRET2:b/ HTTP/1.1", 404, 9)
logging.getLogger("celery.worker").warning("asked /api/answer-links/%s/", "SECRET3:c")
try:
    raise ValueError("while serving /answer/SECRET4:d/")
except ValueError:
    logging.getLogger("delivery.gateway.consumer").exception("failed on %s", "/email/unsubscribe/SECRET5:e/")
"""
_DJANGO = "import django; django.setup()"
# What `celery worker` does at start: the Django fixup, then Celery's logging (its own handlers on the root
# logger under LOG_FORMAT=text, Django's LOGGING under json).
_CELERY = _DJANGO + "; from config.celery import app; app.log.setup(loglevel='INFO')"


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize("process", ["django", "celery"])
def test_every_handler_of_every_process_redacts_tokens(log_format: str, process: str) -> None:
    code = _HANDLERS.format(setup=_DJANGO if process == "django" else _CELERY)
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "LOG_FORMAT": log_format, "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "BARE []" in run.stdout, run.stdout
    output = run.stdout + run.stderr
    assert "SECRET" not in output, output
    assert output.count(REDACTED) >= 5, output  # each line was written, its token replaced


# --- gunicorn as the unit and the Procfile run it, on loopback ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment_file(port: int) -> dict[str, str]:
    """The environment file's gunicorn options (bind on `port`) and log format: the unit's
    EnvironmentFile, and the runbook's .env for honcho."""
    variables = template_variables()
    args = str(variables["GUNICORN_CMD_ARGS"]).replace("--bind=127.0.0.1:8000", f"--bind=127.0.0.1:{port}")
    return {"GUNICORN_CMD_ARGS": args, "LOG_FORMAT": str(variables["LOG_FORMAT"])}


def _unit_command(port: int) -> tuple[list[str], dict[str, str]]:
    """The web unit's ExecStart."""
    line = next(line for line in UNIT.read_text().splitlines() if line.startswith("ExecStart="))
    command = shlex.split(line.removeprefix("ExecStart=").replace("/opt/reminders/.venv/bin", str(VENV_BIN)))
    return command, _environment_file(port)


def _procfile_command(port: int) -> tuple[list[str], dict[str, str]]:
    """The Procfile's web line, as honcho runs it (a shell, PORT given); LOG_FORMAT as people read it."""
    web = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    env = {**_environment_file(port), "PORT": str(port), "LOG_FORMAT": "text"}
    return ["bash", "-c", web.removeprefix("web:").strip()], env


@pytest.fixture(params=["systemd unit", "Procfile"])
def shipped_gunicorn(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """gunicorn started as the unit or the Procfile starts it; yields its port and its log (stdout and
    stderr: the access log, the error log and Django's loggers)."""
    port = _free_port()
    command, extra = (_unit_command if request.param == "systemd unit" else _procfile_command)(port)
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        **extra,
    }
    (tmp_path / "prometheus").mkdir()
    log = tmp_path / "web.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while _status(f"http://127.0.0.1:{port}/health/live") != 200:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield port, log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def _status(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 - loopback
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_gunicorn_as_shipped_writes_no_token_in_any_line(shipped_gunicorn: tuple[int, Path]) -> None:
    port, log = shipped_gunicorn
    base = f"http://127.0.0.1:{port}"
    team = TeamFactory()
    player = PlayerFactory()
    MembershipFactory(team=team, player=player)
    training = training_made(team, START)
    link = answer_token(player_id=player.pk, training_id=training.pk, kind="INVITATION")
    page = answer_token(player_id=player.pk, training_id=training.pk, kind="PRE", channel="email")
    unsubscribe = unsubscribe_token(player_id=player.pk, kind="PRE")
    forged = link[:-6] + "AAAAAA"
    json_body = {"Content-Type": "application/json"}

    asked = [
        (f"/api/answer-links/{link}/", None, {}, 200),
        (f"/api/answer-links/{link}/", json.dumps({"response": "accepted"}).encode(), json_body, 200),
        (f"/api/answer-links/{forged}/", None, {}, 400),
        (f"/api/answer-links/{link}/more/", None, {}, 404),
        (f"/answer/{page}/", None, {}, 200),
        (f"/answer/{forged}/", None, {}, 400),
        (f"/answer/{page}/more/", None, {}, 404),
        (f"/email/unsubscribe/{unsubscribe}/", None, {}, 200),
        (f"/email/unsubscribe/{unsubscribe}x/", None, {}, 400),
        (f"/email/unsubscribe/{unsubscribe}/more/", None, {}, 404),
        (f"/health/live?next=/answer/{page}/", None, {"Referer": f"{base}/answer/{page}/"}, 200),
    ]
    for path, data, headers, expected in asked:
        assert _status(base + path, data=data, headers=headers) == expected, path

    os.killpg(os.getpgid(_gunicorn_pid(log)), signal.SIGTERM)  # flush and end: every line is written
    time.sleep(2)
    text = log.read_text()
    signatures = [token.rsplit(":", 1)[1] for token in (link, page, unsubscribe)]
    secrets = [link, page, unsubscribe, forged, *signatures]
    leaks = [line for line in text.splitlines() if any(secret in line for secret in secrets)]
    assert not leaks, "\n".join(leaks)
    access = [line for line in text.splitlines() if '" 200 ' in line or '" 40' in line]
    assert len(access) >= len(asked), text[-3000:]  # the access log is on, and wrote each request
    assert text.count(REDACTED) >= len(asked) + 3, text[-3000:]  # + django.request's 400 and 404 lines


def _gunicorn_pid(log: Path) -> int:
    found = re.search(r"Listening at: \S+ \((\d+)\)", log.read_text())
    assert found, log.read_text()[-2000:]
    return int(found.group(1))


# --- runserver (django.server) --------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_runserver_writes_no_token_in_its_request_lines(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    log = tmp_path / "runserver.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _status(f"http://127.0.0.1:{port}/health/live") != 200:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        token = unsubscribe_token(player_id=1, kind="PRE")
        for path in (f"/answer/{token}/", f"/email/unsubscribe/{token}/more/", f"/api/answer-links/{token}/"):
            assert _status(f"http://127.0.0.1:{port}{path}") in (400, 404)
        assert _status(f"http://127.0.0.1:{port}/health/live") == 200  # the last line before it is written
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    text = log.read_text()
    assert token not in text and token.rsplit(":", 1)[1] not in text, text
    assert text.count(f"/{REDACTED}/") >= 6, text  # django.server's line and django.request's, for each


@pytest.mark.parametrize("debug", [True, False])
def test_only_a_development_record_marked_as_showing_its_link_keeps_it(settings: Any, debug: bool) -> None:
    """The logging stand-in's PUSH line under DEBUG (`make run`) keeps its answer page; nothing else does,
    and outside DEBUG not even a record so marked."""
    settings.DEBUG = debug
    line = "PUSH player=1 answer=http://127.0.0.1:8000/answer/abc.def:ghi/"

    def filtered(**extra: object) -> str:
        record = logging.LogRecord("trainings.push", logging.INFO, __file__, 1, line, (), None)
        record.__dict__.update(extra)
        assert TokenRedaction().filter(record)
        return record.getMessage()

    assert filtered() == "PUSH player=1 answer=http://127.0.0.1:8000/answer/[redacted]/"
    assert (filtered(**{SHOWS_CREDENTIAL: True}) == line) is debug
