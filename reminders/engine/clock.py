"""The database's clock, by which every host judges due rows, leases, the reaper and throttle buckets.

Workers run on several hosts against one PostgreSQL; a host whose clock is a few seconds ahead would
otherwise fire early and see live leases as expired. The scan reads the database's time once per batch and
carries it forward with this process's monotonic clock, which also times the lease while the database is
away. SQLite serves one host by definition: there the reading is the local clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from reminders.engine.dialect import database_now


@dataclass(frozen=True, slots=True)
class DbClock:
    """One reading of the database's time and the monotonic instant it arrived."""

    at: datetime
    arrived: float

    @classmethod
    def read(cls) -> DbClock:
        return cls(at=database_now(), arrived=time.monotonic())

    def now(self) -> datetime:
        """The database's time now. Counted from the reading's arrival, so it never runs ahead of the
        database (by at most one round trip behind): nothing is taken as due before it is."""
        return self.at + timedelta(seconds=time.monotonic() - self.arrived)
