"""How far a reminder goes: a rule's escalation offsets (every channel a player has) and a team's daily cap
on pushes per player (reminding/escalation.py and reminding/daily_cap.py apply them; docs/escalation.md)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from trainings.planning.offsets import Offset, OffsetError, parse_offsets


def validate_escalate(value: object) -> None:
    """A list of offsets such as ["6h"] ([] for none); that they are the rule's own is the rule's check."""
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise ValidationError('a list of the rule\'s offsets such as ["6h"] ([] for none).')
    try:
        parse_offsets(value)
    except OffsetError as exc:
        raise ValidationError(str(exc)) from None


class Escalation(models.Model):
    """A reminder rule's offsets at which a player who still owes the answer gets the reminder on every
    channel they have (push and email), not only the push."""

    escalate = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_escalate],
        help_text=_('Offsets at which the reminder goes by push and email, e.g. ["6h"]; [] for none.'),
        verbose_name=_("escalate"),
    )

    class Meta:
        abstract = True

    def full_clean(self, *args: Any, **kwargs: Any) -> None:
        """The fields' checks, then: every escalation offset is one the rule (or an experiment arm) reminds
        at; stored parsed and de-duplicated ("360m" stays as typed: offsets compare as written)."""
        if self.escalate in (None, ""):  # the admin's empty box: none
            self.escalate = []
        super().full_clean(*args, **kwargs)
        try:
            wanted = parse_offsets(self.escalate)
            known = {str(offset) for offset in self.all_offsets()}  # type: ignore[attr-defined]
        except OffsetError:
            return
        missing = [str(offset) for offset in wanted if str(offset) not in known]
        if missing:
            listed = ", ".join(sorted(known))
            error = f"{', '.join(missing)} not among the rule's offsets ({listed})."
            raise ValidationError({"escalate": error})
        self.escalate = [str(offset) for offset in wanted]

    def escalates_at(self, offset: Offset | str | None) -> bool:
        """Whether the reminder at `offset` goes on every channel of the recipient."""
        return offset is not None and isinstance(self.escalate, list) and str(offset) in self.escalate


class DailyPushCap(models.Model):
    """A team's cap on non-critical pushes per player (each person reminded for them) per calendar day in
    that person's zone; empty: no cap."""

    daily_push_cap = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text=_(
            "At most this many pushes a day per player (their own calendar day); further reminders are held "
            "back, critical ones still go. Empty: no cap."
        ),
        verbose_name=_("daily push cap"),
    )

    class Meta:
        abstract = True
