"""Settings for every process of a benchmark run: the project's own settings, on the run's database and
Celery queue (both chosen by the harness through the environment), plus the benchmark's Celery task."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import DATABASES, INSTALLED_APPS, LOGGING

INSTALLED_APPS = [*INSTALLED_APPS, "bench"]
# A queue of our own, so a run never feeds or starves another worker on the same vhost.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("BENCH_CELERY_QUEUE", "bench.celery")
# The harness waits for beat's "beat: Starting" line, which the project logs below WARNING by default.
LOGGING = {**LOGGING, "loggers": {**LOGGING["loggers"], "celery.beat": {"level": "INFO"}}}
# The answers scenario counts the CPU of each gunicorn worker's PostgreSQL backend by its pid: it keeps
# one connection per worker for the whole run instead of the 60 s a production connection lives.
if os.environ.get("BENCH_CONN_MAX_AGE"):
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ["BENCH_CONN_MAX_AGE"])
