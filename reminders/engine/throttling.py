"""Throttle policies (seed 002): a token bucket per named policy, shared by every job and schedule naming it.

Occurrences of a throttled job carry the policy (`Occurrence.throttle`), so the generic claim never sees
them and a throttled backlog cannot slow unthrottled jobs. Each policy gets its own claim: in one short
transaction the policy row is locked (FOR UPDATE SKIP LOCKED: a worker already claiming for this policy
is left to it), the bucket is refilled for the time passed, at most the whole tokens in it are claimed,
and the bucket is charged what was claimed. Nothing is claimed before it is due, so 10,000 events due at
one instant under 100/s go out from their fire time on, staggered at the rate, none early, none lost.
The bucket is refilled by the database's time (the scan's `now`, reminders/engine/clock.py): a worker whose
own
clock ran ahead would otherwise refill it early and stamp `refilled_at` in the others' future.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db import transaction

from reminders.engine.claim_types import Claim
from reminders.engine.occurrences import occurrences_claim_due
from reminders.models import ThrottlePolicy


def bucket_refill(policy: ThrottlePolicy, now: datetime) -> float:
    """Tokens available at `now`: what was left plus rate x elapsed, at most the policy's capacity."""
    capacity = policy.capacity
    if policy.refilled_at is None:
        return capacity
    elapsed = max(0.0, (now - policy.refilled_at).total_seconds())
    return min(capacity, policy.tokens + elapsed * (policy.max_per_second or 0))


def occurrences_claim_throttled(
    *, policy_id: int, now: datetime, limit: int, lease_seconds: int, early_seconds: int = 0
) -> Claim | None:
    """Claim what policy `policy_id` allows now (at most `limit`); None when another worker holds it."""
    with transaction.atomic():
        policy = ThrottlePolicy.objects.select_for_update(skip_locked=True).filter(pk=policy_id).first()
        if policy is None:
            return None
        allowed = limit
        tokens = 0.0
        if policy.max_per_second:
            tokens = bucket_refill(policy, now)
            allowed = min(limit, int(tokens))
        claim = None
        if allowed >= 1:
            claim = occurrences_claim_due(
                now=now,
                limit=allowed,
                lease_seconds=lease_seconds,
                early_seconds=early_seconds,
                throttle_id=policy.pk,
            )
        taken = len(claim.occurrences) if claim is not None else 0
        if policy.max_per_second and taken:
            # Only a claim changes the bucket: an idle refill is recomputed the same way next time, so an
            # idle policy costs no write per scan.
            refilled_at = max(now, policy.refilled_at) if policy.refilled_at is not None else now
            ThrottlePolicy.objects.filter(pk=policy.pk).update(tokens=tokens - taken, refilled_at=refilled_at)
        return claim


def throttled_claims(
    *, now: datetime, limit: int, lease_seconds: int, early_seconds: int = 0
) -> Iterator[Claim]:
    """One claim per policy that has something to give now. Policies are few (named, shared).

    A generator, so the caller holds each committed claim before the next policy's claim can fail.
    """
    for policy_id in ThrottlePolicy.objects.order_by("id").values_list("id", flat=True):
        claim = occurrences_claim_throttled(
            policy_id=policy_id,
            now=now,
            limit=limit,
            lease_seconds=lease_seconds,
            early_seconds=early_seconds,
        )
        if claim is not None and claim.occurrences:
            yield claim
