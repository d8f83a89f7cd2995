"""The Celery application shared by the worker, beat and the web process (which only sends kicks)."""

from __future__ import annotations

import logging
import os

from celery import Celery, signals

from common import filesystem_broker
from reminders.ops.logfilters import TokenRedaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# `filesystem://` (the embedded default) without kombu's empty-message race, in every process that loads the
# settings: Celery's, and every kombu connection of the project's own.
filesystem_broker.register()

# LOG_FORMAT=json: Celery leaves logging to Django's LOGGING (one JSON object per line) instead of
# installing its own text format on the root logger.
if os.environ.get("LOG_FORMAT") == "json":

    @signals.setup_logging.connect
    def _logging_from_django_settings(**kwargs: object) -> None:
        from logging.config import dictConfig

        from django.conf import settings

        dictConfig(settings.LOGGING)

else:
    # LOG_FORMAT=text: Celery's own handlers (the root's, the task logger's and the multiprocessing
    # logger's, which Celery configures with the root's) get the filter every handler of Django's LOGGING
    # has: no answer-link or unsubscribe token in a line (reminders/ops/logfilters.py).
    @signals.after_setup_logger.connect
    @signals.after_setup_task_logger.connect
    def _tokens_redacted(logger: logging.Logger, **kwargs: object) -> None:
        for handler in [*logger.handlers, *logging.getLogger("multiprocessing").handlers]:
            if not any(isinstance(f, TokenRedaction) for f in handler.filters):
                handler.addFilter(TokenRedaction())


app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
