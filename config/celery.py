"""The Celery application shared by the worker, beat and the web process (which only sends kicks)."""

from __future__ import annotations

import os

from celery import Celery, signals

from common import filesystem_broker

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


app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
