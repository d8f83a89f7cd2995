"""The operations settings fail loudly at start-up on a value they cannot use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reminders.http.counts import parse_rate
from tests.ops.processes import ROOT


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("API_THROTTLE_TOKEN_RATE", "fast", "API throttle rate token='fast'"),
        ("API_THROTTLE_IP_RATE", "10/fortnight", "API throttle rate ip='10/fortnight'"),
        ("API_THROTTLE_ANSWER_LINK_RATE", "often", "API_THROTTLE_ANSWER_LINK_RATE='often'"),
        ("REMINDERS_HEALTH_READY_RATE", "1/fortnight", "REMINDERS_HEALTH_READY_RATE='1/fortnight'"),
        ("REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS", "0", "below the minimum"),
        ("AXES_FAILURE_LIMIT", "many", "AXES_FAILURE_LIMIT='many' is not an integer"),
    ],
)
def test_a_bad_value_stops_the_process(variable: str, value: str, message: str) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin", variable: value}
    run = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert message in run.stderr


def test_rates_read_as_drf_reads_them() -> None:
    assert parse_rate("100/s") == (100, 1)
    assert parse_rate("6000/min") == (6000, 60)
    assert parse_rate(" 3 / hour ") == (3, 3600)


def test_a_missing_multiprocess_directory_is_created_before_any_metric(tmp_path: Path) -> None:
    directory = tmp_path / "not" / "yet"
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin"}
    env |= {"PROMETHEUS_MULTIPROC_DIR": str(directory), "REMINDERS_VAR_DIR": str(tmp_path / "var")}
    code = (
        "import django; django.setup(); from reminders.ops import metrics; "
        "metrics.OCCURRENCES.labels('a', 'b').inc()"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert any(name.startswith("counter_") for name in os.listdir(directory))
