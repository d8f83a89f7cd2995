"""`manage.py push_dead_letters [--replay] [--limit N]`: list the pushes the gateway gave up on, or put them
back on the push queue.

Listing reads each message and hands it back to the queue unacknowledged (nothing changes). Replaying
forgets the push's `failed` outcomes (so its devices are tried again; accepted ones are not resent),
republishes it to TRAININGS_PUSH_QUEUE with a confirmed publish, and only then removes it from the
dead-letter queue.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from reminders.api import Delivery, QueuePublisher
from trainings.push.gateway import (
    DEAD_LETTER_SCHEMA,
    broker_connection,
    dead_letter_queue_name,
    push_replay_forget,
)


class Command(BaseCommand):
    help = "List (default) or replay the push gateway's dead-letter queue (<TRAININGS_PUSH_QUEUE>.dead)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--replay", action="store_true", help="Republish them to the push queue.")
        parser.add_argument("--limit", type=int, default=1000, help="At most this many messages.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        name = dead_letter_queue_name()
        url = settings.REMINDERS_CALLBACK_BROKER_URL
        publisher = QueuePublisher(url)
        seen = replayed = 0
        try:
            with broker_connection(url) as broker:
                channel: Any = broker.channel()  # an amqp/virtual channel: basic_get, basic_ack
                channel.queue_declare(queue=name, durable=True, auto_delete=False)
                while seen < options["limit"]:
                    message = channel.basic_get(queue=name, no_ack=False)
                    if message is None:
                        break
                    seen += 1
                    document = json.loads(message.body)
                    push = document.get("push") if isinstance(document, dict) else None
                    if not isinstance(push, dict) or document.get("schema") != DEAD_LETTER_SCHEMA:
                        self.stderr.write(
                            f"skipping a message that is not a dead push: {message.body[:200]!r}"
                        )
                        continue
                    key = str(push.get("idempotency_key"))
                    self.stdout.write(
                        f"{key}  player={push.get('player')}  attempts={document.get('attempts')}  "
                        f"dead_at={document.get('dead_at')}  error={document.get('error')}"
                    )
                    if not options["replay"]:
                        continue
                    push_replay_forget(key=key)
                    refused = publisher.deliver(
                        [
                            Delivery(
                                0,
                                key,
                                "push-dead-letters",
                                timezone.now(),
                                1,
                                settings.TRAININGS_PUSH_QUEUE,
                                push,
                            )
                        ]
                    )
                    if refused:
                        raise CommandError(
                            f"the push queue refused {key}: {refused[0]}; it stays dead-lettered"
                        )
                    channel.basic_ack(message.delivery_tag)
                    replayed += 1
                channel.close()  # unacked (listed) messages go back to the dead-letter queue
        finally:
            publisher.close()
        verb = f"replayed {replayed} of" if options["replay"] else "listed"
        self.stdout.write(f"{verb} {seen} dead-lettered push(es) on {name}")
