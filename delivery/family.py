"""The gateway's side of one push per family (reminding/family.py builds the document, each child's answer
links included): a family document goes once to each of the guardian's addresses, and every outcome is
recorded for each member push, so each child's reminder reads as reached (or not) like any other.

A member is (push key, player, training, kind): the family's `family` entries; a plain push is its own one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from delivery.messages import PushMessage


class Member(NamedTuple):
    key: str
    player: int | None
    training: str
    kind: str


def members_parse(value: Any) -> tuple[Member, ...]:
    """The `family` entries of a push document (none: not a family's); ValueError for a malformed one."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError("family: a list of two or more pushes")
    return tuple(
        Member(str(m["idempotency_key"]), int(m["player"]), str(m["training"]), str(m["kind"])) for m in value
    )


def members_of(push: PushMessage) -> tuple[Member, ...]:
    """Whose reminders this push carries: the family's members, or the push itself."""
    return push.family or (Member(push.idempotency_key, push.player, push.training, push.kind),)
