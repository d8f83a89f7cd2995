"""HTML pieces of the trainings admin: local times as a person reads them, the player grid and the
reminder timeline shown on a training's page."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from reminders.api import occurrence_state
from trainings.models import RunOutcome, Training
from trainings.selectors import timeline_reached, training_player_grid, training_timeline


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


def player_grid_html(training: Training) -> SafeString:
    """Each invited player's answers and pushes for the training's change page."""
    if training.pk is None or training._state.adding:
        return format_html("<p>{}</p>", "Shown once the training is saved.")
    zone = training.zone

    def answered(at: datetime | None, declined: bool, how: str = "") -> SafeString:
        if at is not None:
            return format_html('<span class="grid-ok">✓ {}</span>{}', local_time(at, zone), _how(how))
        return (
            format_html("<span>{}</span>", "—")
            if declined
            else format_html('<span class="grid-owed">{}</span>', "owed")
        )

    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                row.player,
                format_html(
                    "{} ({}){}", row.invitation, local_time(row.responded_at, zone), _how(row.invitation_how)
                )
                if row.responded_at
                else row.invitation,
                answered(row.pre_answered_at, row.declined, row.pre_how),
                answered(row.post_answered_at, row.declined, row.post_how),
                row.reminders_received,
                f"{row.last_push}, {local_time(row.last_push_at, zone)}" if row.last_push else "—",
            )
            for row in training_player_grid(training=training)
        ),
    )
    return format_html(
        '<table class="player-grid"><thead><tr><th>player</th><th>invitation</th>'
        "<th>pre questionnaire</th><th>post questionnaire</th><th>reminders received</th>"
        "<th>last push</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        rows,
    )


def _how(how: str) -> SafeString:
    """How an answer came, under it in the grid ("from the notification, 3 min after the 60-min reminder")."""
    return format_html('<br><small class="grid-how">{}</small>', how) if how else format_html("")


def reminder_timeline_html(training: Training) -> SafeString:
    """The training's reminders per rule: when each fires (local time), its state, whom it reached."""
    if training.pk is None or training._state.adding:
        return format_html("<p>{}</p>", "Scheduled when the training is saved.")
    entries = training_timeline(training=training)
    reached = timeline_reached(training=training, occurrence_keys=[e.occurrence_key for e in entries])
    zone = training.zone
    by_rule: dict[str, list[Any]] = {}
    for entry in entries:
        by_rule.setdefault(entry.rule, []).append(entry)
    if not by_rule:
        return format_html("<p>{}</p>", "No reminders (cancelled, or every instant is past).")
    sections = format_html_join(
        "",
        '<div class="timeline-rule"><h3>{}</h3><table><thead><tr><th>fires at ({})</th><th>status</th>'
        "<th>outcome</th><th>reached</th></tr></thead><tbody>{}</tbody></table></div>",
        (
            (
                rule,
                training.time_zone,
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
