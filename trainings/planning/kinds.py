"""What a reminder kind is, written once per kind: the table every other module reads.

A kind says where its reminders count from (the training's start or end, before or after it), when a
reminder is no use any more (its window closes: the push expires), which answer it waits for, who on the
training's list it asks (the recipient rule, one `Q` over `Invitation` rows that both the per-training
query and the batched fire path run), what the app opens and what people read. Rules (`ReminderRule`),
pushes (`Push.kind`) and answers (`QuestionnaireAnswer.phase`) store a kind's `code`; their choices are
read from this table when asked, so adding a kind is one `register(Kind(...))` here and its default rule
in trainings/planning/defaults.py, with no migration (the columns carry no database list of codes: that list
is this table, and `Kind` checks a code fits the columns).

A kind's answer window (what the coach's pages call "not yet", "owed", "missed") opens with its rule's
first reminder (or when the training is created, `open_from_creation`) and closes at its anchor (before
it) or with its last reminder (after it); nothing is sent once its pushes have expired (`closes`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol, cast

from django.apps import apps
from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils.choices import CallableChoiceIterator
from django.utils.translation import gettext
from django.utils.translation import gettext_noop as _

from trainings.digest import timing
from trainings.planning.offsets import Offset, offset_between


class TrainingTimes(Protocol):
    """What a kind reads of a training: its times (`trainings.models.Training` has them; the table does
    not import the models, which read their choices from it)."""

    @property
    def start(self) -> datetime: ...

    @property
    def end(self) -> datetime: ...


# Every column that stores a code is this wide (ReminderRule.kind, Push.kind, QuestionnaireAnswer.phase).
CODE_MAX_LENGTH = 10
_CODE = re.compile(rf"^[A-Z][A-Z0-9_]{{0,{CODE_MAX_LENGTH - 1}}}$")


class Answer(Protocol):
    """What a kind's reminders wait for, said of one `Invitation` row (its training and player), and how
    a player gives it in one tap: the APNs category the app registers, the actions it offers."""

    @property
    def expects(self) -> Literal["answers", "response"]:
        """`response`: accepted or denied (a link's actions); `answers`: a questionnaire's answers."""
        ...

    @property
    def category(self) -> str: ...

    @property
    def actions(self) -> tuple[tuple[str, str], ...]:
        """(action id the app registers, response the link records); empty: the app opens its screen."""
        ...

    def missing(self) -> Q:
        """The player on this invitation has not given this answer yet."""
        ...


@dataclass(frozen=True)
class Questionnaire:
    """A questionnaire answer of this kind (`QuestionnaireAnswer.phase` = the kind's code)."""

    phase: str
    expects: Literal["answers", "response"] = "answers"
    category: str = "TRAINING_QUESTIONNAIRE"
    actions: tuple[tuple[str, str], ...] = ()

    def missing(self) -> Q:
        # By name: trainings.models reads its choices from this module.
        answered = apps.get_model("trainings", "QuestionnaireAnswer").objects.filter(
            training_id=OuterRef("training_id"), player_id=OuterRef("player_id"), phase=self.phase
        )
        return ~Q(Exists(answered))


@dataclass(frozen=True)
class Response:
    """The invitation's own answer: ACCEPTED or DENIED (not PENDING any more)."""

    expects: Literal["answers", "response"] = "response"
    category: str = "TRAINING_INVITATION"
    actions: tuple[tuple[str, str], ...] = (("accept", "accepted"), ("decline", "denied"))

    def missing(self) -> Q:
        return Q(status="PENDING")


# Who on a training's list a kind asks, as a condition on `Invitation` rows.
EVERYONE_INVITED = Q()
NOT_DECLINED = ~Q(status__in=["DENIED", "WAITLISTED"])  # nor waiting for a place (trainings/squads/)


@dataclass(frozen=True)
class Closes:
    """A window's close as data, not only a function: the training's start or end plus a span (read per
    call: a setting may give it). Being data, it can be said in SQL too (trainings/answers/following.py
    records a followed link in one statement that checks the window)."""

    anchor: Literal["start", "end"]
    span: Callable[[], timedelta] = timedelta

    def __call__(self, training: TrainingTimes) -> datetime:
        return (training.end if self.anchor == "end" else training.start) + self.span()


def _post_questionnaire_hours() -> timedelta:
    return timedelta(hours=settings.TRAININGS_POST_QUESTIONNAIRE_HOURS)


at_start = Closes("start")
_post_questionnaire_closes = Closes("end", _post_questionnaire_hours)


@dataclass(frozen=True)
class Kind:
    """One reminder kind (or notice kind, `rule=False`: sent by the app itself, never by a rule)."""

    code: str  # stored in rules, pushes and answers: never renamed
    label: str  # what coaches and operators read: an English msgid (`label_text` in the reader's language)
    anchor: Literal["start", "end"]  # the training time its offsets count from
    sign: Literal[-1, 1]  # -1: offsets before the anchor, +1: after it
    closes: Callable[[TrainingTimes], datetime]  # when its pushes are no use any more (their expiry)
    answer: Answer | None  # what its reminders wait for; None: a notice, nobody answers it
    screen: str  # what the app opens for its pushes (`screen` in their data)
    audience: Q = field(default=NOT_DECLINED)  # who on the list it asks, while the answer is missing
    rule: bool = True  # operators may make rules of it
    # The texts people read are given in English, as msgids (marked with gettext_noop); every other language
    # comes from the catalogs in locale/ (docs/development.md, "Languages"), never from this table.
    # What an answer link asks ({title}, {start_date}, {start_time}, {time_zone}).
    questions: Mapping[str, str] = field(default_factory=dict)
    # The same asked of a guardian about their player (also {player}): trainings/models/guardians.py.
    guardian_questions: Mapping[str, str] = field(default_factory=dict)
    open_from_creation: bool = False  # its answer window opens when the training exists
    # Who its messages go to: the players (their guardians too), or the team's coaches (trainings/digest/).
    to: Literal["players", "coaches"] = "players"
    # A coaches' kind's instants for (training, rule), from its team's settings (trainings/digest/timing.py)
    # or its squad (trainings/squads/); a players' kind's are its rule's offsets.
    instants: Callable[..., list[tuple[datetime, Offset]]] | None = None
    # A notice's (title, body) in English ({title}, {start_date}, {start_time}, {time_zone}):
    # trainings/reminding/rendering.py, `notice_render`. Rules' texts are their templates instead.
    notice: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _CODE.match(self.code):
            raise ValueError(f"kind code {self.code!r}: 1-{CODE_MAX_LENGTH} of A-Z, 0-9, _ (a letter first)")
        if self.rule and self.answer is None and self.to == "players":
            raise ValueError(f"kind {self.code}: a rule's reminders wait for an answer")
        if not self.rule and "en" not in self.notice:
            raise ValueError(f"kind {self.code}: a notice says something, in English at least")

    def anchor_of(self, training: TrainingTimes) -> datetime:
        return training.end if self.anchor == "end" else training.start

    def window(self, training: TrainingTimes, span: timedelta) -> tuple[datetime | None, datetime]:
        """When its answers are awaited, for reminders up to `span` from the anchor: (opens, closes);
        opens None: since the training exists."""
        anchor = self.anchor_of(training)
        if self.sign < 0:
            return (None if self.open_from_creation else anchor - span), anchor
        return (None if self.open_from_creation else anchor), anchor + span

    def at_creation(
        self, training: TrainingTimes, instants: Iterable[datetime]
    ) -> tuple[datetime, Offset] | None:
        """The one reminder sent when the training is created, in place of the ones it came too late for,
        with its offset (how far the anchor is from it): for a kind whose window opens at creation (the
        invitation) when every one of its rule's `instants` is at or before `created_at` and the training
        starts after it; otherwise None. Without it nobody would be asked at all.

        Derived from the training's row, so the firing handler recognises it and a move or a rescan can
        want the same instant again (trainings.planning.scheduling keeps it only while its job holds it).
        """
        created = getattr(training, "created_at", None)
        if not self.open_from_creation or self.instants is not None or self.to != "players":
            return None
        if created is None or created >= training.start or any(instant > created for instant in instants):
            return None
        return created, offset_between(self.anchor_of(training), created)

    @property
    def short(self) -> str:
        """Its name in a column heading of the coach's pages ("pre" answers, "lineup" questionnaire)."""
        return self.code.lower().replace("_", " ")

    @property
    def label_text(self) -> str:
        """The label in the active language (the admin's: the coach's or the browser's)."""
        return gettext(self.label)

    @property
    def when(self) -> str:
        """Where its offsets are, in words: "before the start", "after the end"."""
        return f"{'before' if self.sign < 0 else 'after'} the {self.anchor}"

    def pending(self) -> Q:
        """The recipient rule over `Invitation` rows: asked, and the answer still missing.

        `trainings.selectors` runs it for one training and for a chunk of them; being on the team is the
        selectors' condition for every kind. A coaches' kind chases no player.
        """
        if self.to == "coaches":
            return Q(pk__in=[])
        if self.answer is None:
            return self.audience
        return self.audience & self.answer.missing()


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if kind.code in KINDS and KINDS[kind.code] != kind:
        raise ValueError(f"kind {kind.code} is already registered")
    KINDS[kind.code] = kind
    return kind


def of(code: str) -> Kind:
    """The kind stored as `code`; KeyError naming it when no kind has that code (any more)."""
    try:
        return KINDS[code]
    except KeyError:
        raise KeyError(f"no reminder kind {code!r} (registered: {', '.join(KINDS)})") from None


def rule_kinds() -> Iterator[Kind]:
    """The players' reminder kinds (what players answer, mute and are counted for)."""
    return (kind for kind in KINDS.values() if kind.rule and kind.to == "players")


def coach_kinds() -> Iterator[Kind]:
    """The coaches' kinds (the digest, the morning summary, the late-decline alert)."""
    return (kind for kind in KINDS.values() if kind.rule and kind.to == "coaches")


# Choices of the columns that store codes, read when asked (callables: a new kind needs no migration).
_WHERE = {
    (-1, "start"): _("before start"),
    (1, "start"): _("after start"),
    (-1, "end"): _("before end"),
    (1, "end"): _("after end"),
}


def rule_choices() -> list[tuple[str, str]]:
    return [
        (kind.code, f"{kind.label_text} ({gettext(_WHERE[kind.sign, kind.anchor])})") for kind in rule_kinds()
    ]


def any_rule_choices() -> list[tuple[str, str]]:
    """A rule's kind: the players' kinds and the coaches'."""
    coaches = gettext("coaches")
    return rule_choices() + [(kind.code, f"{kind.label_text} ({coaches})") for kind in coach_kinds()]


def push_choices() -> list[tuple[str, str]]:
    return [(kind.code, kind.label_text) for kind in KINDS.values()]


def questionnaire_kinds() -> list[Kind]:
    """The kinds answered by a questionnaire, in table order: one column group each on the coach's pages."""
    return [kind for kind in KINDS.values() if isinstance(kind.answer, Questionnaire)]


def questionnaire_choices() -> list[tuple[str, str]]:
    return [(kind.code, kind.label_text) for kind in questionnaire_kinds()]


def live(choices: Callable[[], list[tuple[str, str]]]) -> Sequence[tuple[str, str]]:
    """Choices for a serializer field, read from the table each time the field is built (DRF builds its
    fields per serializer instance, iterating what it was given)."""
    return cast(Sequence[tuple[str, str]], CallableChoiceIterator(choices))


PRE = register(
    Kind(
        code="PRE",
        label=_("Pre-training questionnaire"),
        anchor="start",
        sign=-1,
        closes=at_start,
        answer=Questionnaire("PRE"),
        screen="questionnaire",
        questions={
            "en": _(
                "Your pre-training questionnaire for {title} on {start_date} at {start_time} ({time_zone})."
            ),
        },
        guardian_questions={
            "en": _(
                "{player}'s pre-training questionnaire for {title} on {start_date} at {start_time} "
                "({time_zone})."
            ),
        },
    )
)
POST = register(
    Kind(
        code="POST",
        label=_("Post-training questionnaire"),
        anchor="end",
        sign=1,
        closes=_post_questionnaire_closes,
        answer=Questionnaire("POST"),
        screen="questionnaire",
        questions={
            "en": _("Your post-training questionnaire for {title} of {start_date} ({time_zone})."),
        },
        guardian_questions={
            "en": _("{player}'s post-training questionnaire for {title} of {start_date} ({time_zone})."),
        },
    )
)
INVITATION = register(
    Kind(
        code="INVITATION",
        label=_("Invitation"),
        anchor="start",
        sign=-1,
        closes=at_start,
        answer=Response(),
        screen="invitation",
        audience=EVERYONE_INVITED,
        questions={
            "en": _("Will you come to {title} on {start_date} at {start_time} ({time_zone})?"),
        },
        guardian_questions={
            "en": _("Will {player} come to {title} on {start_date} at {start_time} ({time_zone})?"),
        },
        open_from_creation=True,
    )
)


def _notice(code: str, label: str, notice: Mapping[str, tuple[str, str]]) -> Kind:
    """A notice of a change to a training (trainings/reminding/notices.py): nobody answers it, it opens the
    training, no rule sends it, and it is of no use once the training has started. Its English texts are
    msgids."""
    return register(Kind(code=code, label=label, anchor="start", sign=-1, closes=at_start, answer=None,
                         screen="training", rule=False, notice=notice))  # fmt: skip


# "The training moved": to players already reminded, who have not declined.
MOVED = _notice("MOVED", _("Training moved"), {
    "en": (
        _("Training moved: {title}"),
        _("{title} now starts on {start_date} at {start_time} ({time_zone})."),
    ),
})  # fmt: skip
# "The training is cancelled": to invited players who accepted or whom a push of it reached, never to one who
# declined.
CANCELLED = _notice("CANCELLED", _("Training cancelled"), {
    "en": (
        _("Training cancelled: {title}"),
        _("{title} on {start_date} at {start_time} ({time_zone}) is cancelled."),
    ),
})  # fmt: skip


# The coaches' kinds (trainings/digest/): to a team's coaches, at the team's times (`Team.digest_*`); they
# wait for no answer and close at the start.
def _to_coaches(code: str, label: str, instants: Callable[..., list[tuple[datetime, Offset]]]) -> Kind:
    return register(
        Kind(
            code=code,
            label=label,
            anchor="start",
            sign=-1,
            closes=at_start,
            answer=None,
            screen="coach_digest",
            to="coaches",
            instants=instants,
        )
    )


DIGEST = _to_coaches("DIGEST", _("Coach's digest before a training"), timing.digest_instants)
SUMMARY = _to_coaches("SUMMARY", _("Coach's morning summary"), timing.morning_instants)
# Fires on the answer (trainings/digest/alerts.py): a player declined less than `Team.decline_alert_within`
# before the start.
DECLINED = _to_coaches("DECLINED", _("Late decline alert"), timing.never)
