from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from trainings.push.gateway import gateway_run
from trainings.push.providers import get_provider


class Command(BaseCommand):
    help = "Consume the push queue (TRAININGS_PUSH_QUEUE) and hand each push to TRAININGS_PUSH_PROVIDER."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--max-messages", type=int, default=None, help="Stop after this many messages.")
        parser.add_argument("--idle-seconds", type=float, default=None, help="Stop after this long idle.")

    def handle(self, *args: Any, **options: Any) -> None:
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        provider = get_provider()
        self.stdout.write(f"push gateway: provider={provider.name}; Ctrl-C to stop")
        stats = gateway_run(
            provider=provider,
            max_messages=options["max_messages"],
            idle_seconds=options["idle_seconds"],
            should_stop=lambda: stopping,
        )
        self.stdout.write(f"push gateway stopped: {stats.counts}")
