"""What delivery asks of the app that publishes pushes to it: the kinds it knows, what an answerable push
carries (signed answer links), a person's channel and mute choices, which reminders stay critical, and who
wants a push's final outcome. The domain registers its answers at start (its AppConfig.ready, through
`delivery.api.domain_register`), so delivery imports nothing of it; unregistered, delivery sends plain
pushes: no links, no choices, no outcome events.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

# (player id, guardian id, coach id, kind): whose choice, for which kind of reminder.
Asked = tuple[int | None, int | None, int | None, str]


@dataclass(frozen=True)
class PushOutcome:
    """A push's final outcome, as the gateway recorded it (the domain's `push.outcome` webhook sends it)."""

    push: str  # the push's key
    player: int
    guardian: int | None
    training: str
    kind: str
    channel: str | None  # the channel that reached the player, else the last tried; None: no device
    outcome: str  # reached, no_device, token_dead, failed


def _no_fields(
    *, player_id: int, training_id: str, kind: str, guardian_id: int | None = None
) -> dict[str, Any]:
    return {}


def _no_link(*, player_id: int, training_id: str, kind: str, guardian_id: int | None = None) -> str | None:
    return None


def _no_email_answer(
    *, player_id: int, training_id: str, kind: str, guardian_id: int | None = None
) -> tuple[str, bool] | None:
    return None


@dataclass
class Domain:
    """The domain's answers; each field a callable, the defaults those of a domain that says nothing."""

    # The kind codes it publishes (metrics label anything else "unknown").
    kinds: Callable[[], Collection[str]] = frozenset
    # The app screen a push of this kind opens (None: the kind is unknown).
    screen_of: Callable[[str], str | None] = lambda kind: None
    # What a push carries to be answered in one tap: `category`, `answer_url`, `actions` (ValueError: none).
    answer_fields: Callable[..., dict[str, Any]] = _no_fields
    # The answer page of a push (the logging stand-in prints it under DEBUG).
    answer_page_link: Callable[..., str | None] = _no_link
    # An email's answer token and whether it records a response (accept/decline): None, nothing to answer.
    email_answer: Callable[..., tuple[str, bool] | None] = _no_email_answer
    # (channels, muted) per `Asked` that has a choice.
    preferences: Callable[[set[Asked]], dict[Asked, tuple[str, bool]]] = lambda asked: {}
    # The critical offsets of the rules named (opaque to delivery), and whether an offset is critical.
    rules_critical: Callable[[set[str]], dict[str, object]] = lambda slugs: {}
    critical_at: Callable[[object, str | None], bool] = lambda value, offset: False
    # Whether anyone wants `push.outcome` events, and the events of a round (in its transaction).
    outcomes_wanted: Callable[[], bool] = lambda: False
    outcomes_publish: Callable[[Sequence[PushOutcome]], int] = lambda outcomes: 0


DOMAIN = Domain()


def domain_register(**answers: Callable[..., Any]) -> None:
    """Set the domain's answers (keyword names are `Domain`'s fields; an unknown one is a TypeError)."""
    for name, answer in answers.items():
        if name not in Domain.__dataclass_fields__:
            raise TypeError(f"delivery asks the domain no {name!r}")
        setattr(DOMAIN, name, answer)
