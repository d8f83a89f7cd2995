"""Shared fixtures. Tests that need the real PostgreSQL or RabbitMQ carry a marker; without the service
they skip on a developer's machine and fail in CI (CI=true), so CI can never pass by skipping them."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import amqp
import pytest
from django.conf import settings
from django.test import Client
from kombu import Connection
from rest_framework.test import APIClient

from common.compact_json import json_compact
from delivery.gateway.queue import batch_pushes, push_queue_publisher
from reminders.engine.connection_thread import marker
from reminders.engine.lookahead import carrier
from reminders.engine.wakeup import listener
from reminders.transports import get_transport
from tests import machine, services
from tests.clients import api_as, logged_in
from tests.factories import UserFactory

IN_CI = os.environ.get("CI", "").lower() == "true"


_MACHINE_AT_START = pytest.StashKey[tuple[machine.CpuTimes | None, float]]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`pytest -n 2`) each test process gets a RabbitMQ vhost of its own, as
    pytest-django gives it a database of its own (`test_<name>_gw0`): Celery's kick queue, the push queue
    and the engine's fixed queue names cannot then be consumed by another process's workers. The
    controller (or the one process) reads the machine's counters and speed for the summary."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        services.use_broker_of_test_process(worker)
    else:
        config.stash[_MACHINE_AT_START] = (machine.CpuTimes.now(), machine.loop_nanoseconds())


# Modules whose tests run for tens of seconds each (real processes, a browser, schemathesis's hundreds of
# requests an operation): run first, so that under pytest-xdist the short tests fill in around them, instead
# of one of them starting last while the other test process sits idle. Whole modules move, in their order,
# and within the groups pytest-django then sorts them into (as Django's runner: plain database tests,
# transactional ones, the rest), since its sort is stable and runs after this one.
LONG_FIRST = (
    "tests/faults/",
    "tests/trainings_faults/test_push_gateway_stop.py",
    "tests/trainings_faults/test_push_gateway_crash.py",
    "tests/trainings_faults/test_gateway_crash.py",
    "tests/trainings_faults/test_worker_crash.py",
    "tests/security/test_schemathesis.py",
    "tests/security/test_schemathesis_stateful.py",
    "tests/browser/",
    "tests/ops/test_run_all_restarts.py",
    "tests/ops/test_procfile.py",
    "tests/ops/test_processes.py",
    "tests/ops/test_first_deploy.py",
    "tests/ops/test_limits_across_workers.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def long_first(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return 0 if path.startswith(LONG_FIRST) else 1

    items.sort(key=long_first)  # stable: every module keeps its tests together and in order


def pytest_unconfigure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        services.drop_broker_of_test_process()


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's setup, with each PostgreSQL test database copied from a migrated template
    (tests/services.py) instead of migrated in every test process; Django's setup then keeps the copy
    and its migrate finds nothing left to apply. The database is dropped at the end as before.
    (pytest-django's --reuse-db and --nomigrations are not used here and not honoured.)"""
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _get_databases_for_setup

    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        copied = services.test_databases_from_template(aliases)
        databases = setup_databases(
            verbosity=verbosity,
            interactive=False,
            aliases=aliases,
            serialized_aliases=serialized_aliases,
            keepdb=copied,
        )
    yield
    with django_db_blocker.unblock():
        try:
            teardown_databases(databases, verbosity=verbosity)
        except Exception as exc:
            request.node.warn(pytest.PytestWarning(f"the test databases were not dropped: {exc!r}"))


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
    settings.REMINDERS_SCAN_SECONDS = 0
    settings.REMINDERS_CALLBACK_BROKER_URL = settings.CELERY_BROKER_URL
    # Who subscribes to events is read afresh: a test's subscriptions are gone with its transaction.
    settings.TRAININGS_WEBHOOK_CACHE_SECONDS = 0


@pytest.fixture(scope="session", autouse=True)
def _fast_passwords(django_test_environment: None) -> Iterator[None]:
    """The factories give every user a password: Django's PBKDF2 (1,000,000 iterations) would cost a
    quarter of a second per user. Tests log in with force_login, so no hash strength is under test.
    For the whole session, so that data a module builds once (tests/data_once.py) gets it too."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _api_throttling_out_of_the_way(settings: pytest.FixtureRequest) -> None:
    """The fuzzers send hundreds of requests a second from one token and address; API throttling has its
    own tests (tests/ops/test_throttling.py), which set the rates they test."""
    settings.API_THROTTLE_RATES = {"token": "1000000/s", "ip": "1000000/s"}
    settings.API_THROTTLE_ANSWER_LINK_RATE = "1000000/s"


@pytest.fixture(autouse=True)
def _fresh_transports() -> Iterator[None]:
    """Each test gets new transport instances and push publisher (and so new broker connections)."""
    get_transport.cache_clear()
    push_queue_publisher.cache_clear()
    yield
    for kind in ("rabbitmq",):
        transport = get_transport(kind)
        close = getattr(transport, "close", None)
        if close:
            close()
    get_transport.cache_clear()
    push_queue_publisher().close()
    push_queue_publisher.cache_clear()


@pytest.fixture(autouse=True)
def _listener_closed() -> Iterator[None]:
    """A scan that ran in this process left its LISTEN connection open (reminders/engine/wakeup.py):
    closed, so
    the test database can be dropped at the end."""
    yield
    listener().close()


@pytest.fixture(autouse=True)
def _engine_threads_stopped() -> Iterator[None]:
    """A look-ahead scan's carrier and marker threads (reminders/engine/lookahead.py,
    reminders/engine/connection_thread.py)
    finish their work and close their connections after each test, as a worker's do when it stops."""
    yield
    assert carrier().stop(timeout=10.0), "the carrier did not finish what it was handed"
    assert marker().stop(timeout=10.0), "the marker did not finish what it was handed"


