"""What a questionnaire asks and what an answer to it may be: one definition per team and phase (the
team's own questionnaire, trainings.models.Questionnaire, or the built-in questions of
trainings/answers/presets.py), and the one check every way an answer comes in calls (an answer link's
POST, the email page, a coach in the admin, the API): every required question answered, nothing but the
definition's questions, each value in its range. An empty answer is refused: it would record the
questionnaire as answered and stop the player's reminders.

A definition is read by its revision (a fresh number on every edit, so a process never checks an answer
against questions a coach has changed since: the one-statement answer of a link writes only while the
revision it checked against is the team's, trainings/answers/following.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any
from uuid import UUID

from django.utils import translation

from trainings.answers.presets import DEFAULTS, PRESETS, SCALE, TEXT_MAX_CHARS, QuestionSpec
from trainings.models import Question, Questionnaire


@dataclass(frozen=True)
class Definition:
    revision: int  # 0: the built-in questions (no questionnaire of the team's own)
    phase: str
    questions: tuple[QuestionSpec, ...]

    def of(self, key: str) -> QuestionSpec | None:
        return next((q for q in self.questions if q.id == key), None)


class AnswersRefused(ValueError):
    """The answers do not fit the questionnaire: `errors` by question id ("" for the answer as a whole)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{key or 'answers'}: {reason}" for key, reason in errors.items()))
        self.errors = errors

    def as_field_errors(self) -> dict[str, Any]:
        """As an API's 400 says it: under `answers`, each question's reason (or the whole answer's)."""
        if "" in self.errors:
            return {"answers": [self.errors[""]]}
        return {"answers": {key: [reason] for key, reason in self.errors.items()}}


def built_in(phase: str) -> Definition:
    return Definition(0, phase, tuple(PRESETS[key] for key in DEFAULTS.get(phase, ())))


def definition_of(team_id: int, phase: str) -> Definition:
    """The questions the team asks in this phase (its own questionnaire, or the built-in ones)."""
    own = Questionnaire.objects.filter(team_id=team_id, phase=phase).values_list("pk", "revision").first()
    if own is None:
        return built_in(phase)
    return _read(own[0], own[1], phase)


@lru_cache(maxsize=1024)
def _read(questionnaire_id: int, revision: int, phase: str) -> Definition:
    """A questionnaire's questions at a revision (a revision is never reused: cached for good)."""
    return Definition(revision, phase, tuple(_spec(q) for q in Question.objects.filter(
        questionnaire_id=questionnaire_id)))  # fmt: skip


def _spec(question: Question) -> QuestionSpec:
    if question.preset in PRESETS:
        return replace(PRESETS[question.preset], id=question.key, required=question.required)
    labels = tuple((value, label) for value, label in ((question.minimum, question.minimum_label),
                   (question.maximum, question.maximum_label)) if label and value is not None)  # fmt: skip
    return QuestionSpec(question.key, question.text, question.text, question.type, question.minimum,
                        question.maximum, labels, question.required)  # fmt: skip


def answers_valid(definition: Definition, answers: dict[str, Any]) -> dict[str, Any]:
    """The answers as stored (texts trimmed, optional questions left empty left out); AnswersRefused
    naming each question and its reason otherwise. A kind with no questions of its own (one a deployment
    adds to trainings/planning/kinds.py without built-in questions) takes any answers but none."""
    if not definition.questions:
        if not answers:
            raise AnswersRefused({"": "an empty answer is refused."})
        return answers
    if all(value is None or (isinstance(value, str) and not value.strip()) for value in answers.values()):
        raise AnswersRefused({"": "an empty answer is refused: answer the questions."})
    errors: dict[str, str] = {key: "not a question of this questionnaire." for key in answers
                              if definition.of(key) is None}  # fmt: skip
    kept: dict[str, Any] = {}
    for question in definition.questions:
        value = answers.get(question.id)
        if value is None or (isinstance(value, str) and not value.strip()):
            if question.required:
                errors[question.id] = "an answer is required."
            continue
        reason = _refusal(question, value)
        if reason:
            errors[question.id] = reason
        else:
            kept[question.id] = value.strip() if isinstance(value, str) else value
    if errors:
        raise AnswersRefused(errors)
    return kept


