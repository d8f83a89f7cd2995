"""`manage.py queues_to_quorum`: turn the service's classic queues into quorum queues, keeping every message.

Run with every process stopped and REMINDERS_QUEUE_TYPE=quorum set for their next start
(docs/operations/cluster.md, "Moving classic queues to quorum queues"). Without `--queue`, the service's own
queues: Celery's task queue, the push queue and its dead letters; `--queue NAME` adds one (a `rabbitmq`
callback queue the engine publishes to, which its consumers then declare as a quorum queue too).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.amqp.quorum_move import connect_first, queue_to_quorum
from reminders.transports.queue_access import service_queues


class Command(BaseCommand):
    help = (
        "Move the service's classic RabbitMQ queues (and --queue ones) into quorum queues of the same name."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queue", action="append", default=[], help="Also move this queue (repeatable).")
        parser.add_argument("--only", action="store_true", help="Move only the --queue ones.")

    def handle(self, *args: Any, **options: Any) -> None:
        # Celery's queues live on its broker; the apps' queues and callback queues on the callback broker.
        celery = {settings.CELERY_TASK_DEFAULT_QUEUE}
        names = [] if options["only"] else list(service_queues())
        names += [name for name in options["queue"] if name not in names]
        for name in names:
            url = settings.CELERY_BROKER_URL if name in celery else settings.REMINDERS_CALLBACK_BROKER_URL
            if not url.startswith(("amqp://", "amqps://", "pyamqp://")):
                raise CommandError(
                    f"{name}: quorum queues are RabbitMQ's; its broker is {url.split(':')[0]}://"
                )
            moved = queue_to_quorum(lambda url=url: connect_first(url), name)  # type: ignore[misc]
            if moved.was == "missing" and not moved.messages:
                self.stdout.write(f"{name}: not declared yet (it will be declared as a quorum queue)")
            elif moved.was == "quorum" and not moved.messages:
                self.stdout.write(f"{name}: already a quorum queue")
            else:
                self.stdout.write(f"{name}: now a quorum queue, {moved.messages} messages moved")
