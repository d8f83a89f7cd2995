"""Escalation: at a rule's `escalate` offsets (e.g. ["6h"]) a player who still owes the answer gets the
reminder on every channel they have, push and email, not only the push (docs/escalation.md).

The fire path decides it (the rule at the offset that fires; only players still pending get a push at
all) and says so in the push document (`"escalate": true`); the gateway then sends to every address of a
recipient who kept the default channel choice (push, email only when no device is reached;
`channels_for` in delivery/gateway/routing.py). A person's own choice stands: "push" (never email) stays
push, "email" (instead of push) stays email, and mute still mutes (a critical offset gets through mute as
always).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from trainings.models import Push
from trainings.planning.offsets import OffsetError, parse_offsets


def escalated(push: Push) -> dict[str, object]:
    """A stored push's message (a retry, a held push's release) with the escalation its rule says now for
    its offset: the rule as it stands when the push goes out."""
    message = push.message()
    if push.rule is not None and push.rule.escalates_at(push.offset):
        message["escalate"] = True
    return message


class EscalateField(serializers.ListField):
    """A rule's `escalate` in the API: offsets such as ["6h"] ([] for none); that they are the rule's own
    is the rule's check (trainings/models/reach.py)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "Offsets of the rule at which a player who still owes the answer gets the reminder on every "
            'channel they have (push and email), e.g. ["6h"]; [] for none (docs/escalation.md).',
        )
        super().__init__(child=serializers.CharField(max_length=10), max_length=100, **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        value: list[str] = super().to_internal_value(data)
        try:
            parse_offsets(value)
        except OffsetError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value
