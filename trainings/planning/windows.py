"""When each kind's answer is awaited for a training: what the coach's pages call "not yet", "owed" and
"missed", and which reminder "Remind now" offers first.

The window itself is the kind's (trainings/planning/kinds.py, `Kind.window`): it opens with the kind's
earliest reminder (the rule's largest offset) or when the training exists, and closes at its anchor or with
its last reminder after it. This module measures that span from the training's rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from trainings.models import ReminderRule, Training
from trainings.planning import kinds
from trainings.planning.offsets import OffsetError

NOT_YET, OPEN, CLOSED = "not_yet", "open", "closed"


def _span(rules: Iterable[ReminderRule], kind: str) -> timedelta:
    spans = []
    for rule in rules:
        if rule.kind == kind and rule.active:
            try:
                spans += [offset.approximate() for offset in rule.all_offsets()]
            except OffsetError:
                continue
    return max(spans, default=timedelta(0))


def window_state(training: Training, kind: str, rules: Iterable[ReminderRule], now: datetime) -> str:
    """NOT_YET before the window opens, OPEN inside it, CLOSED after it (or when the training is off)."""
    opens, closes = kinds.of(kind).window(training, _span(rules, kind))
    if training.cancelled or now >= closes:
        return CLOSED
    return NOT_YET if opens is not None and now < opens else OPEN


def open_kind(training: Training, rules: Iterable[ReminderRule], now: datetime) -> str | None:
    """The kind a coach most likely wants to remind of now: an open window of the rules' kinds, those
    whose window opens with a reminder before those open since the training exists (a questionnaire due
    now before the invitation)."""
    rules = list(rules)
    ordered = sorted(kinds.rule_kinds(), key=lambda kind: kind.open_from_creation)
    for kind in ordered:
        if window_state(training, kind.code, rules, now) == OPEN:
            return kind.code
    return None


def open_until(training: Training, rules: Iterable[ReminderRule], now: datetime) -> datetime | None:
    """When the last answer window still open at `now` closes (a post-training questionnaire's, after the
    end); None when none is open. The training list says it in place of "Done"."""
    rules = list(rules)
    closes = [
        kind.window(training, _span(rules, kind.code))[1]
        for kind in kinds.rule_kinds()
        if window_state(training, kind.code, rules, now) == OPEN
    ]
    return max(closes, default=None)
