"""Per test process services under pytest-xdist: a RabbitMQ vhost (or a filesystem broker folder) of its
own, switched to before any test talks to the broker, and a PostgreSQL database of its own (pytest-django
suffixes its name with the xdist worker id), copied from a migrated template rather than migrated again.

Migrating takes tens of seconds and the same time again in every test process; `CREATE DATABASE … TEMPLATE`
copies the result in about a second. The template is named after a fingerprint of everything a migration
runs (every app's migration files, the project's own code that data migrations call, Django's version), so
a template from an earlier run is reused only when migrating again would build the same database; any
change builds a new one, and older ones are dropped.

Test databases commit without waiting for the WAL to reach the disk (`synchronous_commit = off`, set on
each database, not on the server): what another session sees is unchanged, only a server crash could lose
the last commits, and no test crashes PostgreSQL. On a shared disk a flushed commit cost several times more.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import django
from django.conf import settings
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

REPO_ROOT = Path(__file__).resolve().parents[1]

_created: list[str] = []


# --- the database ----------------------------------------------------------------------------------------


def test_databases_from_template(aliases: Iterable[str]) -> bool:
    """Create each PostgreSQL test database as a copy of the migrated template (building the template
    first if no test process has yet). True when every database was copied, so Django's setup only has to
    keep it (its migrate then finds nothing to apply); False leaves SQLite to Django's usual setup."""
    copied = [_copy_from_template(connections[alias]) for alias in aliases]
    return bool(copied) and all(copied)


def _copy_from_template(connection: BaseDatabaseWrapper) -> bool:
    if connection.vendor != "postgresql":
        return False
    ops = connection.ops
    test_name = connection.creation._get_test_db_name()
    prefix = f"test_{connection.settings_dict['NAME']}_template_"
    template = f"{prefix}{_migrations_fingerprint()[:12]}"
    with connection._nodb_cursor() as cursor:
        # One test process builds the template while the others wait; copies are made one at a time too,
        # since CREATE DATABASE … TEMPLATE fails while anyone else is connected to the template.
        cursor.execute("SELECT pg_advisory_lock(hashtext(%s))", [prefix])
        try:
            cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [prefix + "%"])
            existing = {name for (name,) in cursor.fetchall()}
            if template not in existing:
                _build_template(connection, cursor, template)
                for stale in existing - {template}:
                    with contextlib.suppress(DatabaseError):  # in use by another checkout's run: left
                        cursor.execute(f"DROP DATABASE IF EXISTS {ops.quote_name(stale)}")
            # Not forced: a run still using this name (the same DATABASE_URL twice at once) fails here,
            # as Django's own setup would, rather than losing its connections.
            cursor.execute(f"DROP DATABASE IF EXISTS {ops.quote_name(test_name)}")
            cursor.execute(f"CREATE DATABASE {ops.quote_name(test_name)} TEMPLATE {ops.quote_name(template)}")
            _commit_without_flush(cursor, ops.quote_name(test_name))
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [prefix])
    return True


def _build_template(connection: BaseDatabaseWrapper, cursor: CursorWrapper, template: str) -> None:
    """Migrate a new database the way Django's test setup does, then rename it: a build that dies half
    way leaves no template behind, only a `…_building` database the next build replaces."""
    building = template + "_building"
    quote_name = connection.ops.quote_name
    cursor.execute(f"DROP DATABASE IF EXISTS {quote_name(building)} WITH (FORCE)")
    cursor.execute(f"CREATE DATABASE {quote_name(building)}")
    _commit_without_flush(cursor, quote_name(building))
    test = connection.settings_dict["TEST"]
    saved_test_name, saved_name = test.get("NAME"), connection.settings_dict["NAME"]
    test["NAME"] = building
    try:  # keepdb: migrate the database just made, whose sessions commit without a flush
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=True)
    finally:
        connection.close()
        test["NAME"] = saved_test_name
        connection.settings_dict["NAME"] = saved_name
        settings.DATABASES[connection.alias]["NAME"] = saved_name
    cursor.execute(f"ALTER DATABASE {quote_name(building)} RENAME TO {quote_name(template)}")


def _commit_without_flush(cursor: CursorWrapper, quoted_name: str) -> None:
    """Every later session on the database commits without waiting for the WAL flush (a copy does not
    inherit the setting: it belongs to the database, not to its contents)."""
    cursor.execute(f"ALTER DATABASE {quoted_name} SET synchronous_commit TO off")


def _migrations_fingerprint() -> str:
    """A hash of what migrating runs: each installed app's migration files (the project's apps: all their
    code, which data migrations import) and Django's version."""
    from django.apps import apps

    digest = hashlib.sha256(django.get_version().encode())
    files: dict[str, Path] = {}
    for app in apps.get_app_configs():
        folder = Path(app.path)
        ours = folder.parent == REPO_ROOT
        for path in folder.rglob("*.py") if ours else (folder / "migrations").glob("*.py"):
            files[f"{app.label}/{path.relative_to(folder)}"] = path
    for name, path in sorted(files.items()):
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# --- the broker ------------------------------------------------------------------------------------------


def use_broker_of_test_process(worker: str) -> None:
    """Point the settings, Celery and the environment (for the processes tests start) at this test
    process's own broker."""
    url = settings.CELERY_BROKER_URL
    if url.startswith(("amqp://", "amqps://", "pyamqp://")):
        url = _own_vhost(url, worker)
    elif url.startswith("filesystem://"):
        folder = Path(settings.BROKER_DIR) / worker
        options = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
        for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
            path = folder / Path(options[key]).name
            path.mkdir(parents=True, exist_ok=True)
            options[key] = str(path)
        settings.CELERY_BROKER_TRANSPORT_OPTIONS = options
    else:
        return
    settings.CELERY_BROKER_URL = url
    settings.REMINDERS_CALLBACK_BROKER_URL = url
    os.environ["CELERY_BROKER_URL"] = url
    os.environ["REMINDERS_CALLBACK_BROKER_URL"] = url
    from config.celery import app

    app.conf.broker_url = url
    if url.startswith("filesystem://"):
        app.conf.broker_transport_options = settings.CELERY_BROKER_TRANSPORT_OPTIONS


def _own_vhost(url: str, worker: str) -> str:
    """`<vhost>.<worker>` on the same broker, created (with the URL's user allowed everything on it) by
    rabbitmqctl, which needs to run on the broker's host as root or the rabbitmq user."""
    parts = urlsplit(url)
    base = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    vhost = f"{'root' if base == '/' else base}.test.{worker}"
    rabbitmqctl = shutil.which("rabbitmqctl")
    if rabbitmqctl is None:
        raise RuntimeError("pytest -n needs rabbitmqctl to give each test process its own RabbitMQ vhost")
    user = unquote(parts.username or "guest")
    for args in (["add_vhost", vhost], ["set_permissions", "-p", vhost, user, ".*", ".*", ".*"]):
        done = subprocess.run([rabbitmqctl, "-q", *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0 and "already exists" not in done.stderr + done.stdout:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr or done.stdout}")
    _created.append(vhost)
    return urlunsplit((parts.scheme, parts.netloc, "/" + quote(vhost, safe=""), parts.query, parts.fragment))


def drop_broker_of_test_process() -> None:
    """Delete the vhost (and every queue a test left on it)."""
    rabbitmqctl = shutil.which("rabbitmqctl")
    for vhost in _created:
        if rabbitmqctl:
            subprocess.run([rabbitmqctl, "-q", "delete_vhost", vhost], capture_output=True, timeout=60)
    _created.clear()
