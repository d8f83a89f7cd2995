"""Deliver to a registered in-process handler (the trainings app re-checks recipients this way)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from rest_framework import serializers

from reminders.engine import handler_registry
from reminders.transports.base import CallbackDataSerializer, Delivery, InFlight, Settled, TransportError

logger = logging.getLogger(__name__)


class HandlerDataSerializer(CallbackDataSerializer):
    target_field = "name"
    name = serializers.CharField(max_length=200, trim_whitespace=False)  # refused, never trimmed
    payload = serializers.JSONField(required=False, default=dict)

    def validate_name(self, value: str) -> str:
        # An internal handler (not registered with api=True) runs with the project's rights, e.g.
        # `trainings.reminder` pushes to any training's players: it is refused like an unknown name.
        if handler_registry.api_allowed(value):
            return value
        known = ", ".join(handler_registry.api_names()) or "none"
        if handler_registry.exists(value):
            raise serializers.ValidationError(
                f"handler {value!r} is internal: API callers cannot schedule it (allowed: {known})."
            )
        raise serializers.ValidationError(f"no handler registered as {value!r} (allowed: {known}).")


class HandlerTransport:
    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        return Settled(self.deliver(deliveries))

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        errors: dict[int, TransportError] = {}
        by_target: dict[str, list[Delivery]] = {}
        for delivery in deliveries:
            by_target.setdefault(delivery.target, []).append(delivery)
        for target, group in by_target.items():
            batch = handler_registry.get_batch(target)
            if batch is not None:
                errors.update(_run_batch(target, batch, group))
            else:
                for delivery in group:
                    error = _run_one(delivery)
                    if error is not None:
                        errors[delivery.occurrence_id] = error
        return errors


def deliveries_order(deliveries: Sequence[Delivery]) -> Sequence[Delivery]:
    """Each handler's deliveries in the order its `order` asks for (handlers in the order first seen).

    An order that is not a permutation of what it was given is ignored (logged): every delivery must
    still run exactly once.
    """
    by_target: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        by_target.setdefault(delivery.target, []).append(delivery)
    ordered: list[Delivery] = []
    for target, group in by_target.items():
        order = handler_registry.get_order(target)
        if order is None:
            ordered += group
            continue
        try:
            arranged = list(order(group))
        except Exception:
            logger.exception("handler %s could not order %d deliveries", target, len(group))
            arranged = group
        if sorted(d.occurrence_id for d in arranged) != sorted(d.occurrence_id for d in group):
            logger.error("handler %s's order is not a permutation of its deliveries; ignored", target)
            arranged = group
        ordered += arranged
    return ordered


def _run_one(delivery: Delivery) -> TransportError | None:
    fn = handler_registry.get(delivery.target)
    if fn is None:
        return TransportError(f"no handler registered as {delivery.target!r}", permanent=True)
    try:
        fn(delivery)
    except TransportError as exc:
        return exc
    except Exception as exc:
        logger.exception("handler %s failed for occurrence %s", delivery.target, delivery.occurrence_id)
        return TransportError(f"{type(exc).__name__}: {exc}")
    return None


def _run_batch(
    target: str, fn: handler_registry.BatchHandlerFn, group: Sequence[Delivery]
) -> dict[int, TransportError]:
    """A batch handler answers for the whole group; if it raises, every occurrence of it is retried."""
    ids = {d.occurrence_id for d in group}
    try:
        result = fn(group)
    except TransportError as exc:
        return dict.fromkeys(ids, exc)
    except Exception as exc:
        logger.exception("batch handler %s failed for %d occurrences", target, len(group))
        error = TransportError(f"{type(exc).__name__}: {exc}")
        return dict.fromkeys(ids, error)
    return {oid: exc for oid, exc in result.items() if oid in ids}
