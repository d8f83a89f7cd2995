"""The engine's in-process callback for training reminders.

Each occurrence's payload is `{"training": "<training uuid>", "rule": <rule id>}`, never the recipients:
they are decided when it fires (`trainings.reminding.firing.reminders_fire`). The push messages it publishes
(`trainings.push-batch/1` of `trainings.push/2` pushes) are described in docs/design.md, "Pushes".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from delivery.api import push_queue_names
from reminders.api import Delivery, TransportError, keys_reserve, queues_reserve, register, register_batch
from trainings.digest.alerts import decline_alert_fire
from trainings.digest.firing import COACH_ALERT_HANDLER, COACH_RELEASE_HANDLER, KEY_PREFIX, coach_release
from trainings.reminding.fairness import reminders_order
from trainings.reminding.firing import reminders_fire
from trainings.reminding.held import QUIET_RELEASE_HANDLER, quiet_release
from trainings.reminding.notices import (
    CANCELLED_NOTICE_HANDLER,
    MOVED_NOTICE_HANDLER,
    training_cancelled_notify,
    training_moved_notify,
)
from trainings.selectors import JOB_KEY_NAMESPACE
from trainings.webhooks.events import KEY_PREFIX as WEBHOOK_KEY_PREFIX

# Only this app's services create these jobs: an API caller can neither take one of their keys first
# nor name the handler (it pushes to any training's players).
keys_reserve(JOB_KEY_NAMESPACE, owner="the trainings app (training-<uuid>-...)")
keys_reserve(
    r"trainings-(quiet-release|moved-notice|cancelled-notice)-",
    owner="the trainings app (held pushes, moved and cancelled notices)",
)
keys_reserve(KEY_PREFIX, owner="the trainings app (coaches' digests and alerts)")
keys_reserve(WEBHOOK_KEY_PREFIX, owner="the trainings app (events to the platform's webhooks)")
# A message on the push queue is a push the gateway sends to a phone or an inbox: no API caller publishes
# there or to its dead letters, whatever the queues are named.
queues_reserve(push_queue_names, owner="the push gateway's pushes or dead letters")


@register_batch("trainings.reminder", api=False, order=reminders_order)
def training_reminders(deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
    return reminders_fire(deliveries=deliveries)


@register(QUIET_RELEASE_HANDLER)
def training_quiet_release(delivery: Delivery) -> None:
    """A player's quiet hours ended: publish their held pushes (payload: the training and the rule)."""
    quiet_release(delivery=delivery)


@register(MOVED_NOTICE_HANDLER)
def training_moved_notice(delivery: Delivery) -> None:
    """The training moved: tell the players already reminded (payload: the training and its new start)."""
    training_moved_notify(delivery=delivery)


@register(CANCELLED_NOTICE_HANDLER)
def training_cancelled_notice(delivery: Delivery) -> None:
    """The training is cancelled: tell the players who accepted or were reminded (payload: the training)."""
    training_cancelled_notify(delivery=delivery)


@register(COACH_RELEASE_HANDLER)
def training_coach_release(delivery: Delivery) -> None:
    """A coach's quiet hours ended: decide their held digest again and publish it (payload: the message)."""
    coach_release(delivery=delivery)


@register(COACH_ALERT_HANDLER)
def training_coach_alert(delivery: Delivery) -> None:
    """A player declined late: tell the team's coaches (payload: the training, the rule, the player)."""
    decline_alert_fire(delivery=delivery)
