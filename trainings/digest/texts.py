"""The coach's messages in the coach's language and zone: "U15 Training 18:00: 3 of 14 still owe the
pre-training questionnaire: Anna, Ben, Chloé; 2 declined".

The rule's template gives the title and the head of each training's line (its placeholders, rendered as a
player's push is, with the coach's zone: trainings/reminding/rendering.py); this module writes what follows,
in the language the template was rendered in, from the catalogs (locale/).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from functools import lru_cache

from django.utils import translation
from django.utils.translation import gettext_noop as _
from django.utils.translation import ngettext

from common.i18n import spoken, translated
from trainings.digest.owed import Owed, TrainingOwed
from trainings.models import ReminderTemplate, Training
from trainings.planning import kinds
from trainings.planning.offsets import Offset
from trainings.reminding.rendering import Addressee, Rendered, push_render

# At most this many names per kind; the rest are counted ("and 4 more").
NAMES_SHOWN = 10

# What the lines say, as msgids: the catalogs in locale/ translate them.
_NONE = _("everyone has answered")
_LATE = _("{player} declined, {left} before the start")
_LINE = _("{head}: {owed}")  # a training's head (its template's body), then what is owed
# What a player still owes, as the object of "still owe ...".
_OWED = {
    "PRE": _("the pre-training questionnaire"),
    "POST": _("the post-training questionnaire"),
    "INVITATION": _("an answer to the invitation"),
}


@lru_cache(maxsize=1024)
def _plurals(language: str, count: int) -> tuple[str, str, str]:
    """("… still owe …", "and … more", "… declined") for `count` in `language` (the form a count takes is
    the language's: ngettext)."""
    with translation.override(language):
        return (
            ngettext(
                "{missing} of {asked} still owes {what}: {names}",
                "{missing} of {asked} still owe {what}: {names}",
                count,
            ),
            ngettext("and {count} more", "and {count} more", count),
            ngettext("{count} declined", "{count} declined", count),
        )


def _owed_text(owed: Owed, language: str) -> str:
    shown = list(owed.names[:NAMES_SHOWN])
    if len(owed.names) > NAMES_SHOWN:
        rest = len(owed.names) - NAMES_SHOWN
        shown.append(_plurals(language, rest)[1].format(count=rest))
    pattern = _plurals(language, len(owed.names))[0]
    what = _what(owed.kind, language)
    return pattern.format(missing=len(owed.names), asked=owed.asked, what=what, names=", ".join(shown))


def _what(code: str, language: str) -> str:
    if code in _OWED:
        return translated(language, _OWED[code])
    return translated(language, kinds.of(code).label).lower() if code in kinds.KINDS else code


def _head(templates: Sequence[ReminderTemplate], training: Training, coach: Addressee) -> Rendered:
    return push_render(templates=templates, training=training, player=coach, offset=Offset(1, "m"))


def digest_render(
    *, templates: Sequence[ReminderTemplate], coach: Addressee, trainings: Iterable[TrainingOwed]
) -> Rendered | None:
    """The digest (one training) or the morning summary (the day's trainings, by start): a line per
    training saying who still owes what and how many declined; None when nobody owes anything."""
    trainings = sorted(trainings, key=lambda t: t.training.start)
    if not trainings or not any(t.owed for t in trainings):
        return None
    first = _head(templates, trainings[0].training, coach)
    language = spoken(first.language)
    lines = []
    for item in trainings:
        head = first.body if item is trainings[0] else _head(templates, item.training, coach).body
        parts = [_owed_text(owed, language) for owed in item.owed] or [translated(language, _NONE)]
        if item.declined:
            parts.append(_plurals(language, item.declined)[2].format(count=item.declined))
        lines.append(translated(language, _LINE).format(head=head, owed="; ".join(parts)))
    return Rendered(language=first.language, title=first.title, body="\n".join(lines))


def decline_render(
    *,
    templates: Sequence[ReminderTemplate],
    coach: Addressee,
    training: Training,
    player: str,
    before: timedelta,
) -> Rendered:
    """The late-decline alert: "U15 Training 18:00: Anna declined, 2 h 10 min before the start"."""
    head = _head(templates, training, coach)
    language = spoken(head.language)
    minutes = max(1, round(before.total_seconds() / 60))
    hours, rest = divmod(minutes, 60)
    left = f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"
    late = translated(language, _LATE).format(player=player, left=left)
    body = translated(language, _LINE).format(head=head.body, owed=late)
    return Rendered(language=head.language, title=head.title, body=body)
