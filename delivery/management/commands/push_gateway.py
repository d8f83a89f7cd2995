from __future__ import annotations

import gc
import logging
import signal
import time
from typing import Any

import kombu.exceptions
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from common.wire.hpack_codec import huffman_table_build
from delivery.channels.providers import AuthFailure, providers_from_settings
from delivery.gateway.consumer import broker_connection, gateway_run

logger = logging.getLogger(__name__)
# After the database failed under the gateway, wait this long before consuming again.
_DATABASE_RETRY_SECONDS = 2.0


class Command(BaseCommand):
    help = (
        "Consume the push queue (TRAININGS_PUSH_QUEUE) and send each push to the player's devices: APNs and "
        "FCM where their credentials are set, TRAININGS_PUSH_PROVIDER (logging by default) for the rest."
    )

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
        providers = providers_from_settings()
        # The HPACK Huffman table (tens of milliseconds to build) now, not on the first Huffman-coded answer,
        # where it stalled every send in flight at the start of a storm.
        huffman_table_build()
        self.stdout.write(f"push gateway: {providers.describe()}; Ctrl-C to stop")
        # What the process has loaded (Django, kombu, the providers) out of the collector's sight: otherwise
        # every full collection walks all of it again while the pushes wait (as the worker does, tasks.py).
        gc.collect()
        gc.freeze()
        # kombu's OperationalError: a new connection refused or unreachable while this host is still cut off.
        lost_broker: tuple[type[BaseException], ...] = (
            *broker_connection(settings.REMINDERS_CALLBACK_BROKER_URL).connection_errors,
            kombu.exceptions.OperationalError,
        )
        try:
            while True:
                try:
                    stats = gateway_run(
                        providers=providers,
                        max_messages=options["max_messages"],
                        idle_seconds=options["idle_seconds"],
                        should_stop=lambda: stopping,
                    )
                    break
                except Exception as exc:
                    # The database went away (a failover, a restart), or the broker connection did (this
                    # host cut off long enough for RabbitMQ to miss its heartbeats): the unacked pushes are
                    # RabbitMQ's again. Start over on new connections (libpq's host list finds a promoted
                    # primary) instead of exiting; what was recorded is not sent again.
                    if stopping or not isinstance(exc, (DatabaseError, *lost_broker)):
                        raise
                    what = "database" if isinstance(exc, DatabaseError) else "broker"
                    logger.warning(
                        "push gateway: %s unavailable; starting over in %.0f s",
                        what,
                        _DATABASE_RETRY_SECONDS,
                        exc_info=True,
                    )
                    connections.close_all()
                    time.sleep(_DATABASE_RETRY_SECONDS)
                    providers = providers_from_settings()  # the last ones were closed with their loop
        except AuthFailure as exc:
            raise CommandError(
                f"push provider refused the credentials ({exc}); pushes stay queued. Fix the credentials "
                "and start the gateway again."
            ) from None
        self.stdout.write(f"push gateway stopped: {stats.counts}")
