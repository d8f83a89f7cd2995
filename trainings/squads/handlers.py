"""The squad's engine callbacks, registered with trainings/handlers.py's (which imports this module)."""

from __future__ import annotations

from reminders.api import Delivery, keys_reserve, register
from trainings.squads.notices import KEY_PREFIX, SQUAD_IN_HANDLER, squad_in_notify
from trainings.squads.short import SHORT_ALERT_HANDLER, short_alert_fire

# The short-squad alert's keys are under the coaches' prefix, reserved there.
keys_reserve(KEY_PREFIX, owner='the trainings app ("you\'re in" notices from the waiting list)')


@register(SQUAD_IN_HANDLER)
def training_squad_in(delivery: Delivery) -> None:
    """A player got a place from the waiting list: tell them (payload: the training, the player)."""
    squad_in_notify(delivery=delivery)


@register(SHORT_ALERT_HANDLER)
def training_short_squad(delivery: Delivery) -> None:
    """A decline left the squad short inside its window: tell the coaches (payload: training and rule)."""
    short_alert_fire(delivery=delivery)
