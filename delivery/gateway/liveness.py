"""What the gateway leaves for the status page and `/health/ready`: a heartbeat row per process, touched
at most every HEARTBEAT_EVERY seconds from its consumer loop (idle or busy), and per-minute counts of the
device sends it recorded (one upsert per round of pushes, in the transaction that finishes the round)."""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime

from django.db import connection
from django.db.models.functions import Now

from delivery import queries
from delivery.models import GatewayHeartbeat

HEARTBEAT_EVERY = 5.0
_last_beat = 0.0


def gateway_heartbeat(*, name: str | None = None, force: bool = False) -> None:
    """This gateway process is alive (by the database's clock); a no-op within HEARTBEAT_EVERY of the last."""
    global _last_beat
    if not force and time.monotonic() - _last_beat < HEARTBEAT_EVERY:
        return
    name = name or f"{socket.gethostname()}:{os.getpid()}"
    if not GatewayHeartbeat.objects.filter(name=name).update(seen_at=Now()):
        GatewayHeartbeat.objects.update_or_create(name=name, defaults={"seen_at": Now()})
    _last_beat = time.monotonic()


def push_minutes_add(*, at: datetime, accepted: int, not_reached: int, standin: int = 0) -> None:
    """Add a round's device outcomes to its minute (concurrent gateways add, never overwrite); `standin`:
    how many of the accepted a stand-in accepted."""
    if not (accepted or not_reached):
        return
    minute = at.replace(second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            queries.PUSH_MINUTE_ADD,
            [connection.ops.adapt_datetimefield_value(minute), accepted, not_reached, standin],
        )
