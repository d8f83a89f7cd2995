"""The push gateway: consume the push queue, send each push to every enabled device of its player, ack a
message only once every device outcome is recorded.

A message carries one push or a batch of them (delivery/gateway/queue.py); every step below is per push, and
a batch's message is acked once each of its pushes is settled (recorded, dead-lettered or refused).

Per round (up to TRAININGS_GATEWAY_BATCH pushes, plus the retries now due):
1. Parse; a message that is not a push is rejected without requeue (a poison message must not loop); a
   push in a batch that is not one is logged and dropped with the batch's ack.
2. Skip what is done: a push with a push-level `PushSend` row (no device, stale, muted, given up) or whose
   every address has its `PushSend` outcome from an earlier delivery is acked without sending (redelivered
   or republished), and a device that already has a `PushSend` row for the push is not sent it again (a
   gateway killed in the middle of a player's devices resumes with the rest). A push past its `expires_at`
   (the training has started; the questionnaire has closed) is recorded `stale`; a player without an
   enabled device is recorded `no_device`.
3. Send every (push, device) concurrently, at most TRAININGS_GATEWAY_IN_FLIGHT at once, each to its
   device's provider (HTTP/2 streams on one connection for APNs).
4. Record the outcomes in one transaction: `accepted`, `token_dead` (the device is disabled with the
   reason and never tried again), `failed` (the payload was refused): those rows say the push is finished
   once its devices all have one. Then ack. The accepting devices' `last_success_at` is stamped apart,
   once a minute (delivery/gateway/stamps.py).
5. A push with a device to retry (429, 5xx, network) stays unacked in this gateway and comes back after
   a backoff that honours `Retry-After`; a throttled channel (or, when the service throttles per address,
   that address) is paused meanwhile. Once one of its devices has been sent it
   TRAININGS_GATEWAY_MAX_ATTEMPTS times (requests that went out, not rounds it waited through), or past
   TRAININGS_GATEWAY_MAX_AGE_SECONDS, it goes to the dead-letter queue (`manage.py push_dead_letters`
   lists and replays it), its remaining devices are recorded `failed`, and it is acked.
6. Credentials refused (401/403, a bad service account): `AuthFailure` is raised, nothing more is acked,
   the connection closes and RabbitMQ keeps every unacked message queued for a gateway with fixed
   credentials.

A graceful stop (SIGTERM) begins no new round, lets the open rounds' sends finish, records and acks
them, and closes the connections: nothing is sent twice. A crash (kill -9) sends again the (push, device)
pairs whose outcome was not committed yet, at most TRAININGS_GATEWAY_IN_FLIGHT of them (sender.py), with
the same `apns-id` / `Idempotency-Key` and the same collapse id, so the phone shows one notification.

Works on RabbitMQ and on kombu's filesystem broker alike (plain kombu Consumer).
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone
from kombu import Consumer, Queue
from kombu.message import Message

from common.amqp.queues import FailoverConnector, service_queue
from delivery.channels.providers import Providers, PushProvider, providers_from_settings
from delivery.devices import devices_disable
from delivery.gateway import metrics
from delivery.gateway.broker import broker_connect, broker_connection, connection_lost, consumer_qos
from delivery.gateway.dead_letters import DEAD_LETTER_SCHEMA, push_dead_lettered, push_replay_forget
from delivery.gateway.liveness import gateway_heartbeat
from delivery.gateway.queue import QueuedPush, batch_pushes, dead_letter_queue_name, queue_publisher_at
from delivery.gateway.quota import by_expiry
from delivery.gateway.records import _ACKED, Handled, Outcome, Round
from delivery.gateway.sender import AuthFailure, PushSender

__all__ = ["DEAD_LETTER_SCHEMA", "GatewayStats", "Outcome", "PushSender", "broker_connection",
           "dead_letter_queue_name", "devices_disable", "gateway_run", "push_dead_lettered", "push_handle",
           "push_queue", "push_replay_forget", "retry_delay"]  # fmt: skip

logger = logging.getLogger(__name__)

# Rounds open at once: one ending (recording, acking) while the next one's sends are in flight.
OPEN_ROUNDS = 2

# --- The consumer ---------------------------------------------------------------------------------------


def push_handle(body: Any, *, providers: Providers | PushProvider) -> Outcome:
    """One message through steps 1-4 (tests, and callers without a broker)."""
    sender = PushSender(providers if isinstance(providers, Providers) else Providers(standin=providers))
    try:
        return sender.handle([body])[0].outcome
    finally:
        sender.close()


_VALUES = {outcome: outcome.value for outcome in Outcome}


@dataclass
class GatewayStats:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        value = _VALUES[outcome]  # (an enum's `.value` is a descriptor call per push)
        self.counts[value] = self.counts.get(value, 0) + 1

    @property
    def handled(self) -> int:
        return sum(self.counts.values())


def push_queue() -> Queue:
    return service_queue(settings.TRAININGS_PUSH_QUEUE)  # of REMINDERS_QUEUE_TYPE: classic or quorum


def retry_delay(attempt: int, *, retry_after: float = 0.0) -> float:
    """Exponential backoff with jitter from TRAININGS_GATEWAY_RETRY_SECONDS, never under Retry-After."""
    base = settings.TRAININGS_GATEWAY_RETRY_SECONDS * (2 ** max(0, attempt - 1))
    return max(retry_after, min(base, 300.0) * random.uniform(0.8, 1.2))


@dataclass(eq=False)
class _Delivery:
    """One message from the queue: acked once every push it carries is settled."""

    message: Message
    unsettled: int  # its pushes not yet recorded, dead-lettered or refused
    batch: bool = False

    def settle(self, *, rejected: bool = False) -> None:
        """One of its pushes is done with; a single push refused is rejected without requeue instead."""
        if rejected and not self.batch:
            self.message.reject(requeue=False)
            return
        self.unsettled -= 1
        if self.unsettled == 0:
            self.message.ack()


@dataclass
class _Held:
    """One push of a message, from its arrival until it is settled."""

    body: Any
    delivery: _Delivery
    passes: int = 0  # rounds it was in (the backoff grows with them)
    sends: dict[int, int] = field(default_factory=dict)  # requests that went out, per device
    first_seen: float = field(default_factory=time.monotonic)
    due: float = 0.0

    @property
    def attempts(self) -> int:
        """Sends of its most tried device: what TRAININGS_GATEWAY_MAX_ATTEMPTS bounds."""
        return max(self.sends.values(), default=0)


def _tag(held: _Held) -> int:
    """AMQP's delivery tag, a number growing per channel (only used where `basic.ack multiple` is: kombu's
    virtual brokers, the file broker among them, tag with UUIDs)."""
    return int(held.delivery.message.delivery_tag or 0)


def gateway_run(
    *,
    url: str | None = None,
    providers: Providers | None = None,
    max_messages: int | None = None,
    idle_seconds: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> GatewayStats:
    """Consume until stopped, `max_messages` handled, or `idle_seconds` with nothing to do.

    Raises AuthFailure when a provider refuses our credentials (nothing more is acked).
    """
    providers = providers or providers_from_settings()
    url = url or settings.REMINDERS_CALLBACK_BROKER_URL
    sender = PushSender(providers)
    dead_letters = queue_publisher_at(url)
    stats = GatewayStats()
    inbox: list[_Held] = []
    waiting: list[_Held] = []
    batch_size = settings.TRAININGS_GATEWAY_BATCH
    multiple_ack = url.startswith(("amqp://", "amqps://", "pyamqp://"))  # kombu's virtual brokers ack one
    # Pushes per message lately (batches, or single pushes: replays, digests): the prefetch counts pushes.
    sizes: collections.deque[int] = collections.deque([settings.TRAININGS_PUSH_MESSAGE_PUSHES], maxlen=50)
    lost: list[Exception] = []  # the broker connection died under receive()

    def on_message(body: Any, message: Message) -> None:
        try:
            pushes = batch_pushes(body)
        except ValueError as exc:
            logger.error("rejecting malformed push batch: %s", exc)
            message.reject(requeue=False)
            return
        sizes.append(1 if pushes is None else len(pushes))
        if pushes is None:
            inbox.append(_Held(body, _Delivery(message, 1)))
            return
        delivery = _Delivery(message, len(pushes), batch=True)
        inbox.extend(_Held(push, delivery) for push in pushes)

    def prefetch_for() -> int:
        """Messages to take ahead: TRAININGS_GATEWAY_PREFETCH pushes in the largest messages lately (one
        gateway must not take a whole storm's batches from the others, nor starve on single pushes)."""
        return max(1, settings.TRAININGS_GATEWAY_PREFETCH // max(sizes))

    def receive(timeout: float) -> bool:
        """While a round's sends are in flight: take in the next round's messages (nothing is acked here)."""
        broker.heartbeat_check()  # a long round must not go silent: RabbitMQ would take the gateway for dead
        if len(inbox) >= batch_size:
            return False
        try:
            broker.drain_events(timeout=timeout)
        except TimeoutError:
            return False
        except Exception as exc:
            if not connection_lost(exc, broker):
                raise
            lost.append(exc)  # raised by the loop once the round ended (its sends are recorded)
            return False
        return True

    def settle(held: _Held, result: Handled) -> None:
        if result.outcome == Outcome.REJECTED:
            held.delivery.settle(rejected=True)
        elif result.outcome == Outcome.RETRY:
            held.sends = dict(result.sends)
            age = time.monotonic() - held.first_seen
            if held.attempts >= settings.TRAININGS_GATEWAY_MAX_ATTEMPTS or (
                age >= settings.TRAININGS_GATEWAY_MAX_AGE_SECONDS
            ):
                _dead_letter(held, result)
                return
            held.due = time.monotonic() + retry_delay(held.passes, retry_after=result.retry_after)
            waiting.append(held)
        else:
            held.delivery.settle()
        stats.add(result.outcome)

    def _dead_letter(held: _Held, result: Handled) -> None:
        assert result.push is not None
        document = {"schema": DEAD_LETTER_SCHEMA, "push": held.body, "error": result.error,
                    "attempts": held.attempts, "dead_at": timezone.now().isoformat()}  # fmt: skip
        refused = dead_letters.deliver(
            [QueuedPush(result.push.idempotency_key, "push-gateway", timezone.now(), held.attempts,
                         dead_letter_queue_name(), document)]
        )  # fmt: skip
        if refused:  # the dead-letter queue did not take it: keep it here and try again later
            logger.error("dead-letter queue refused push %s: %s", result.push.idempotency_key,
                         next(iter(refused.values())))  # fmt: skip
            held.due = time.monotonic() + settings.TRAININGS_GATEWAY_RETRY_SECONDS
            waiting.append(held)
            stats.add(Outcome.RETRY)
            return
        push_dead_lettered(push=result.push, error=result.error, sends=held.sends)
        logger.error("push %s dead-lettered after %d attempts: %s", result.push.idempotency_key,
                     held.attempts, result.error)  # fmt: skip
        held.delivery.settle()
        stats.add(Outcome.DEAD_LETTERED)

    connector = FailoverConnector(broker_connection)
    idle_since = time.monotonic()
    rounds: collections.deque[tuple[list[_Held], Round]] = collections.deque()
    taken = 0  # messages put into a round (a round is not begun past max_messages)
    stopping = False
    connected_before = False
    try:
        while True:
            answered = broker_connect(connector, url, first=not connected_before, should_stop=should_stop)
            if answered is None:
                break  # stopped while no broker answered
            broker = answered
            connected_before = True
            try:
                with broker:
                    consumer = Consumer(
                        broker.default_channel, queues=[push_queue()], callbacks=[on_message], accept=["json"]
                    )
                    prefetch = prefetch_for()
                    consumer_qos(consumer, prefetch, started=False)
                    with consumer:
                        while True:
                            broker.heartbeat_check()  # a beat when due; raises when the server stopped
                            metrics.gateway_alive()
                            gateway_heartbeat()  # a write every few seconds at most: the status page's
                            sender.stamps.due()  # the devices' `last_success_at`, once a minute
                            if not stopping and should_stop():
                                # Graceful: the open rounds finish, are recorded and acked; the rest
                                # (received, not begun, or waiting for a retry) goes back unacked.
                                stopping = True
                                logger.info("push gateway stopping: finishing %d open round(s)", len(rounds))
                            if stopping and not rounds:
                                break
                            if max_messages is not None and stats.handled >= max_messages and not rounds:
                                break
                            now = time.monotonic()
                            next_due = min((h.due for h in waiting), default=now + 0.5)
                            timeout = 0.5 if not (inbox or rounds) else 0.005
                            timeout = max(0.0, min(timeout, next_due - now))
                            while not stopping and len(inbox) < batch_size:
                                try:
                                    broker.drain_events(timeout=max(timeout, 0.001))
                                except TimeoutError:
                                    break
                                timeout = 0.002  # keep filling the batch while messages arrive back to back
                            if prefetch_for() != prefetch:
                                prefetch = prefetch_for()
                                consumer_qos(consumer, prefetch, started=True)
                            now = time.monotonic()
                            if (
                                not stopping
                                and len(rounds) < OPEN_ROUNDS
                                and (max_messages is None or taken < max_messages)
                            ):
                                due = [h for h in waiting if h.due <= now]
                                waiting[:] = [h for h in waiting if h.due > now]
                                room = (
                                    batch_size
                                    if max_messages is None
                                    else min(batch_size, max_messages - taken)
                                )
                                inbox.sort(key=lambda h: by_expiry(h.body))  # nearest expiry first
                                batch, inbox[:] = [*due, *inbox[:room]], inbox[room:]
                                if batch:
                                    idle_since = now
                                    if (
                                        not rounds and not connection.in_atomic_block
                                    ):  # (a test's transaction)
                                        close_old_connections()  # a long-lived consumer keeps no dead one
                                    for held in batch:
                                        held.passes += 1
                                    taken += len(batch)
                                    sends = [h.sends for h in batch]
                                    rounds.append((batch, sender.begin([h.body for h in batch], sends=sends)))
                            if not rounds:
                                if (
                                    not waiting
                                    and idle_seconds is not None
                                    and now - idle_since >= idle_seconds
                                ):
                                    break
                                continue
                            if (
                                not stopping
                                and len(rounds) < OPEN_ROUNDS
                                and not rounds[0][1].finished.is_set()
                                and not inbox
                            ):
                                sender.record_open()
                                continue  # keep receiving: the next round begins while this one sends
                            batch, round_ = rounds[0]
                            # The oldest round ends once its sends are answered (the next one sends
                            # meanwhile).
                            results = sender.end(round_, meanwhile=None if stopping else receive)
                            rounds.popleft()
                            if lost:
                                raise lost[0]  # receive() saw the connection die (the round is recorded)
                            metrics.pushes_handled(
                                (held.body, result.outcome)
                                for held, result in zip(batch, results, strict=True)
                            )
                            if multiple_ack and all(r.outcome in _ACKED for r in results):
                                # Not begun: the inbox (in expiry order; a batch split across rounds
                                # leaves its tag there).
                                older_unacked = [*waiting, *(h for b, _ in rounds for h in b), *inbox]
                                newest = max(batch, key=_tag)
                                if all(_tag(h) > _tag(newest) for h in older_unacked):
                                    # Every message up to the batch's newest is done (nothing older or of
                                    # the same message is held for a retry, in the open round or not
                                    # begun): one `basic.ack multiple`.
                                    newest.delivery.message.ack(multiple=True)
                                    for result in results:
                                        stats.add(result.outcome)
                                    continue
                            for held, result in zip(batch, results, strict=True):
                                settle(held, result)
                break  # stopped, max_messages handled or idle
            except Exception as exc:
                if not connection_lost(exc, broker):
                    raise
                # The node went away: the sends in flight are answered and recorded, none is begun (the
                # unacked messages are another gateway's now); here again, recorded pairs are skipped.
                logger.warning("push gateway: broker connection lost (%r); reconnecting", exc)
                lost.clear()
                sender.end_unsent([round_ for _, round_ in rounds])
                rounds.clear()
                inbox.clear()
                waiting.clear()
                connector.next()
    except AuthFailure as exc:
        logger.critical(
            "push provider refused our credentials (%s): the gateway stops; every unacked push stays queued "
            "until an operator fixes the credentials", exc,
        )  # fmt: skip
        raise
    finally:
        sender.close()
        dead_letters.close()
    return stats
