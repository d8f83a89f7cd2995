"""A broker connection that closed between batches is not the endpoint's failure (issue 19, defect 8b).

The transport keeps its connection between scans. When RabbitMQ closed it meanwhile (a restart, a
failover, an operator), the next publish is refused; it is published again at once on a new connection,
once, instead of waiting out the retry backoff (5 s, then 10 s ...) as a failed delivery.
"""

from __future__ import annotations

import select
import shutil
import subprocess
from urllib.parse import unquote, urlsplit

import pytest
from django.conf import settings
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from reminders.transports import get_transport
from reminders.transports.base import Delivery
from reminders.transports.rabbitmq import RabbitMQTransport
from tests.conftest import IN_CI, drain_queue
from tests.factories import JobFactory, OccurrenceFactory
from tests.faults.harness import TcpProxy, broker_address, broker_url_via

pytestmark = [pytest.mark.rabbitmq, pytest.mark.django_db]


def _close_from_the_broker(transport: RabbitMQTransport) -> None:
    """`rabbitmqctl close_connection` on this transport's connection only (found by its local port)."""
    rabbitmqctl = shutil.which("rabbitmqctl")
    if rabbitmqctl is None:
        if IN_CI:
            pytest.fail("rabbitmqctl is needed to close a connection from the broker's side")
        pytest.skip("rabbitmqctl is not installed")
    connection = transport.publisher._connection
    assert connection is not None
    host, port = connection.connection.sock.getsockname()[:2]
    vhost = unquote(urlsplit(settings.CELERY_BROKER_URL).path[1:]) or "/"

    def pids() -> dict[str, str]:
        """Connection name ("host:port -> host:port") -> its Erlang pid, in this test's vhost."""
        listed = subprocess.run(
            [rabbitmqctl, "-q", "list_connections", "-p", vhost, "name", "pid"],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = (line.split("\t") for line in listed.stdout.splitlines())
        return {row[0].strip(): row[1].strip() for row in rows if len(row) == 2}

    [pid] = [pid for name, pid in pids().items() if name.startswith(f"{host}:{port} ")]
    subprocess.run([rabbitmqctl, "-q", "close_connection", pid, "closed by a test"], check=True)
    # The broker's connection.close is on our socket (the broker then waits for our close-ok).
    readable, _, _ = select.select([connection.connection.sock], [], [], 10)
    assert readable, "the broker did not close the connection"


def test_a_publish_refused_by_a_connection_the_broker_closed_goes_out_at_once_on_a_new_one(
    queue_name: str,
) -> None:
    job = JobFactory(target=queue_name)
    OccurrenceFactory(job=job)
    assert occurrences_dispatch_batch().delivered == 1  # the transport now holds an open connection
    assert len(drain_queue(queue_name, expect=1)) == 1
    transport = get_transport("rabbitmq")
    assert isinstance(transport, RabbitMQTransport)
    _close_from_the_broker(transport)
    occurrence = OccurrenceFactory(job=job)

    result = occurrences_dispatch_batch()

    assert (result.delivered, result.retried, result.errors) == (1, 0, {})
    occurrence.refresh_from_db()
    assert (occurrence.status, occurrence.attempts, occurrence.last_error) == (
        OccurrenceStatus.DELIVERED,
        1,
        "",
    )
    [message] = drain_queue(queue_name, expect=1)
    assert message.properties["message_id"] == occurrence.idempotency_key


def test_a_connection_dropped_under_a_publish_is_replaced_once_and_the_batch_goes_out(
    queue_name: str,
) -> None:
    """The same through a TCP proxy that drops the socket: whether the publish or the wait for commit-ok
    notices, the batch goes out on a new connection and comes back without an error."""
    proxy = TcpProxy(broker_address())
    transport = RabbitMQTransport(url=broker_url_via(proxy.port))
    try:
        first = _delivery(1, queue_name)
        assert transport.deliver([first]) == {}
        proxy.cut()
        proxy.restore()  # new connections go through again; the transport's one is gone

        second = _delivery(2, queue_name)
        assert transport.deliver([second]) == {}
    finally:
        transport.close()
        proxy.close()
    ids = {m.properties["message_id"] for m in drain_queue(queue_name, timeout=1.0)}
    assert ids == {first.idempotency_key, second.idempotency_key}


def test_a_broker_that_stays_away_is_still_the_endpoints_failure(queue_name: str) -> None:
    """Only one immediate retry: with the broker unreachable the batch fails and backs off as before."""
    proxy = TcpProxy(broker_address())
    transport = RabbitMQTransport(url=broker_url_via(proxy.port))
    try:
        assert transport.deliver([_delivery(1, queue_name)]) == {}
        proxy.cut()  # and not restored

        errors = transport.deliver([_delivery(2, queue_name)])
    finally:
        transport.close()
        proxy.close()
    assert list(errors) == [2]
    assert "broker error" in str(errors[2]) and not errors[2].permanent
    assert Occurrence.objects.count() == 0  # nothing here touches the database


def _delivery(number: int, queue: str) -> Delivery:
    return Delivery(
        occurrence_id=number,
        idempotency_key=f"reconnect-{queue}-{number}",
        job_key="reconnect",
        fire_at=timezone.now(),
        attempt=1,
        target=queue,
        payload={"n": number},
    )