@pytest.fixture
def user(db: None):
    """An integration caller of the scheduler API, granted every queue but the service's own."""
    return UserFactory(queues=["*"])


@pytest.fixture
def api(user) -> APIClient:
    return api_as(user)


@pytest.fixture
def coach(db: None):
    """The coach of the trainings tests' `team` (each package's conftest builds its own team)."""
    return UserFactory(username="coach-a")


@pytest.fixture
def operator(db: None) -> Client:
    """The admin, logged in as a superuser granted every queue but the service's own."""
    return logged_in(UserFactory(is_staff=True, is_superuser=True, queues=["*"]))


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A unique queue name; the queue is deleted afterwards if the test created it on RabbitMQ."""
    name = f"test.reminders.{uuid.uuid4().hex[:12]}"
    yield name
    delete_queue(name)


def delete_queue(name: str) -> None:
    """Delete a test's queue from RabbitMQ, if the broker is RabbitMQ and the queue was ever declared."""
    url = settings.CELERY_BROKER_URL
    if url.startswith(("amqp://", "amqps://")):
        try:
            with Connection(url, connect_timeout=3) as conn:
                conn.default_channel.queue_delete(name)
        except Exception:  # noqa: S110 - cleanup of a queue that may never have been created
            pass


def drain_queue(
    name: str, *, expect: int | None = None, timeout: float = 5.0, as_sent: bool = False
) -> list[amqp.Message]:
    """Consume every message now on the queue (acking them) with a real AMQP consumer; a push batch
    (delivery/gateway/queue.py) comes back as its pushes (`pushes_of`), unless `as_sent`: tests count and read
    pushes.

    Returns once `expect` messages arrived (or, without `expect`, once the queue stays empty for a short
    moment), or when `timeout` runs out.
    """
    import time

    messages: list[amqp.Message] = []
    deadline = time.monotonic() + timeout
    with Connection(settings.CELERY_BROKER_URL, connect_timeout=3) as conn:
        while True:
            try:
                conn.channel().queue_declare(name, passive=True)
                break
            except amqp.exceptions.NotFound:  # not declared (yet): nothing on it
                if expect is None or time.monotonic() >= deadline:
                    return messages
                time.sleep(0.1)
        channel = conn.channel()
        channel.basic_qos(0, 1000, False)
        channel.basic_consume(
            name, callback=lambda m: messages.extend([m] if as_sent else pushes_of(m)), no_ack=True
        )
        idle = 0.3 if expect is None else timeout
        while time.monotonic() < deadline and (expect is None or len(messages) < expect):
            try:
                conn.drain_events(timeout=min(idle, max(deadline - time.monotonic(), 0.01)))
            except TimeoutError:
                if expect is None:
                    break
    return messages


def pushes_of(message: amqp.Message) -> list[amqp.Message]:
    """A push batch as the messages its pushes would have been on their own (each with the batch's
    headers); any other message as it is."""
    try:
        pushes = batch_pushes(json.loads(message.body))
    except ValueError:
        return [message]
    if pushes is None:
        return [message]
    properties = {k: v for k, v in message.properties.items() if k != "message_id"}
    return [amqp.Message(json_compact(p), message_id=p["idempotency_key"], **properties) for p in pushes]


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests import fault_table

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist test process: its rows go to the controller, which writes
        workeroutput["fault_rows"] = [dataclasses.astuple(row) for row in fault_table.RESULTS]
        return
    if fault_table.RESULTS:
        fault_table.RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
        fault_table.RESULTS_PATH.write_text(fault_table.results_table())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: the fault rows a test process recorded."""
    from tests import fault_table

    fault_table.RESULTS.extend(fault_table.Row(*row) for row in node.workeroutput.get("fault_rows", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests import fault_table

    start = terminalreporter.config.stash.get(_MACHINE_AT_START, None)
    if start is not None:
        terminalreporter.write_line(machine.summary(*start))

    if fault_table.RESULTS:
        terminalreporter.section("fault suite")
        terminalreporter.write(fault_table.results_table())
        terminalreporter.write_line(
            f"(also written to {fault_table.RESULTS_PATH.relative_to(fault_table.REPO_ROOT)})"
        )
