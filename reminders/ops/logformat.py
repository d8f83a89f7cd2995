"""LOG_FORMAT=json: one JSON object per line, with the occurrence fields the engine attaches as `extra`."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# What reminders.ops.metrics attaches to an occurrence's log line, plus a few other structured extras.
FIELDS = (
    "key", "occurrence_id", "idempotency_key", "attempt", "outcome", "lateness_seconds", "error",
    "worker", "player", "provider",
)  # fmt: skip


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_text:  # already formatted (and redacted: reminders/ops/logfilters.py)
            line["exception"] = record.exc_text
        elif record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)
