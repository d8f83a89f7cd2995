"""HTML pieces of the trainings admin: local times as a person reads them, the player grid and the
reminder timeline shown on a training's page."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from reminders.api import occurrence_state
from trainings.answers.questionnaires import Definition, definition_of
from trainings.models import ReminderRule, RunOutcome, Training
from trainings.planning import kinds
from trainings.planning.defaults import ALL_RULES
from trainings.planning.windows import CLOSED, NOT_YET, OPEN
from trainings.reminding.outcomes import timeline_reached
from trainings.selectors import Answered, PlayerRow, training_player_grid, training_timeline

# The seeded rules' slugs (trainings/planning/defaults.py), the coaches' too: their kind's name says it all.
DEFAULT_SLUGS = frozenset(spec["slug"] for spec in ALL_RULES)


def rule_label(rule: ReminderRule) -> str:
    """A rule as a coach reads it: "Pre-training questionnaire", not "pre-questionnaire (pre)"."""
    kind = kinds.of(rule.kind).label_text
    return kind if rule.slug in DEFAULT_SLUGS else f"{kind}: {rule.slug}"


def invitations_html(accepted: int, declined: int, pending: int) -> SafeString:
    """The training list's invitations column: accepted ✓ / declined ✗ / pending, titled in words."""
    return format_html(
        '<span title="{}">{} ✓</span> / <span title="{}">{} ✗</span> / '
        '<span title="{}" class="pending">{}</span>',
        gettext("accepted"), accepted, gettext("declined"), declined, gettext("pending"),
        gettext("{n} pending").format(n=pending),
    )  # fmt: skip


def answered_owed_html(answered: int, owed: int, state: str | None) -> SafeString:
    """A questionnaire column: owed only while it is open ("not yet" before, "missed" after, nothing owed
    for a cancelled training, `state` None)."""
    done = format_html('<span title="{}">{} ✓</span>', gettext("answered"), answered)
    if state is None:
        return done
    if state == NOT_YET:
        return format_html('<span class="quiet">{}</span>', gettext("not yet open"))
    if state == CLOSED:
        return format_html('{} <span class="missed">{}</span>', done, gettext("{n} missed").format(n=owed))
    return format_html('{} <span class="pending">{}</span>', done, gettext("{n} owed").format(n=owed))


def local_time(instant: datetime | None, zone: ZoneInfo | None = None) -> str:
    """An instant as a person reads it: local wall time to the second, with the zone's abbreviation."""
    if instant is None:
        return "—"
    shown = timezone.localtime(instant, zone)
    return f"{shown:%a %Y-%m-%d %H:%M:%S} {shown.tzname()}"


def local_html(instant: datetime | None, zone: ZoneInfo) -> SafeString:
    """The same for a narrow list column: the date above the time."""
    if instant is None:
        return format_html("{}", "—")
    shown = timezone.localtime(instant, zone)
    return format_html("{}<br>{} {}", f"{shown:%a %Y-%m-%d}", f"{shown:%H:%M:%S}", shown.tzname())


def answers_html(answers: Any, definition: Definition | None = None) -> SafeString:
    """A questionnaire's answers as labelled fields ("Sleep quality: 5"), not `{"sleep_quality": 5}`: the
    questionnaire's questions first, in its order, then any other key an older answer holds."""
    if not isinstance(answers, dict) or not answers:
        return format_html("{}", "—" if not answers else str(answers))
    return format_html('<dl class="answers">{}</dl>', format_html_join("", "<dt>{}</dt><dd>{}</dd>",
                       _labelled(answers, definition)))  # fmt: skip


def _labelled(answers: dict[str, Any], definition: Definition | None) -> Iterator[tuple[str, str]]:
    """(question's short name, value with its words) per answer: the definition's, then the others."""
    asked = definition.questions if definition else ()
    for question in asked:
        if question.id in answers:
            words = dict(question.labels).get(answers[question.id])
            yield (
                str(question.short),
                f"{answers[question.id]} ({words})" if words else _shown(answers[question.id]),
            )
    known = {q.id for q in asked}
    for key, value in answers.items():
        if key not in known:
            yield str(key).replace("_", " ").capitalize(), _shown(value)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    return "—" if value is None else str(value)


def answers_line(answers: dict[str, Any], definition: Definition) -> str:
    """The answers in one line for the grid's cell: "Sleep quality 5 · Fatigue 3 · Notes: knee"."""
    return " · ".join(f"{name} {value}" for name, value in _labelled(answers, definition))


