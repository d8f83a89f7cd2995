"""The API's squad-size fields on a training's input (`/api/trainings/`): both optional, at least 1, the
minimum not above the maximum (null clears one)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class SquadSizeInput(serializers.Serializer):
    min_players = serializers.IntegerField(
        min_value=1, required=False, allow_null=True,
        help_text="Coaches are alerted when fewer have accepted (the short-squad rule's offset); null: none.",
    )  # fmt: skip
    max_players = serializers.IntegerField(
        min_value=1, required=False, allow_null=True,
        help_text="Places: further accepts go on the waiting list (response `waitlisted`); null: no limit.",
    )  # fmt: skip


def squad_size_check(attrs: dict[str, Any], instance: Any) -> None:
    """A 400 on `min_players` when it is above the maximum (the stored one when only one is given)."""
    low = attrs.get("min_players", getattr(instance, "min_players", None))
    high = attrs.get("max_players", getattr(instance, "max_players", None))
    if low is not None and high is not None and low > high:
        raise serializers.ValidationError({"min_players": f"must not be above max_players ({high})."})
