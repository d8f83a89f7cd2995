"""Which arm of an experiment a player is in, and the record of it.

The arm is a hash of the experiment's and the player's ids (SHA-256, the first 8 bytes as a number, modulo
the arms): the same on every worker and every day, independent between experiments, and an even split in
expectation. The record (`ExperimentAssignment`) says who was in the experiment and from when; it never
disagrees with the hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Exists, OuterRef
from django.utils import timezone

from trainings.models import Experiment, ExperimentAssignment, Membership

BULK = 5000


def arm_of(experiment_id: int, player_id: int, arms: int) -> int:
    """The player's arm among `arms` (0 is the rule's own offsets)."""
    digest = hashlib.sha256(f"experiment:{experiment_id}:player:{player_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % arms


def assignments_record(
    experiment_id: int, player_ids: Iterable[int], *, arms: int, now: datetime | None = None
) -> None:
    """Record the arm of each player not recorded yet (a player keeps the arm and time first recorded)."""
    now = now or timezone.now()
    rows = [
        ExperimentAssignment(
            experiment_id=experiment_id, player_id=pid, arm=arm_of(experiment_id, pid, arms), assigned_at=now
        )
        for pid in sorted(set(player_ids))
    ]
    ExperimentAssignment.objects.bulk_create(rows, ignore_conflicts=True, batch_size=BULK)


def assignments_record_members(experiment: Experiment, *, arms: int, now: datetime | None = None) -> None:
    """Record the arm of every active member of a team (the experiment's rule reaches every team)."""
    members = (
        Membership.objects.filter(active=True)
        .exclude(
            Exists(ExperimentAssignment.objects.filter(experiment=experiment, player=OuterRef("player")))
        )
        .values_list("player_id", flat=True)
        .distinct()
    )
    assignments_record(experiment.pk, members.iterator(), arms=arms, now=now)
