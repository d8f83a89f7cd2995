"""Per test process services under pytest-xdist: a RabbitMQ vhost (or a filesystem broker folder) of its
own, switched to before any test talks to the broker. Its database comes from pytest-django, which suffixes
the test database's name with the xdist worker id."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from django.conf import settings

_created: list[str] = []


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
