"""Logging filters named in settings.LOGGING (importable before the apps are ready)."""

from __future__ import annotations

import logging


class ForbiddenWithoutTraceback(logging.Filter):
    """A refused page (403) is an expected answer: keep its one log line, drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
