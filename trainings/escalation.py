"""Escalation: at a rule's `escalate` offsets (e.g. ["6h"]) a player who still owes the answer gets the
reminder on every channel they have, push and email, not only the push (docs/escalation.md).

The fire path decides it (the rule at the offset that fires; only players still pending get a push at
all) and says so in the push document (`"escalate": true`); the gateway then sends to every address of the
recipient where their channel choice is the default one (push, email only when no device is reached). A
person's own choice stands: "push" (never email) stays push, "email" (instead of push) stays email, and
mute still mutes (a critical offset gets through mute as always).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainings.models import ChannelChoice, Push

if TYPE_CHECKING:
    from trainings.push.messages import PushMessage


def escalated(push: Push) -> dict[str, object]:
    """A stored push's message (a retry, a held push's release) with the escalation its rule says now for
    its offset: the rule as it stands when the push goes out."""
    message = push.message()
    if push.rule is not None and push.rule.escalates_at(push.offset):
        message["escalate"] = True
    return message


def channels_for(push: PushMessage, chosen: str) -> str:
    """The channels a push goes through: an escalated one on every channel of a person who kept the
    default choice; otherwise the person's choice."""
    if push.escalate and chosen == ChannelChoice.DEFAULT:
        return str(ChannelChoice.BOTH)
    return chosen
