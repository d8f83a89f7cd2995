"""Logging filters named in settings.LOGGING (importable before the apps are ready)."""

from __future__ import annotations

import logging
import re

from django.conf import settings

from reminders.ops.logformat import FIELDS

# Paths whose next segment is a credential: the signed tokens of the answer links (API and email page) and
# of the one-click unsubscribe. tests/ops/test_log_redaction.py fails when a route of the URL conf takes a
# token this list does not cover.
TOKEN_PATH_PREFIXES = ("/api/answer-links/", "/answer/", "/email/unsubscribe/")
REDACTED = "[redacted]"


def _prefix_pattern(prefix: str) -> str:
    """A prefix as it appears raw or percent-encoded (`next=%2Fanswer%2F...`)."""
    return "(?:/|%2[fF])".join(re.escape(part) for part in prefix.split("/"))


# The token runs to the next path, query or fragment separator, quote or space; a percent-encoded token
# (its `:` as `%3A`) is taken whole.
_TOKEN_IN_PATH = re.compile(
    "(" + "|".join(_prefix_pattern(prefix) for prefix in TOKEN_PATH_PREFIXES) + r")[^/?#&\s\"'<>\\]+"
)


def redact_tokens(text: str) -> str:
    """`text` with every token in a credential path replaced by `[redacted]` (the path's prefix stays, so
    a line still says which route was asked)."""
    if "answer" not in text and "unsubscribe" not in text:  # most lines: no regex at all
        return text
    return _TOKEN_IN_PATH.sub(rf"\1{REDACTED}", text)


# The `extra` key of a development-only record that shows a link on purpose (see TokenRedaction).
SHOWS_CREDENTIAL = "shows_credential"


class TokenRedaction(logging.Filter):
    """On every handler the service configures: the message, its traceback and the structured fields of
    a record carry no answer-link or unsubscribe token (a `django.request` "Not Found: /answer/<token>/",
    runserver's request line, a traceback's request path). One exception, for development only: a record
    logged with `extra={SHOWS_CREDENTIAL: True}` (the logging stand-in's PUSH line with its answer page)
    keeps its link while DEBUG is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, SHOWS_CREDENTIAL, False) and settings.DEBUG:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format is logging's to report, as it would without this filter
            return True
        redacted = redact_tokens(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:  # the formatter uses exc_text when it is set
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_tokens(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_tokens(record.stack_info)
        for name in FIELDS:
            value = record.__dict__.get(name)
            if isinstance(value, str):
                record.__dict__[name] = redact_tokens(value)
        return True


class ForbiddenWithoutTraceback(logging.Filter):
    """A refused page (403) is an expected answer: keep its one log line, drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
