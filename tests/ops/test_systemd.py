"""deploy/systemd/: the units pass `systemd-analyze verify`, are hardened, migrate in one unit only, and the
environment file template lists every variable the settings read.

The units name their commands under /opt/reminders (the runbook's install path); the verify test rewrites
that path to this checkout, so systemd also checks that every command exists in the virtualenv.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.ops.env_template import TEMPLATE, settings_variables, template_variables

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
SERVICES = sorted(UNITS.glob("*.service"))
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "User": "reminders",
    "Restart": "on-failure",
    "EnvironmentFile": "/etc/reminders/reminders.env",
}


def _directives(unit: Path) -> list[tuple[str, str]]:
    lines = [line.strip() for line in unit.read_text().splitlines()]
    return [
        (key.strip(), value.strip())
        for key, sep, value in (line.partition("=") for line in lines if line and line[0] not in "#;[")
        if sep
    ]


def test_there_is_a_unit_per_process() -> None:
    assert [unit.name for unit in SERVICES] == [
        "reminders-beat.service", "reminders-gateway.service", "reminders-web.service",
        "reminders-worker.service",
    ]  # fmt: skip


@pytest.mark.parametrize("unit", SERVICES, ids=lambda unit: unit.stem)
def test_every_unit_is_hardened(unit: Path) -> None:
    directives = dict(_directives(unit))
    for key, value in HARDENING.items():
        assert directives.get(key) == value, (unit.name, key)
    assert "RestartSec" in directives and "TimeoutStopSec" in directives


def test_only_the_web_unit_migrates() -> None:
    migrating = [
        unit.name
        for unit in SERVICES
        for key, value in _directives(unit)
        if key == "ExecStartPre" and " migrate" in value
    ]
    assert migrating == ["reminders-web.service"]


def _require_systemd_analyze() -> None:
    if shutil.which("systemd-analyze") is None:
        if IN_CI:
            pytest.fail("systemd-analyze is missing (Debian package systemd; .ci/run installs it)")
        pytest.skip("systemd-analyze (Debian package systemd) is not installed")


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    _require_systemd_analyze()
    venv_bin = Path(sys.executable).parent
    for unit in [*SERVICES, UNITS / "reminders.target"]:
        text = unit.read_text()
        text = text.replace("/opt/reminders/.venv/bin", str(venv_bin)).replace("/opt/reminders", str(ROOT))
        text = text.replace("/etc/reminders/reminders.env", str(TEMPLATE))
        (tmp_path / unit.name).write_text(text)
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in tmp_path.iterdir())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Unknown keys and bad values are only warnings to systemd (the unit still loads without them): any
    # output at all fails the test.
    assert verify.returncode == 0 and not (verify.stdout + verify.stderr).strip(), (
        verify.stdout + verify.stderr
    )


def test_systemd_analyze_is_not_vacuous(tmp_path: Path) -> None:
    _require_systemd_analyze()
    bad = tmp_path / "bad.service"
    bad.write_text(f"[Service]\nExecStart={sys.executable} -V\nKillMode=sideways\n")
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(bad)], capture_output=True, text=True
    )
    assert "kill mode" in verify.stdout + verify.stderr


def test_the_settings_reader_finds_what_the_settings_read() -> None:
    names = settings_variables()
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY", "PROMETHEUS_MULTIPROC_DIR"} <= names
    assert len(names) > 60


def test_the_environment_template_lists_every_variable_the_settings_read() -> None:
    missing = settings_variables() - template_variables().keys()
    assert not missing, (
        f"add to deploy/systemd/reminders.env (with its default and meaning): {sorted(missing)}"
    )


def test_every_template_variable_has_its_meaning_written_above_it() -> None:
    """A variable line (or a group of them) follows a comment, not a blank line."""
    variable = re.compile(r"#?[A-Z][A-Z0-9_]*=.*")
    lines = TEMPLATE.read_text().splitlines()
    for number, line in enumerate(lines):
        if variable.fullmatch(line):
            above = number - 1
            while above >= 0 and variable.fullmatch(lines[above]):
                above -= 1
            assert above >= 0 and lines[above].startswith("# "), line
