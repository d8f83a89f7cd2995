"""Shared fixtures. Tests that need the real PostgreSQL or RabbitMQ carry a marker; without the service
they skip on a developer's machine and fail in CI (CI=true), so CI can never pass by skipping them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings
from kombu import Connection
from rest_framework.test import APIClient

from tests.factories import UserFactory

IN_CI = os.environ.get("CI", "").lower() == "true"


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI must run this test against the real service)")
    pytest.skip(reason)


def _rabbitmq_reachable() -> bool:
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("amqp://", "amqps://", "pyamqp://")):
        return False
    try:
        with Connection(url, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


@pytest.fixture(autouse=True)
def _require_services(request: pytest.FixtureRequest) -> None:
    postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    if request.node.get_closest_marker("postgres") and not postgres:
        _missing("needs PostgreSQL: set DATABASE_URL=postgres://...")
    if request.node.get_closest_marker("rabbitmq") and not _rabbitmq_reachable():
        _missing("needs RabbitMQ: set CELERY_BROKER_URL=amqp://... to a running broker")


@pytest.fixture(autouse=True)
def _fast_engine(settings: pytest.FixtureRequest) -> None:
    """Scans in tests run one batch at a time and never sleep."""
    settings.REMINDERS_SCAN_SECONDS = 0  # type: ignore[attr-defined]
    settings.REMINDERS_CALLBACK_BROKER_URL = settings.CELERY_BROKER_URL  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _fresh_transports() -> Iterator[None]:
    """Each test gets new transport instances (and so a new broker connection)."""
    from reminders.transports import get_transport

    get_transport.cache_clear()
    yield
    for kind in ("rabbitmq",):
        transport = get_transport(kind)
        close = getattr(transport, "close", None)
        if close:
            close()
    get_transport.cache_clear()


@pytest.fixture
def user(db: None):  # type: ignore[no-untyped-def]
    return UserFactory()


@pytest.fixture
def api(user) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A unique queue name; the queue is deleted afterwards if the test created it on RabbitMQ."""
    name = f"test.reminders.{uuid.uuid4().hex[:12]}"
    yield name
    url = settings.CELERY_BROKER_URL
    if url.startswith(("amqp://", "amqps://")):
        try:
            with Connection(url, connect_timeout=3) as conn:
                conn.default_channel.queue_delete(name)
        except Exception:  # noqa: S110 - cleanup of a queue that may never have been created
            pass


def drain_queue(name: str, *, expect: int | None = None, timeout: float = 5.0) -> list:  # type: ignore[type-arg]
    """Read every message now on the queue (acking them) with a real AMQP consumer."""
    import time

    messages: list = []  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    with Connection(settings.CELERY_BROKER_URL, connect_timeout=3) as conn:
        channel = conn.default_channel
        while time.monotonic() < deadline:
            message = channel.basic_get(name, no_ack=False)
            if message is None:
                if expect is None or len(messages) >= expect:
                    break
                time.sleep(0.05)
                continue
            channel.basic_ack(message.delivery_tag)
            messages.append(message)
    return messages