def _refusal(question: QuestionSpec, value: Any) -> str:
    if question.type == SCALE:
        low, high = question.minimum, question.maximum
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number from {low} to {high}."
        if low is not None and high is not None and not low <= value <= high:
            return f"{value} is out of range: from {low} to {high}."
        return ""
    if not isinstance(value, str):
        return "must be a text."
    return f"at most {TEXT_MAX_CHARS} characters." if len(value) > TEXT_MAX_CHARS else ""


def questions_body(definition: Definition, language: str) -> list[dict[str, Any]]:
    """The questions as the answer link's GET gives them, in `language` (a coach's own text as typed)."""
    return _body(definition, language)


@lru_cache(maxsize=512)
def _body(definition: Definition, language: str) -> list[dict[str, Any]]:
    with translation.override(language):
        return [
            {"id": q.id, "text": str(q.text), "short": str(q.short), "type": q.type, "minimum": q.minimum,
             "maximum": q.maximum, "labels": [{"value": v, "label": str(label)} for v, label in q.labels],
             "required": q.required}
            for q in definition.questions
        ]  # fmt: skip


def form_answers(form: Mapping[str, str], definition: Definition) -> dict[str, Any]:
    """A form's answers (the email page's, the admin's: a field `q-<id>` per question) as the check takes
    them: a scale's choice as a whole number, a question left empty left out (the check then says whether
    it was required)."""
    answers: dict[str, Any] = {}
    for question in definition.questions:
        value = form.get(f"q-{question.id}", "").strip()
        if value:
            answers[question.id] = int(value) if question.type == SCALE and _whole(value) else value
    return answers


def _whole(value: str) -> bool:
    return value.lstrip("-").isdigit() and len(value) <= 6


def form_questions(
    definition: Definition, language: str, values: dict[str, Any], errors: dict[str, str]
) -> list[dict[str, Any]]:
    """Each question with what the form shows: its choices (value and words) and the value to check."""
    shown = []
    for question in questions_body(definition, language):
        labels = {label["value"]: label["label"] for label in question["labels"]}
        choices = []
        if question["type"] == SCALE and question["minimum"] is not None and question["maximum"] is not None:
            choices = [(v, labels.get(v, "")) for v in range(question["minimum"], question["maximum"] + 1)]
        value = values.get(question["id"], "")
        shown.append({**question, "choices": choices, "value": "" if value is None else str(value),
                      "error": errors.get(question["id"], "")})  # fmt: skip
    return shown


# The one-statement answer of a link (trainings/answers/following.py): per training and phase, the team and
# the definition a process last checked against. A guess: the statement writes only if the training's
# team and its questionnaire's revision are still these, and tells them otherwise.
_GUESSES: dict[tuple[UUID, str], tuple[int, Definition]] = {}
_GUESSES_MAX = 8192


def guess(training_id: UUID, phase: str) -> tuple[int, Definition] | None:
    return _GUESSES.get((training_id, phase))


def learn(training_id: UUID, phase: str, team_id: int) -> Definition:
    """The team's definition, read now, kept as the training's guess."""
    definition = definition_of(team_id, phase)
    if len(_GUESSES) >= _GUESSES_MAX:  # forgotten at once (a guess costs one read): no order to keep
        _GUESSES.clear()
    _GUESSES[(training_id, phase)] = (team_id, definition)
    return definition


@dataclass(frozen=True)
class Guessed:
    """The one-statement answer's check: the guess it was made against (`revision` -1: none, or the
    answers refused, so nothing is written and the answer is checked again as any other way checks it,
    once the link is known to be open) and the answers to write."""

    team: int
    revision: int
    checked: dict[str, Any]

    def holds(self, team_id: int, revision: int) -> bool:
        """Whether the statement's row says the training's team and questionnaire are the ones guessed."""
        return (team_id, revision) == (self.team, self.revision)


def guessed_check(training_id: UUID, phase: str, answers: dict[str, Any]) -> Guessed:
    known = guess(training_id, phase)
    if known is None:
        return Guessed(0, -1, answers)
    team, definition = known
    try:
        return Guessed(team, definition.revision, answers_valid(definition, answers))
    except AnswersRefused:
        return Guessed(team, -1, answers)
