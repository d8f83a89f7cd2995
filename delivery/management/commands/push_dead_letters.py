"""`manage.py push_dead_letters [--replay] [--limit N]`: list the pushes the gateway gave up on, or put them
back on the push queue (the admin's dead-letter page does the same; delivery/gateway/dead_letter_queue.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from delivery.gateway.consumer import dead_letter_queue_name
from delivery.gateway.dead_letter_queue import DeadLetter, ReplayRefused, dead_letters_pass


class Command(BaseCommand):
    help = "List (default) or replay the push gateway's dead-letter queue (<TRAININGS_PUSH_QUEUE>.dead)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--replay", action="store_true", help="Republish them to the push queue.")
        parser.add_argument("--limit", type=int, default=1000, help="At most this many messages.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["limit"] < 1:
            raise CommandError("--limit must be at least 1")

        def show(letter: DeadLetter) -> None:
            self.stdout.write(
                f"{letter.key}  player={letter.player}  attempts={letter.attempts}  "
                f"dead_at={letter.dead_at}  error={letter.error}"
            )

        try:
            done = dead_letters_pass(
                limit=options["limit"], replay=(lambda _: True) if options["replay"] else None, on_letter=show
            )
        except ReplayRefused as exc:
            raise CommandError(str(exc)) from exc
        for body in done.skipped:
            self.stderr.write(f"skipping a message that is not a dead push: {body!r}")
        verb = f"replayed {done.replayed} of" if options["replay"] else "listed"
        self.stdout.write(f"{verb} {done.seen} dead-lettered push(es) on {dead_letter_queue_name()}")