def player_grid_html(training: Training, windows: Mapping[str, str] | None = None) -> SafeString:
    """Each invited player's answers and pushes for the training's change page: a column per questionnaire
    kind of the kinds table (`windows`: each kind's answer window by code, open when not given).

    An answer is "owed" only while its questionnaire is open: "not yet" before, "missed" after, and on a
    cancelled training nothing is owed.
    """
    if training.created_at is None:  # auto_now_add: filled by the first save
        return format_html("<p>{}</p>", gettext("Shown once the training is saved."))
    zone = training.zone
    questionnaires = kinds.questionnaire_kinds()
    windows = windows or {}

    asked = {kind.code: definition_of(training.team_id, kind.code) for kind in questionnaires}

    def answered(cell: Answered, declined: bool, window: str, code: str) -> SafeString:
        if cell.at is not None:
            line = answers_line(cell.values, asked[code]) if cell.values else ""
            values = format_html('<div class="grid-values">{}</div>', line) if line else ""
            return format_html(
                '<span class="grid-ok">✓ {}</span>{}{}', local_time(cell.at, zone), _how(cell.how), values
            )
        if declined or training.cancelled:
            return format_html("<span>{}</span>", "—")
        if window == NOT_YET:
            return format_html('<span class="grid-later">{}</span>', gettext("not yet open"))
        if window == CLOSED:
            return format_html('<span class="grid-missed">{}</span>', gettext("missed"))
        return format_html('<span class="grid-owed">{}</span>', gettext("owed"))

    def cells(row: PlayerRow) -> Iterator[SafeString]:
        yield format_html("{}", row.player)
        yield (
            format_html(
                "{} ({}){}", row.invitation, local_time(row.responded_at, zone), _how(row.invitation_how)
            )
            if row.responded_at
            else format_html("{}", row.invitation)
        )
        for kind in questionnaires:
            yield answered(row.answers[kind.code], row.declined, windows.get(kind.code, OPEN), kind.code)
        yield (
            format_html('{} <small class="grid-standin">(+{} accepted by a stand-in, nothing sent)</small>',
                        row.reminders_received, row.reminders_standin)
            if row.reminders_standin
            else format_html("{}", row.reminders_received)
        )  # fmt: skip
        yield format_html(
            "{}", f"{row.last_push}, {local_time(row.last_push_at, zone)}" if row.last_push else "—"
        )

    rows = format_html_join(
        "",
        "<tr>{}</tr>",
        (
            (format_html_join("", "<td>{}</td>", ((c,) for c in cells(row))),)
            for row in training_player_grid(training=training)
        ),
    )
    headings = [
        gettext("player"),
        gettext("invitation"),
        *(gettext("{kind} questionnaire").format(kind=kind.short) for kind in questionnaires),
        gettext("reminders that reached a phone"),
        gettext("last push, on the phone side"),
    ]
    return format_html(
        '<table class="player-grid"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        format_html_join("", "<th>{}</th>", ((h,) for h in headings)),
        rows,
    )


def _how(how: str) -> SafeString:
    """How an answer came, under it in the grid ("from the notification, 3 min after the 60-min reminder")."""
    return format_html('<br><small class="grid-how">{}</small>', how) if how else format_html("")


def reminder_timeline_html(training: Training) -> SafeString:
    """The training's reminders per rule: when each fires (local time), its state, whom it reached."""
    if training.created_at is None:  # auto_now_add: filled by the first save
        return format_html("<p>{}</p>", gettext("Scheduled when the training is saved."))
    entries = training_timeline(training=training)
    reached = timeline_reached(training=training, occurrence_keys=[e.occurrence_key for e in entries])
    zone = training.zone
    by_rule: dict[str, list[Any]] = {}
    labels = {
        rule.slug: rule_label(rule)
        for rule in ReminderRule.objects.filter(slug__in={e.rule for e in entries})
    }
    for entry in entries:
        by_rule.setdefault(labels.get(entry.rule, entry.rule), []).append(entry)
    if not by_rule:
        return format_html("<p>{}</p>", gettext("No reminders (cancelled, or every instant is past)."))
    sections = format_html_join(
        "",
        '<div class="timeline-rule"><h3>{}</h3><table><thead><tr><th>{}</th><th>{}</th>'
        "<th>{}</th><th>{}</th></tr></thead><tbody>{}</tbody></table></div>",
        (
            (
                rule,
                gettext("fires at ({zone})").format(zone=training.time_zone),
                gettext("status"),
                gettext("outcome"),
                gettext("reached a phone"),
                format_html_join(
                    "",
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    (
                        (
                            local_time(e.fire_at, zone),
                            occurrence_state(e.status, e.attempts),
                            RunOutcome(e.outcome).label if e.outcome else "",
                            ", ".join(reached.get(e.occurrence_key, [])) or "—",
                        )
                        for e in rule_entries
                    ),
                ),
            )
            for rule, rule_entries in by_rule.items()
        ),
    )
    return sections
