"""The built-in questions of a sports team's questionnaires, as data: before training a short wellness
check (sleep quality, fatigue, stress, muscle soreness, each 1 to 7 with labelled ends), after it the
session RPE on Foster's version of Borg's CR-10 scale (0 to 10, the words at 0, 1, 2, 3, 4, 5, 7 and 10),
and an optional note to the coach. A team without a questionnaire of its own asks these (DEFAULTS); a
coach's own questionnaire may take any of them (`Question.preset`). Texts are msgids, translated when read.

Pure data (nothing of the apps imported): trainings.models takes the presets' names for its choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

SCALE, TEXT = "scale", "text"
TEXT_MAX_CHARS = 2000  # a note, as the email page's textarea took it


@dataclass(frozen=True)
class QuestionSpec:
    """One question: its id in the answers (`{"fatigue": 3}`), its text and short name, and what it takes:
    an integer of `minimum`..`maximum` (a scale, words at some values) or a text of TEXT_MAX_CHARS."""

    id: str
    text: str | Promise
    short: str | Promise
    type: str = SCALE  # SCALE or TEXT
    minimum: int | None = None
    maximum: int | None = None
    labels: tuple[tuple[int, str | Promise], ...] = field(default=())  # (value, its words)
    required: bool = True


def _wellness(key: str, text: Promise, short: Promise, low: Promise, high: Promise) -> QuestionSpec:
    return QuestionSpec(key, text, short, SCALE, 1, 7, ((1, low), (7, high)))


PRESETS: dict[str, QuestionSpec] = {
    spec.id: spec
    for spec in (
        _wellness("sleep_quality", _("How well did you sleep last night?"), _("Sleep quality"),
                  _("Very badly"), _("Very well")),
        _wellness("fatigue", _("How tired do you feel?"), _("Fatigue"), _("Very fresh"), _("Exhausted")),
        _wellness("stress", _("How stressed do you feel?"), _("Stress"), _("Very relaxed"),
                  _("Very stressed")),
        _wellness("soreness", _("How sore are your muscles?"), _("Muscle soreness"), _("Not sore at all"),
                  _("Very sore")),
        QuestionSpec(
            "rpe", _("How hard was this session for you?"), _("Session RPE (CR-10)"), SCALE, 0, 10,
            ((0, _("Rest")), (1, _("Very, very easy")), (2, _("Easy")), (3, _("Moderate")),
             (4, _("Somewhat hard")), (5, _("Hard")), (7, _("Very hard")), (10, _("Maximal"))),
        ),
        QuestionSpec("notes", _("Anything to tell your coach?"), _("Notes"), TEXT, required=False),
    )
}  # fmt: skip

# What a team without a questionnaire of its own asks, per phase (the kinds' codes).
DEFAULTS: dict[str, tuple[str, ...]] = {
    "PRE": ("sleep_quality", "fatigue", "stress", "soreness", "notes"),
    "POST": ("rpe", "notes"),
}


def preset_choices() -> list[tuple[str, str]]:
    """The presets as a model field's choices (read when the admin shows them: the names translated)."""
    return [(key, str(spec.short)) for key, spec in PRESETS.items()]
