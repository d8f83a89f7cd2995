"""What the domain tells delivery (delivery/domain.py): its kinds and their app screens, the signed answer
links a push or an email carries, the people's channel and mute choices, the rules' critical offsets, and
the `push.outcome` webhook. Registered once at start (TrainingsConfig.ready), in every process: the web,
the workers and the push gateway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from delivery.api import PushOutcome, domain_register
from trainings.answers.links import (
    answer_page_link,
    answer_push_fields,
    answer_token,
    answerable,
    expects_response,
)
from trainings.models import WebhookEvent
from trainings.planning import kinds
from trainings.reminding.critical import critical_at
from trainings.reminding.preferences import preferences_of, rules_critical
from trainings.webhooks.events import push_outcomes, subscribers


def _screen_of(kind: str) -> str | None:
    known = kinds.KINDS.get(kind)
    return None if known is None else known.screen


def _email_answer(
    *, player_id: int, training_id: str, kind: str, guardian_id: int | None = None
) -> tuple[str, bool] | None:
    """An email's answer-page token (signed for the email channel) and whether it records a response."""
    if not answerable(kind):
        return None
    token = answer_token(player_id=player_id, training_id=training_id, kind=kind, channel="email",
                         guardian_id=guardian_id)  # fmt: skip
    return token, expects_response(kind)


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
        answer_fields=answer_push_fields,
        answer_page_link=answer_page_link,
        email_answer=_email_answer,
        preferences=preferences_of,
        rules_critical=rules_critical,
        critical_at=_critical_at,
        outcomes_wanted=_outcomes_wanted,
        outcomes_publish=_outcomes_publish,
    )
