"""Readiness checks (`/health/ready`, `manage.py healthcheck`) and the scan heartbeat they read.

Ready means the scheduler can do its work: the database answers with the schema this code expects (every
migration applied, every table present), the broker accepts a connection, and some worker finished a due
scan within REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS. "Finished a scan" is recorded in
`WorkerHeartbeat` (one row per worker node) by the scan task itself, at most once a second per process, and
both the write and the age check use the database's clock, so a host whose clock is off does not look dead
or alive by mistake.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models.functions import Now
from kombu import Connection

from common.amqp.queues import broker_urls
from reminders import queries
from reminders.engine.dialect import database_name
from reminders.models import WorkerHeartbeat

# Rows of worker names not seen for this long are deleted (a renamed or retired host).
_STALE_WORKERS = timedelta(days=7)
_WRITE_EVERY_SECONDS = 1.0
_last_write = 0.0
_pruned = False


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "detail": self.detail}


def scan_finished(*, worker: str | None = None) -> None:
    """Record that this worker finished a scan; at most one write per second per process."""
    global _last_write, _pruned
    if time.monotonic() - _last_write < _WRITE_EVERY_SECONDS:
        return
    name = worker or f"{socket.gethostname()}:{os.getpid()}"
    if not WorkerHeartbeat.objects.filter(worker=name).update(scan_finished_at=Now()):
        WorkerHeartbeat.objects.update_or_create(worker=name, defaults={"scan_finished_at": Now()})
    if not _pruned:  # once per process: workers that have not scanned for a week are gone
        WorkerHeartbeat.objects.filter(scan_finished_at__lt=Now() - _STALE_WORKERS).delete()
        _pruned = True
    _last_write = time.monotonic()


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute(queries.DATABASE_PING)
            cursor.fetchone()
    except Exception as exc:
        return Check("database", False, f"{type(exc).__name__}: {exc}"[:300])
    return Check("database", True, database_name())


def check_schema() -> Check:
    """Every migration of this code applied and every table its models name present: a deploy whose
    migrate did not run, or a table gone, answers 500 on every request that needs it, so it is not ready.
    Reads the migration files once per process (Django caches their modules) and the database's catalog."""
    try:
        executor = MigrationExecutor(connection)
        unapplied = [m for m, _ in executor.migration_plan(executor.loader.graph.leaf_nodes())]
        present = set(connection.introspection.table_names(include_views=True))
    except Exception as exc:
        return Check("schema", False, f"{type(exc).__name__}: {exc}"[:300])
    if unapplied:
        names = ", ".join(f"{m.app_label}.{m.name}" for m in unapplied[:5])
        return Check("schema", False, f"{len(unapplied)} migration(s) not applied: {names}"[:300])
    missing = sorted(_tables() - present)
    if missing:
        return Check("schema", False, f"{len(missing)} table(s) missing: {', '.join(missing[:5])}"[:300])
    return Check("schema", True, f"{len(executor.loader.applied_migrations)} migrations applied")


def _tables() -> set[str]:
    """The tables of every installed model this project's migrations create."""
    return {
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy
    }


def check_broker() -> Check:
    """Celery's broker (kicks) and, if it is another one, the broker `rabbitmq` callbacks go to."""
    timeout = settings.REMINDERS_HEALTH_TIMEOUT_SECONDS
    urls = dict.fromkeys([settings.CELERY_BROKER_URL, settings.REMINDERS_CALLBACK_BROKER_URL])
    for url in urls:
        try:
            with Connection(url, connect_timeout=timeout) as broker:
                # Several brokers (`;`): kombu tries each in turn; one answering is enough.
                retries = max(1, len(broker_urls(url)) - 1)
                broker.ensure_connection(max_retries=retries, interval_start=0, timeout=int(timeout) or 1)
        except Exception as exc:
            return Check("broker", False, f"{_redacted(url)}: {type(exc).__name__}: {exc}"[:300])
    return Check("broker", True, ", ".join(_redacted(url) for url in urls))


def check_scan() -> Check:
    """Some worker finished a scan recently (by the database's clock)."""
    limit = settings.REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS
    try:
        latest = (
            WorkerHeartbeat.objects.annotate(db_now=Now())
            .order_by("-scan_finished_at")
            .values_list("worker", "scan_finished_at", "db_now")
            .first()
        )
    except Exception as exc:
        return Check("scan", False, f"cannot read the heartbeat: {type(exc).__name__}: {exc}"[:300])
    if latest is None:
        return Check("scan", False, "no worker has ever finished a scan")
    worker, finished_at, now = latest
    age = (now - finished_at).total_seconds()
    if age > limit:
        return Check("scan", False, f"last scan finished {age:.1f} s ago by {worker} (limit {limit} s)")
    return Check("scan", True, f"last scan finished {age:.1f} s ago by {worker}")


# Checks other apps add (trainings: the push gateway); each returns a Check, or None when it does not apply.
_extra_checks: list[Callable[[], Check | None]] = []


def readiness_check_register(check: Callable[[], Check | None]) -> None:
    if check not in _extra_checks:
        _extra_checks.append(check)


def readiness() -> list[Check]:
    extra = [check() for check in _extra_checks]
    database = check_database()
    schema = check_schema() if database.ok else Check("schema", False, "the database does not answer")
    return [database, schema, check_broker(), check_scan(), *(c for c in extra if c is not None)]


def _redacted(url: str) -> str:
    """The broker URL without its password, for a response body or a log line."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = rest.rsplit("@", 1)[1]
    return f"{scheme}{sep}{rest}"
