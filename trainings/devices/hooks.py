"""What the domain tells delivery (delivery/domain.py): its kinds and their app screens, the people's channel
and mute choices, the rules' critical offsets, and the `push.outcome` webhook (a push's answer links travel
in its document: trainings/reminding/publishing.py). Registered once at start (TrainingsConfig.ready), in
every process: the web, the workers and the push gateway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from delivery.api import PushOutcome, domain_register
from trainings.models import WebhookEvent
from trainings.planning import kinds
from trainings.reminding.critical import critical_at
from trainings.reminding.preferences import preferences_of, rules_critical
from trainings.webhooks.events import push_outcomes, subscribers


def _screen_of(kind: str) -> str | None:
    known = kinds.KINDS.get(kind)
    return None if known is None else known.screen


def _outcomes_wanted() -> bool:
    return bool(subscribers(WebhookEvent.PUSH_OUTCOME))


def _outcomes_publish(outcomes: Sequence[PushOutcome]) -> int:
    return push_outcomes(outcomes)


def _critical_at(value: object, offset: Any) -> bool:
    return critical_at(value, offset)


def register() -> None:
    domain_register(
        kinds=lambda: kinds.KINDS,
        screen_of=_screen_of,
        preferences=preferences_of,
        rules_critical=rules_critical,
        critical_at=_critical_at,
        outcomes_wanted=_outcomes_wanted,
        outcomes_publish=_outcomes_publish,
    )
