"""The figures as CSV, one row per offset (and per kind's unreminded answers) or per player: what the page
shows, for a spreadsheet. Columns as in docs/analytics.md; names that start like a formula are written as
text (common/spreadsheet.py)."""

from __future__ import annotations

from datetime import date

from common.spreadsheet import csv_text
from trainings.analytics.figures import Effectiveness, PlayerFigures

OFFSET_COLUMNS = ("since", "until", "teams", "kind", "rule", "offset", "last", "sent", "reached",
                  "answered", "answered_15", "answered_60", "answered_in_window", "answer_rate",
                  "median_minutes_low", "median_minutes_high")  # fmt: skip
PLAYER_COLUMNS = ("since", "until", "teams", "player", "name", "asked", "before_reminder", "after_reminder",
                  "after_last", "never", "late_or_never_rate", "chronic")  # fmt: skip


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def offsets_csv(result: Effectiveness, *, since: date, until: date, teams: str) -> str:
    rows = []
    for row in [*result.offsets, *result.unreminded]:
        f, median = row.figures, row.median
        rows.append(
            [since, until, teams, row.kind, row.rule or "(no reminder)", row.offset, row.last, f.sent,
             f.reached, f.answered, f.within_15, f.within_60, f.in_window, _rate(row.answer_rate),
             median[0] if median else "", (median[1] or "") if median else ""]
        )  # fmt: skip
    return csv_text(OFFSET_COLUMNS, rows)


def players_csv(rows: list[PlayerFigures], *, since: date, until: date, teams: str) -> str:
    return csv_text(
        PLAYER_COLUMNS,
        (
            [since, until, teams, row.player, row.name, row.figures.asked, row.figures.before_reminder,
             row.figures.after_reminder, row.figures.after_last, row.figures.never,
             _rate(row.late_or_never_rate), row.chronic]
            for row in rows
        ),
    )  # fmt: skip
