"""Links printed in a second terminal follow the address the running `make run` serves on (scripts/
supervise.py writes it), not only the ADDR of that terminal's shell: `ADDR=127.0.0.1:8010 make run` and a
bare `manage.py demo_trainings` beside it print links to :8010."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.address import served_addr_file, site_url
from tests.ops.processes import ROOT


def test_a_command_without_addr_links_to_the_running_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ADDR", raising=False)
    monkeypatch.setenv("REMINDERS_VAR_DIR", str(tmp_path))
    assert site_url("/admin/") == "http://127.0.0.1:8000/admin/"  # nothing running: the default
    served_addr_file().write_text("127.0.0.1:8010\n")
    assert site_url("/admin/") == "http://127.0.0.1:8010/admin/"
    monkeypatch.setenv("ADDR", "0.0.0.0:8020")  # the shell's own ADDR wins
    assert site_url("/admin/") == "http://127.0.0.1:8020/admin/"


def test_answer_links_of_a_fresh_process_follow_the_running_stack(tmp_path: Path) -> None:
    (tmp_path / "served-addr").write_text("127.0.0.1:8010\n")
    env = {k: v for k, v in os.environ.items() if k not in ("ADDR", "TRAININGS_PUBLIC_URL")}
    env["REMINDERS_VAR_DIR"] = str(tmp_path)
    code = "from django.conf import settings; print(settings.TRAININGS_PUBLIC_URL)"
    shown = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert shown.stdout.strip() == "http://127.0.0.1:8010"
