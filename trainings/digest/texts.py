"""The coach's messages in the coach's language and zone: "U15 Training 18:00: 3 of 14 still owe the
pre-training questionnaire: Anna, Ben, Chloé; 2 declined".

The rule's template gives the title and the head of each training's line (its placeholders, rendered as a
player's push is, with the coach's zone: trainings/rendering.py); this module writes what follows, in the
language the template was picked in (English when it has no words for it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from trainings import kinds
from trainings.digest.owed import Owed, TrainingOwed
from trainings.models import ReminderTemplate, Training
from trainings.offsets import Offset
from trainings.rendering import Addressee, Rendered, push_render

# At most this many names per kind; the rest are counted ("and 4 more").
NAMES_SHOWN = 10

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "owe": "{missing} of {asked} still owe {what}: {names}",
        "owe_one": "{missing} of {asked} still owes {what}: {names}",
        "more": "and {count} more",
        "declined": "{count} declined",
        "none": "everyone has answered",
        "late": "{player} declined, {left} before the start",
        "sep": ": ",
        "PRE": "the pre-training questionnaire",
        "POST": "the post-training questionnaire",
        "INVITATION": "an answer to the invitation",
    },
    "fr": {
        "owe": "{missing} sur {asked} doivent encore {what} : {names}",
        "owe_one": "{missing} sur {asked} doit encore {what} : {names}",
        "more": "et {count} autres",
        "declined": "désistements : {count}",
        "none": "tout le monde a répondu",
        "late": "{player} s'est désisté, {left} avant le début",
        "sep": " : ",
        "PRE": "remplir le questionnaire d'avant séance",
        "POST": "remplir le questionnaire d'après séance",
        "INVITATION": "répondre à l'invitation",
    },
}


def words(language: str) -> dict[str, str]:
    return WORDS.get(language.lower().split("-")[0], WORDS["en"])


def _owed_text(owed: Owed, said: dict[str, str]) -> str:
    shown = list(owed.names[:NAMES_SHOWN])
    if len(owed.names) > NAMES_SHOWN:
        shown.append(said["more"].format(count=len(owed.names) - NAMES_SHOWN))
    pattern = said["owe_one"] if len(owed.names) == 1 else said["owe"]
    what = said.get(owed.kind) or _label(owed.kind)
    return pattern.format(missing=len(owed.names), asked=owed.asked, what=what, names=", ".join(shown))


def _label(code: str) -> str:
    return kinds.of(code).label.lower() if code in kinds.KINDS else code


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
    said = words(first.language)
    lines = []
    for item in trainings:
        head = first.body if item is trainings[0] else _head(templates, item.training, coach).body
        parts = [_owed_text(owed, said) for owed in item.owed] or [said["none"]]
        if item.declined:
            parts.append(said["declined"].format(count=item.declined))
        lines.append(head + said["sep"] + "; ".join(parts))
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
    said = words(head.language)
    minutes = max(1, round(before.total_seconds() / 60))
    hours, rest = divmod(minutes, 60)
    left = f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"
    body = head.body + said["sep"] + said["late"].format(player=player, left=left)
    return Rendered(language=head.language, title=head.title, body=body)
