"""In-process handlers registered for the engine's tests (the registry only accepts registered names)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reminders.engine import handler_registry
from reminders.transports.base import Delivery, TransportError

calls: list[Delivery] = []
fail_next: list[TransportError | Exception] = []


@handler_registry.register("tests.record", api=True)
def record(delivery: Delivery) -> None:
    if fail_next:
        raise fail_next.pop(0)
    calls.append(delivery)


batch_calls: list[list[Delivery]] = []
batch_fail: dict[int, TransportError] = {}  # by position in the call: what to answer for that delivery
batch_raise: list[Exception] = []
batch_order: list[int] = []  # occurrence ids in the order `order_batch` gives; empty: as they came


def order_batch(deliveries: Sequence[Delivery]) -> Sequence[Delivery]:
    if not batch_order:
        return deliveries
    by_id = {d.occurrence_id: d for d in deliveries}
    return [by_id[i] for i in batch_order if i in by_id]


@handler_registry.register_batch("tests.batch", api=True, order=order_batch)
def record_batch(deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
    if batch_raise:
        raise batch_raise.pop(0)
    batch_calls.append(list(deliveries))
    answer = {deliveries[i].occurrence_id: error for i, error in batch_fail.items() if i < len(deliveries)}
    answer[-1] = TransportError("not one of the group: ignored")
    return answer
