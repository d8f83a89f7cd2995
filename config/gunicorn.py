"""gunicorn's configuration for the web process, shipped with the code: the systemd unit and the Procfile
run `gunicorn --config python:config.gunicorn config.wsgi`. What a host chooses (bind address, workers,
the access log) comes from GUNICORN_CMD_ARGS in deploy/systemd/reminders.env, read after this file.

The logger redacts answer-link and unsubscribe tokens from the access log and the error log
(reminders/ops/accesslog.py); docs/operations/monitoring.md, "No credentials in the logs".
"""

from __future__ import annotations

logger_class = "reminders.ops.accesslog.RedactingLogger"
