"""gunicorn's logger for the web process (config/gunicorn.py names it): its access log and its error log
carry no answer-link or unsubscribe token, whatever the access-log format asks for (the request line,
the path, the query, the Referer a browser sends from the email answer page, any header or environ
variable), as every handler of Django's LOGGING does (reminders/ops/logfilters.py)."""

from __future__ import annotations

from typing import Any

from gunicorn.config import Config
from gunicorn.glogging import Logger, SafeAtoms

from reminders.ops.logfilters import TokenRedaction, redact_tokens


class RedactedAtoms(SafeAtoms):
    """The access line's values, each redacted as the format reads it (only the atoms it names)."""

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        return redact_tokens(value) if isinstance(value, str) else value


class RedactingLogger(Logger):
    """gunicorn's Logger whose access atoms and every handler of its two logs redact tokens."""

    atoms_wrapper_class = RedactedAtoms

    def setup(self, cfg: Config) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, TokenRedaction) for f in handler.filters):
                    handler.addFilter(TokenRedaction())
