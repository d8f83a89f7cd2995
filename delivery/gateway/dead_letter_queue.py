"""Reading and replaying the push dead-letter queue (`<TRAININGS_PUSH_QUEUE>.dead`), for the command
(`manage.py push_dead_letters`) and the admin's dead-letter page.

Listing reads each message and hands it back unacknowledged (nothing changes). Replaying forgets the
push's `failed` outcomes (so its devices are tried again; accepted ones are not resent), republishes it to
TRAININGS_PUSH_QUEUE with a confirmed publish, and only then removes it from the dead-letter queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from common.amqp.queues import FailoverConnector, queue_arguments
from delivery.gateway.consumer import (
    DEAD_LETTER_SCHEMA,
    broker_connection,
    dead_letter_queue_name,
    push_replay_forget,
)
from delivery.gateway.queue import QueuedPush, queue_publisher_at


class ReplayRefused(Exception):
    """The push queue refused a republished push; it stays dead-lettered."""


@dataclass(frozen=True)
class DeadLetter:
    key: str
    player: Any
    training: str
    attempts: Any
    dead_at: str
    error: str
    document: dict[str, Any] = field(repr=False)


@dataclass
class Pass:
    """What one pass over the queue saw and did."""

    letters: list[DeadLetter] = field(default_factory=list)
    skipped: list[bytes] = field(default_factory=list)  # bodies that are not dead pushes
    replayed: int = 0

    @property
    def seen(self) -> int:
        return len(self.letters) + len(self.skipped)


def dead_letters_pass(
    *,
    limit: int,
    replay: Callable[[DeadLetter], bool] | None = None,
    on_letter: Callable[[DeadLetter], None] | None = None,
) -> Pass:
    """Read up to `limit` dead letters; replay those `replay` picks (none without it). What is not
    replayed goes back to the queue when the channel closes."""
    name = dead_letter_queue_name()
    url = settings.REMINDERS_CALLBACK_BROKER_URL
    publisher = queue_publisher_at(url)
    result = Pass()
    try:
        with FailoverConnector(broker_connection).connect(url) as broker:
            channel: Any = broker.channel()  # an amqp/virtual channel: basic_get, basic_ack
            channel.queue_declare(queue=name, durable=True, auto_delete=False, arguments=queue_arguments())
            while result.seen < limit:
                message = channel.basic_get(queue=name, no_ack=False)
                if message is None:
                    break
                letter = _letter(message.body)
                if letter is None:
                    result.skipped.append(bytes(message.body[:200]))
                    continue
                result.letters.append(letter)
                if on_letter is not None:
                    on_letter(letter)
                if replay is None or not replay(letter):
                    continue
                push_replay_forget(key=letter.key)
                refused = publisher.deliver(
                    [QueuedPush(letter.key, "push-dead-letters", timezone.now(), 1,
                                 settings.TRAININGS_PUSH_QUEUE, letter.document["push"])]
                )  # fmt: skip
                if refused:
                    reason = next(iter(refused.values()))
                    raise ReplayRefused(
                        f"the push queue refused {letter.key}: {reason}; it stays dead-lettered"
                    )
                channel.basic_ack(message.delivery_tag)
                result.replayed += 1
            channel.close()  # unacked (listed) messages go back to the dead-letter queue
    finally:
        publisher.close()
    return result


def dead_letters_replay(*, keys: Collection[str] | None, limit: int) -> Pass:
    """Replay the dead letters with these keys (every one read, with None)."""
    return dead_letters_pass(limit=limit, replay=lambda letter: keys is None or letter.key in keys)


def _letter(body: Any) -> DeadLetter | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    push = document.get("push") if isinstance(document, dict) else None
    if not isinstance(push, dict) or document.get("schema") != DEAD_LETTER_SCHEMA:
        return None
    return DeadLetter(
        key=str(push.get("idempotency_key")),
        player=push.get("player"),
        training=str(push.get("training") or ""),
        attempts=document.get("attempts"),
        dead_at=str(document.get("dead_at") or ""),
        error=str(document.get("error") or ""),
        document=document,
    )
