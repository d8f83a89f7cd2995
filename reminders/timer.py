"""Claimed rows held until their instant: the look-ahead scan's in-process timer queue.

The scan claims rows due within REMINDERS_LOOKAHEAD_SECONDS under its lease (so they are in the database
as `claimed`, and the reaper returns them if this process dies), keeps them here ordered by instant, and
publishes each when the database's clock reaches it. Rows whose instants fall together are popped together
and go out in one chunk (one AMQP transaction).

A held row's job may change while it waits. Right before it is published, one query (`held_current`) reads
the held rows again: a row no longer held by our lease (reaped, deleted) is dropped; a row whose version is
older than its job's (the job was cancelled, or replaced without this instant: reminders/services.py moves
the rows it keeps to the new version) is skipped; a job whose version moved since its columns were read is
read again, so the payload sent is the current one. This keeps the window in which a stale version can go
out as short as it was without a look-ahead (the time between a check and the publish).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from reminders.deliveries import DeliveryJob, delivery_jobs
from reminders.models import Job, Occurrence, OccurrenceStatus
from reminders.occurrences import Claim, ClaimedOccurrence


@dataclass
class Held:
    """The held part of one claim, with its jobs' columns and the versions they were read at."""

    claim: Claim
    jobs: dict[int, DeliveryJob]
    versions: dict[int, int]
    left: int = 0  # rows of this claim still in the queue

    def part(self, rows: list[ClaimedOccurrence]) -> Claim:
        """These rows as a claim of their own: same lease token and lease end."""
        return Claim(token=self.claim.token, claimed_until=self.claim.claimed_until, occurrences=rows)


@dataclass
class TimerQueue:
    """Held rows by instant (a heap); ties by priority, then insertion order (id)."""

    _heap: list[tuple[datetime, int, int, ClaimedOccurrence, uuid.UUID]] = field(default_factory=list)
    _held: dict[uuid.UUID, Held] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, claim: Claim, rows: list[ClaimedOccurrence]) -> None:
        """Hold `rows` (part of `claim`) until their instants; reads their jobs now, versions first."""
        if not rows:
            return
        job_ids = {o.job_id for o in rows}
        # Versions before columns: a change landing in between is seen as a change at publish time.
        versions = job_versions(job_ids)
        self._held[claim.token] = Held(claim, delivery_jobs(job_ids), versions, len(rows))
        for o in rows:
            heapq.heappush(self._heap, (o.due_at, -o.priority, o.id, o, claim.token))

    def next_due(self) -> datetime | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: datetime) -> list[tuple[Held, list[ClaimedOccurrence]]]:
        """Every row due at `now`, grouped by claim, each group in the claim's order (priority first)."""
        groups: dict[uuid.UUID, list[ClaimedOccurrence]] = {}
        while self._heap and self._heap[0][0] <= now:
            _, _, _, row, token = heapq.heappop(self._heap)
            groups.setdefault(token, []).append(row)
        out = []
        for token, rows in groups.items():
            held = self._held[token]
            held.left -= len(rows)
            if not held.left:
                del self._held[token]
            rows.sort(key=lambda r: (-r.priority, r.due_at, r.id))
            out.append((held, rows))
        return out

    def clear(self) -> None:
        """Forget everything held (after an error: the pipeline hands the rows back by their lease)."""
        self._heap.clear()
        self._held.clear()


def job_versions(job_ids: Iterable[int]) -> dict[int, int]:
    return dict(Job.objects.filter(id__any=list(job_ids)).values_list("id", "version"))


@dataclass(frozen=True)
class Recheck:
    """What the database says of held rows right before they are published."""

    gone: list[int]  # no longer held by this lease (reaped and re-claimed, or deleted with their job)
    stale: list[int]  # held, but older than their job's current version (cancelled, replaced)
    changed_jobs: set[int]  # jobs whose version moved since their columns were read


def held_current(held: Held, rows: list[ClaimedOccurrence]) -> Recheck:
    """One query: are these rows still ours, and still their job's current version?"""
    current = {
        oid: (row_version, job_version)
        for oid, row_version, job_version in Occurrence.objects.filter(
            id__any=[o.id for o in rows], lease_token=held.claim.token, status=OccurrenceStatus.CLAIMED
        ).values_list("id", "job_version", "job__version")
    }
    gone, stale, changed = [], [], set()
    for o in rows:
        if o.id not in current:
            gone.append(o.id)
            continue
        row_version, job_version = current[o.id]
        if row_version != job_version:
            stale.append(o.id)
        elif held.versions.get(o.job_id) != job_version:
            changed.add(o.job_id)
    return Recheck(gone, stale, changed)


def held_reload(held: Held, job_ids: set[int]) -> None:
    """Read again the jobs that changed while held (versions first, as in `TimerQueue.hold`)."""
    held.versions.update(job_versions(job_ids))
    held.jobs.update(delivery_jobs(job_ids))
