"""What an adaptive experiment's variants must be (checked when it starts): no variant reminds more often
than the rule (every player gets at most the rule's number of pushes), and each of its instants falls
inside the kind's answer window."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _

from trainings.models import ReminderRule
from trainings.planning import kinds
from trainings.planning.offsets import parse_offsets


def adaptive_variants_check(rule: ReminderRule, variants: Sequence[tuple[str, list[str]]]) -> None:
    """ValidationError naming `variants` when an arm would remind more often than the rule, or at an
    instant outside the kind's answer window (after it closes)."""
    kind, own = kinds.of(rule.kind), len(rule.parsed_offsets())
    epoch = timezone.now()
    times = SimpleNamespace(start=epoch, end=epoch)
    span = kind.closes(times) - kind.anchor_of(times)  # how far after the anchor the window closes
    for label, texts in variants:
        offsets = parse_offsets(texts)
        name = label or _("a variant")
        if len(offsets) > own:
            words = _("%(variant)s: %(count)d reminders, more than the rule's %(own)d (an adaptive "
                      "experiment never sends more pushes than the rule)")  # fmt: skip
            raise ValidationError({"variants": words % {"variant": name, "count": len(offsets), "own": own}})
        if kind.sign > 0 and any(offset.approximate() >= span for offset in offsets):
            words = _("%(variant)s: an offset falls after the answer window closes")
            raise ValidationError({"variants": words % {"variant": name}})
