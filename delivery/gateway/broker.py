"""The push gateway's broker connection: one of the URL's brokers (`;` separates a cluster's nodes), the
consumer's prefetch on classic and quorum queues, and what counts as the connection lost (a node gone),
after which the gateway reconnects to another node instead of exiting (delivery/gateway/consumer.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from kombu import Connection, Consumer

from common.amqp.queues import FailoverConnector, queue_type
from delivery.gateway.sender import AuthFailure

logger = logging.getLogger("delivery.gateway.consumer")


def broker_connection(url: str) -> Connection:
    """A kombu connection to the push broker, with the file broker's folders when it is one (without them
    kombu looks for `data_in` in the working directory)."""
    if url.startswith("filesystem"):
        return Connection(
            url, transport_options=dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}))
        )
    return Connection(url, heartbeat=settings.TRAININGS_GATEWAY_HEARTBEAT_SECONDS)


def broker_connect(
    connector: FailoverConnector, url: str, *, first: bool, should_stop: Callable[[], bool]
) -> Connection | None:
    """A connection to one of the URL's brokers. At start: a few rounds over them, then the error (as
    before failover); after a lost connection: until one answers or the gateway is stopped (None)."""
    rounds = 0
    while True:
        try:
            return connector.connect(url)
        except Exception as exc:
            rounds += 1
            if first and rounds > 3:
                raise
            logger.warning("push gateway: no broker answered (%r); trying again", exc)
        if not first and should_stop():
            return None
        time.sleep(2.0 if first else 1.0)


def consumer_qos(consumer: Consumer, prefetch: int, *, started: bool) -> None:
    """The prefetch: the channel's (global) on classic queues, where a change reaches the running consumer;
    quorum queues refuse a global limit, so there it is the consumer's, and a change re-subscribes it (the
    messages it holds stay unacked on the channel)."""
    if queue_type() != "quorum":
        consumer.qos(prefetch_count=prefetch, apply_global=True)
        return
    if started:
        consumer.cancel()
    consumer.qos(prefetch_count=prefetch, apply_global=False)
    if started:
        consumer.consume()


def connection_lost(exc: BaseException, broker: Connection) -> bool:
    """The broker connection died (a node stopped, the network): not a refusal of ours to fix."""
    return isinstance(exc, (*broker.connection_errors, OSError)) and not isinstance(exc, AuthFailure)
