"""Which of a rule's reminders an operator marked critical: players' mute and quiet hours cannot hide them.

A rule's `critical_offsets` is `"all"` (every reminder of the rule, whatever its offsets become, every
experiment arm's too), or a list of the rule's offsets (e.g. `["15m"]`: only the last pre-training reminder),
or `[]` (none). A push is critical when its offset is listed; the decision is by offset, so an experiment
variant's reminder is critical only when its own offset is listed too."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from trainings.planning.offsets import Offset, OffsetError, parse_offsets

ALL = "all"

CriticalOffsets = str | list[str]


def validate_critical_offsets(value: object) -> None:
    """A model field's validator: the shape only (the rule's own offsets are checked by its `clean`)."""
    if value == ALL:
        return
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise ValidationError(f'"{ALL}", or a list of the rule\'s offsets such as ["15m"] ([] for none).')
    try:
        parse_offsets(value)
    except OffsetError as exc:
        raise ValidationError(str(exc)) from None


def critical_offsets_normal(value: CriticalOffsets) -> CriticalOffsets:
    """`value` as stored: "all", or the offsets parsed, de-duplicated and written as pushes name them."""
    return ALL if value == ALL else [str(offset) for offset in parse_offsets(value)]


def critical_at(value: object, offset: Offset | str | None) -> bool:
    """Whether a reminder at `offset` is critical under a rule's `critical_offsets`; a reminder of no known
    offset (a coaches' kind's, timed by the team) only under "all"."""
    if value == ALL:
        return True
    if offset is None or not isinstance(value, list):
        return False
    return str(offset) in value


def critical_offsets_error(value: object, offsets: list[Offset], *, timed_by_team: bool) -> str | None:
    """Why `value` does not fit a rule reminding at `offsets` (every arm's), or None when it does."""
    if value == ALL or value == [] or not isinstance(value, list):
        return None
    if timed_by_team:
        return f'a coaches\' kind is timed by the team, not by offsets: "{ALL}" or [].'
    known = {str(offset) for offset in offsets}
    try:
        missing = [str(offset) for offset in parse_offsets(value) if str(offset) not in known]
    except OffsetError:
        return None  # the field's validator says why
    if missing:
        listed = ", ".join(str(offset) for offset in offsets)
        return f"{', '.join(missing)} not among the rule's offsets ({listed})."
    return None
