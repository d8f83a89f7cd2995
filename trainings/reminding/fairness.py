"""Fair draining of a storm: when many trainings' reminders fall due at one instant, no team waits behind
a bigger one.

Two places decide who goes first:
1. Across chunks: the engine cuts the deliveries due together into chunks of 50 and runs them one after
   the other; `reminders_order` puts the reminders of trainings with fewer invited players first, so a
   team of thousands runs in the last chunk rather than holding up every chunk behind it.
2. Inside a chunk: its pushes go to the push queue in one AMQP transaction and the gateway takes them in
   queue order; `interleaved` publishes them round-robin across the chunk's reminders (one push of each
   training, then the next of each), so a small team's pushes are near the head of the queue whatever
   the size of the other trainings in its chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from django.db.models import Count

from reminders.api import Delivery
from trainings.models import Invitation
from trainings.planning.scheduling import reminder_payload_ids

T = TypeVar("T")


def reminders_order(deliveries: Sequence[Delivery]) -> list[Delivery]:
    """The deliveries by their training's invited players, fewest first (one query; ties keep their order).

    Invitations stand for the recipients: who is still pending is only known when the reminder fires.
    """
    training_of = {d.occurrence_id: ids[0] for d in deliveries if (ids := reminder_payload_ids(d.payload))}
    sizes = dict(
        Invitation.objects.filter(training_id__in=set(training_of.values()))
        .values_list("training_id")
        .annotate(players=Count("id"))
        .values_list("training_id", "players")
    )

    def players(delivery: Delivery) -> int:
        training = training_of.get(delivery.occurrence_id)
        return sizes.get(training, 0) if training is not None else 0

    return sorted(deliveries, key=players)


def interleaved(items: Iterable[T], group: Callable[[T], Hashable]) -> list[T]:
    """Round-robin across groups: the first item of each group (groups in order of first appearance), then
    the second of each, and so on; each group's own order is kept."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(group(item), []).append(item)
    lanes = list(groups.values())
    ordered: list[T] = []
    depth = 0
    while lanes:
        lanes = [lane for lane in lanes if depth < len(lane)]
        ordered += [lane[depth] for lane in lanes]
        depth += 1
    return ordered
