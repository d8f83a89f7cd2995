"""LOG_FORMAT=json: one JSON object per line carrying the occurrence's fields; text stays the default."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from reminders.ops import metrics
from reminders.ops.logformat import JsonFormatter
from reminders.transports.base import Delivery, TransportError
from tests.ops.processes import ROOT


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("reminders.engine.occurrences")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def _delivery(occurrence_id: int, fire_at: datetime) -> Delivery:
    return Delivery(occurrence_id, f"idem-{occurrence_id}", "training-42", fire_at, 3, "q", {})


def test_a_failed_and_a_delivered_occurrence_each_log_one_json_object(json_lines: io.StringIO) -> None:
    now = datetime(2030, 1, 1, 12, tzinfo=UTC)
    failing, ok = _delivery(7, now - timedelta(seconds=2)), _delivery(8, now - timedelta(milliseconds=5))
    errors = {7: TransportError("HTTP 503", permanent=False)}

    metrics.occurrences_failed("http", [failing, ok], errors, lambda attempts: False, now)
    metrics.occurrences_delivered("http", [failing, ok], errors, 1, now)

    retried, delivered = (json.loads(line) for line in json_lines.getvalue().splitlines())
    assert retried["level"] == "WARNING"
    assert {k: retried[k] for k in ("key", "occurrence_id", "idempotency_key", "attempt", "outcome")} == {
        "key": "training-42", "occurrence_id": 7, "idempotency_key": "idem-7", "attempt": 3,
        "outcome": "retried",
    }  # fmt: skip
    assert retried["lateness_seconds"] == 2.0
    assert retried["error"] == "HTTP 503"
    assert delivered["outcome"] == "delivered" and delivered["occurrence_id"] == 8
    assert delivered["lateness_seconds"] == 0.005


def test_the_format_is_text_by_default_and_json_on_request() -> None:
    assert settings.LOG_FORMAT == "text"
    assert settings.LOGGING["handlers"]["console"]["formatter"] == "plain"
    code = (
        "import django; django.setup(); import logging; "
        "logging.getLogger('x').warning('hi', extra={'key': 'k'})"
    )
    env_json = {"DJANGO_SETTINGS_MODULE": "config.settings", "LOG_FORMAT": "json", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_json, capture_output=True, text=True)
    line = json.loads(out.stderr.strip().splitlines()[-1])
    assert (line["logger"], line["message"], line["key"], line["level"]) == ("x", "hi", "k", "WARNING")

    bad = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env_json, "LOG_FORMAT": "yaml"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "LOG_FORMAT must be 'text' or 'json'" in bad.stderr
