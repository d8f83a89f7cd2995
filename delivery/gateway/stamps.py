"""A device's `last_success_at`, off the sends' path: the gateway collects the devices a provider accepted
a push for, and stamps them all with one UPDATE at most once per STAMP_EVERY, outside the transaction that
records the sends (docs/operations/capacity.md, "Device stamps").

The bound: a device's `last_success_at` is never later than its last recorded acceptance and at most an
hour older, as before (SUCCESS_EVERY plus STAMP_EVERY). A device stamped within the last SUCCESS_EVERY is
left as it is (a guardian's several players, a coach's digest beside a reminder: no new row version). A
gateway killed -9 loses the stamps it had not written yet (at most STAMP_EVERY of them); the device's next
accepted push stamps it. A graceful stop writes them (`PushSender.close`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import DatabaseError
from django.db.models import Q

from common.lookups import AnyOf
from delivery.models import Device

logger = logging.getLogger("delivery.gateway.consumer")

Device._meta.get_field("id").register_lookup(AnyOf)  # the devices as one array parameter

# How often the gateway writes the stamps it collected, and how old a stamp may be before it moves: the two
# add up to an hour, the bound `last_success_at`'s help text states.
STAMP_EVERY = timedelta(minutes=1)
SUCCESS_EVERY = timedelta(hours=1) - STAMP_EVERY


class Stamps:
    """The devices accepted since the last write, with the earliest acceptance among them (the time they
    are stamped with: never later than any of theirs). Any thread may add or write (each write takes
    what was collected before it)."""

    def __init__(self, every: timedelta = STAMP_EVERY) -> None:
        self.every = every.total_seconds()
        self._lock = threading.Lock()
        self._devices: set[int] = set()
        self._since: datetime | None = None
        self._written = time.monotonic()

    def add(self, device_ids: Iterable[int], *, at: datetime) -> None:
        """These devices' pushes were accepted and their outcomes committed at `at`."""
        with self._lock:
            self._devices.update(device_ids)
            self._since = at if self._since is None else min(self._since, at)
        self.due()

    def due(self) -> int:
        """Write the stamps if STAMP_EVERY has passed since the last write (the gateway's loop asks every
        turn, so an idle gateway's stamps are not held back either)."""
        if self._devices and time.monotonic() - self._written >= self.every:
            return self.write()
        return 0

    def write(self) -> int:
        """Stamp the devices collected so far (one UPDATE; each unstamped or stamped over SUCCESS_EVERY
        before), in a transaction of its own unless the caller holds one. Returns the rows it moved. A
        write the database refuses (another gateway's stamps locked the same rows first: a deadlock) keeps
        the devices for the next one: a stamp must not stop the gateway."""
        with self._lock:
            devices, since = sorted(self._devices), self._since
            self._devices, self._since = set(), None
            self._written = time.monotonic()
        if not devices or since is None:
            return 0
        old = Q(last_success_at__isnull=True) | Q(last_success_at__lt=since - SUCCESS_EVERY)
        try:
            return Device.objects.filter(old, pk__any=devices).update(last_success_at=since)
        except DatabaseError:
            logger.warning("device stamps not written; kept for the next minute", exc_info=True)
            self.add(devices, at=since)
            return 0

    def pending(self) -> int:
        """Devices collected and not yet stamped."""
        with self._lock:
            return len(self._devices)
