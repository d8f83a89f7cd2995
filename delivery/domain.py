"""What delivery asks of the app that publishes pushes to it: the kinds it knows, a person's channel and
mute choices, which reminders stay critical, and who wants a push's final outcome. What a push says, its
answer links included, is in its document (delivery/messages.py), not asked here. The domain registers its
answers at start (its AppConfig.ready, through `delivery.api.domain_register`), so delivery imports nothing
of it; unregistered, delivery sends what the documents say: no choices, no outcome events.
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


@dataclass
class Domain:
    """The domain's answers; each field a callable, the defaults those of a domain that says nothing."""

    # The kind codes it publishes (metrics label anything else "unknown").
    kinds: Callable[[], Collection[str]] = frozenset
    # The app screen a push of this kind opens (None: the kind is unknown).
    screen_of: Callable[[str], str | None] = lambda kind: None
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
