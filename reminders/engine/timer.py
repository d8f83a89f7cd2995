"""Claimed rows held until their instant: the look-ahead scan's in-process timer queue.

The scan claims rows due within REMINDERS_LOOKAHEAD_SECONDS under its lease (so they are in the database
as `claimed`, and the reaper returns them if this process dies), keeps them here ordered by instant, and
publishes each when the database's clock reaches it. Rows whose instants fall together are popped together
and go out in one chunk (one AMQP transaction).

A held row's job may change while it waits. When the first held row falls due, one query (`held_current`)
reads again every held row due within the next few milliseconds (reminders/engine/lookahead.py,
_CHECK_WINDOW): a
row no longer held by our lease (reaped, deleted) is dropped; a row whose version is older than its job's
(the job was cancelled, or replaced without this instant: reminders/jobs.py moves the rows it keeps to
the new version) is skipped; a job whose version moved since its columns were read is read again, so the
payload sent is the current one. This keeps the window in which a stale version can go out as short as it
was without a look-ahead (then: the time from the claim to the last chunk of its batch).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection

from reminders import queries
from reminders.engine.claim_types import Claim, ClaimedOccurrence
from reminders.engine.deliveries import DeliveryJob, delivery_jobs
from reminders.models import Job


@dataclass
class Held:
    """The held part of one claim, with its jobs' columns and the versions they were read at."""

    claim: Claim
    jobs: dict[int, DeliveryJob]
    versions: dict[int, int]

    def part(self, rows: list[ClaimedOccurrence]) -> Claim:
        """These rows as a claim of their own: same lease token and lease end."""
        return Claim(token=self.claim.token, claimed_until=self.claim.claimed_until, occurrences=rows)


# (instant, -priority, id, row, its claim): ids are unique, so rows and claims are never compared.
_Entry = tuple[datetime, int, int, ClaimedOccurrence, Held]
Group = tuple[Held, list[ClaimedOccurrence]]


@dataclass
class TimerQueue:
    """Held rows by instant, in two heaps: waiting (not checked since the claim) and ready (checked).

    When the first waiting row falls due, every waiting row due within a short window is checked with one
    query and moves to ready; ready rows are published at their instants without another query.
    """

    _waiting: list[_Entry] = field(default_factory=list)
    _ready: list[_Entry] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self._waiting) + len(self._ready)

    def hold(self, claim: Claim, rows: list[ClaimedOccurrence]) -> None:
        """Hold `rows` (part of `claim`) until their instants; reads their jobs now, versions first."""
        if not rows:
            return
        job_ids = {o.job_id for o in rows}
        # Versions before columns: a change landing in between is seen as a change at publish time.
        versions = job_versions(job_ids)
        held = Held(claim, delivery_jobs(job_ids), versions)
        for o in rows:
            heapq.heappush(self._waiting, (o.due_at, -o.priority, o.id, o, held))

    def next_due(self) -> datetime | None:
        return min((heap[0][0] for heap in (self._waiting, self._ready) if heap), default=None)

    def pop_to_check(self, now: datetime, window: timedelta) -> list[Group]:
        """If a waiting row is due, every waiting row due by `now + window`; else nothing."""
        if not self._waiting or self._waiting[0][0] > now:
            return []
        return _grouped(self._waiting, now + window)

    def ready(self, held: Held, rows: list[ClaimedOccurrence]) -> None:
        for o in rows:
            heapq.heappush(self._ready, (o.due_at, -o.priority, o.id, o, held))

    def pop_ready(self, now: datetime) -> list[Group]:
        """Every checked row due at `now`, grouped by claim, each group in the claim's order."""
        return _grouped(self._ready, now)

    def clear(self) -> None:
        """Forget everything held (after an error: the pipeline hands the rows back by their lease)."""
        self._waiting.clear()
        self._ready.clear()


def _grouped(heap: list[_Entry], until: datetime) -> list[Group]:
    groups: dict[uuid.UUID, Group] = {}
    while heap and heap[0][0] <= until:
        _, _, _, row, held = heapq.heappop(heap)
        groups.setdefault(held.claim.token, (held, []))[1].append(row)
    for _, rows in groups.values():
        rows.sort(key=lambda r: (-r.priority, r.due_at, r.id))
    return list(groups.values())


def job_versions(job_ids: Iterable[int]) -> dict[int, int]:
    return dict(Job.objects.filter(id__any=list(job_ids)).values_list("id", "version"))


@dataclass(frozen=True)
class Recheck:
    """What the database says of held rows right before they are published."""

    gone: list[int]  # no longer held by this lease (reaped and re-claimed, or deleted with their job)
    stale: list[int]  # held, but older than their job's current version (cancelled, replaced)
    changed_jobs: set[int]  # jobs whose version moved since their columns were read


def held_current(groups: list[Group]) -> list[Recheck]:
    """One query for all of `groups`: are these rows still ours, and still their job's current version?"""
    with connection.cursor() as cursor:
        cursor.execute(queries.HELD_CURRENT, [[o.id for _, rows in groups for o in rows]])
        current = {oid: (token, row_version, job_version) for oid, token, row_version, job_version in cursor}
    checks = []
    for held, rows in groups:
        gone, stale, changed = [], [], set()
        for o in rows:
            token, row_version, job_version = current.get(o.id, (None, 0, 0))
            if token != held.claim.token:
                gone.append(o.id)
            elif row_version != job_version:
                stale.append(o.id)
            elif held.versions.get(o.job_id) != job_version:
                changed.add(o.job_id)
        checks.append(Recheck(gone, stale, changed))
    return checks


def held_reload(held: Held, job_ids: set[int]) -> None:
    """Read again the jobs that changed while held (versions first, as in `TimerQueue.hold`)."""
    held.versions.update(job_versions(job_ids))
    held.jobs.update(delivery_jobs(job_ids))
