"""When each questionnaire or RSVP is open for a training: what the coach's pages call "not yet", "owed"
and "missed", and which reminder "Remind now" offers first.

A window opens with the kind's earliest reminder (the rule's largest offset before its anchor; the
invitation as soon as the training exists) and closes at the start (PRE, INVITATION) or with the last
post-training reminder (POST). One table entry per kind, no `if kind ==` elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from trainings import kinds
from trainings.models import ReminderRule, Training
from trainings.offsets import OffsetError

NOT_YET, OPEN, CLOSED = "not_yet", "open", "closed"


@dataclass(frozen=True)
class _Window:
    opens: Callable[[Training, timedelta], datetime | None]  # None: open since the training exists
    closes: Callable[[Training, timedelta], datetime]


_WINDOWS: dict[str, _Window] = {
    kinds.INVITATION.code: _Window(lambda t, span: None, lambda t, span: t.start),
    kinds.PRE.code: _Window(lambda t, span: t.start - span, lambda t, span: t.start),
    kinds.POST.code: _Window(lambda t, span: t.end, lambda t, span: t.end + span),
}


def _span(rules: Iterable[ReminderRule], kind: str) -> timedelta:
    spans = []
    for rule in rules:
        if rule.kind == kind and rule.active:
            try:
                spans += [offset.approximate() for offset in rule.parsed_offsets()]
            except OffsetError:
                continue
    return max(spans, default=timedelta(0))


def window_state(training: Training, kind: str, rules: Iterable[ReminderRule], now: datetime) -> str:
    """NOT_YET before the window opens, OPEN inside it, CLOSED after it (or when the training is off)."""
    window = _WINDOWS[kind]
    span = _span(rules, kind)
    opens = window.opens(training, span)
    if training.cancelled or now >= window.closes(training, span):
        return CLOSED
    return NOT_YET if opens is not None and now < opens else OPEN


def open_kind(training: Training, rules: Iterable[ReminderRule], now: datetime) -> str | None:
    """The kind a coach most likely wants to remind of now: the open questionnaire, else the invitation."""
    rules = list(rules)
    for kind in (kinds.POST.code, kinds.PRE.code, kinds.INVITATION.code):
        if window_state(training, kind, rules, now) == OPEN:
            return str(kind)
    return None
