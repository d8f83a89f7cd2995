"""A first deploy done as the runbook says (docs/operations/deploy.md, deploy/systemd/) serves the API.

On an empty PostgreSQL database, with the environment file template's production lines: the runbook's
deploy check, the web unit's `ExecStartPre` commands and its `ExecStart` as the unit file writes them (the
virtualenv's path moved to this one's), the first operator and their API token. The template once set
`API_THROTTLE_CACHE=database` while nothing ran `createcachetable`: every `/api/` request was a 500 and
`/health/ready` said ready.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.ops.processes import ROOT, free_port
from tests.security.test_deploy_check import PRODUCTION_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db]

WEB_UNIT = ROOT / "deploy" / "systemd" / "reminders-web.service"
HOST = "reminders.example.com"  # DJANGO_ALLOWED_HOSTS in the template


def _unit_commands(key: str) -> list[list[str]]:
    """The unit's `key=` command lines, with the runbook's virtualenv (/opt/reminders/.venv) as this one."""
    commands = []
    for line in WEB_UNIT.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == key:
            argv = shlex.split(value.strip())
            program = Path(argv[0]).name
            assert argv[0] == f"/opt/reminders/.venv/bin/{program}", argv
            head = [sys.executable] if program == "python" else [sys.executable, "-m", program]
            commands.append(head + argv[1:])
    return commands


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A new, empty database on the test server; its URL."""
    db = settings.DATABASES["default"]
    name = f"{db['NAME']}_first_deploy"
    quoted = connection.ops.quote_name(name)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        cursor.execute(f"CREATE DATABASE {quoted}")
    try:
        yield f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
    finally:
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")


def _run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done.stdout


def _get(port: int, path: str, token: str = "") -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": HOST}
    if path.startswith("/api/"):  # through the reverse proxy the template expects (API_NUM_PROXIES=1)
        headers |= {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.1"}
    if token:
        headers["Authorization"] = f"Token {token}"
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body.startswith((b"{", b"[")) else body
    finally:
        connection.close()


def test_the_runbooks_first_deploy_serves_the_api_and_is_ready_but_for_a_worker(
    empty_database: str, tmp_path: Path
) -> None:
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "API_", "REMINDERS_"))}
    env = {
        **base,
        **PRODUCTION_ENV,  # the template's uncommented lines, as /etc/reminders/reminders.env has them
        "DATABASE_URL": empty_database,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "REMINDERS_VAR_DIR": str(tmp_path / "var"),  # the unit's StateDirectory
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),  # its RuntimeDirectory
        "GUNICORN_CMD_ARGS": PRODUCTION_ENV["GUNICORN_CMD_ARGS"].replace(":8000", f":{port}"),
        "DJANGO_SUPERUSER_PASSWORD": secrets.token_urlsafe(16),
    }
    assert f"127.0.0.1:{port}" in env["GUNICORN_CMD_ARGS"]
    # Step 2: the check before the first start.
    _run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    # Step 3: the web unit starts: its ExecStartPre commands (migrate, collectstatic), then ExecStart.
    for command in _unit_commands("ExecStartPre"):
        _run(command, env)
    [start] = _unit_commands("ExecStart")
    log = (tmp_path / "web.log").open("w")
    web = subprocess.Popen(start, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Step 4: the first operator, and (docs/api.md) an API token for them.
        _run([sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "operator",
              "--email", "operator@example.com"], env)  # fmt: skip
        token = _run([sys.executable, "manage.py", "drf_create_token", "operator"], env).split()[2]
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _ = _get(port, "/health/live")
                break
            except OSError:
                assert web.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        assert status == 200

        for path in ("/api/jobs/", "/api/trainings/", "/api/schedules/"):
            status, body = _get(port, path, token)
            assert status == 200, (path, body)
            assert body["results"] == []

        # Step 5: ready once a worker finished its first scan; none runs here, and nothing else fails.
        status, body = _get(port, "/health/ready")
        assert (status, body["failing"]) == (503, ["scan"]), body
        assert body["checks"]["schema"]["ok"] is True
    finally:
        web.terminate()
        web.wait(timeout=30)
        log.close()
        print((tmp_path / "web.log").read_text()[-3000:])
