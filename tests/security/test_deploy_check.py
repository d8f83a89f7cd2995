"""Production settings come from the environment and pass `manage.py check --deploy --fail-level WARNING`.

Run in a subprocess, as a deployment would run it: settings are read once at import, so the only honest
test of "configured from the environment" is a fresh process with that environment. The passing check is
`manage.py` itself; the variants that must fail run in one process (`deploy_check_variants`), which reads the
settings module again for each environment.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.ops.env_template import template_variables

REPO_ROOT = Path(__file__).resolve().parents[2]


def production_env() -> dict[str, str]:
    """The production values the environment file template documents (its uncommented lines), with the
    placeholder secret key left out (each test generates one) and local paths moved under the test's."""
    values = {name: value for name, value in template_variables().items() if value is not None}
    del values["DJANGO_SECRET_KEY"]
    return values


PRODUCTION_ENV = production_env()


def _environment(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The test process's environment without its DJANGO_ variables, plus `env`, with local paths moved
    under the test's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return {
        **base,
        **env,
        "REMINDERS_VAR_DIR": str(tmp_path / "var"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    }


def _check_deploy(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=_environment(tmp_path, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_passes_the_deploy_check_with_production_settings_from_the_environment(tmp_path: Path) -> None:
    result = _check_deploy(tmp_path, {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


MISSING = [
    ("DJANGO_SECRET_KEY", None, "security.W009"),
    ("DJANGO_DEBUG", "1", "security.W018"),
    ("DJANGO_SECURE_HSTS_SECONDS", "0", "security.W004"),
    ("DJANGO_SECURE_SSL_REDIRECT", "0", "security.W008"),
    ("DJANGO_SESSION_COOKIE_SECURE", "0", "security.W012"),
    ("DJANGO_CSRF_COOKIE_SECURE", "0", "security.W016"),
]


def test_it_fails_the_deploy_check_when_any_one_production_setting_is_missing(tmp_path: Path) -> None:
    """The check is not vacuous: drop any one of them and it fails, naming the setting's warning; the
    complete set passes in the same process, so a failure is the missing setting's and no other's."""
    complete = {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    environments = [_environment(tmp_path, complete)]
    for variable, value, _ in MISSING:
        env = dict(complete)
        if value is None:
            del env[variable]
        else:
            env[variable] = value
        environments.append(_environment(tmp_path, env))
    run = subprocess.run(
        [sys.executable, "-m", "tests.security.deploy_check_variants"],
        cwd=REPO_ROOT,
        env=environments[0],
        input=json.dumps(environments),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    passed, *failed = json.loads(run.stdout)
    assert passed["returncode"] == 0 and "no issues" in passed["stdout"], passed
    for (variable, _, warning), result in zip(MISSING, failed, strict=True):
        assert result["returncode"] != 0, variable
        assert warning in result["stderr"] + result["stdout"], (variable, result)
