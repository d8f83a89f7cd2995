"""The figures as CSV, one row per offset (and per kind's unreminded answers) or per player: what the page
shows, for a spreadsheet. Columns as in docs/analytics.md."""

from __future__ import annotations

import csv
import io
from datetime import date

from trainings.analytics.figures import Effectiveness, PlayerFigures

OFFSET_COLUMNS = ("since", "until", "teams", "kind", "rule", "offset", "last", "sent", "reached",
                  "answered", "answered_15", "answered_60", "answered_in_window", "answer_rate",
                  "median_minutes_low", "median_minutes_high")  # fmt: skip
PLAYER_COLUMNS = ("since", "until", "teams", "player", "name", "asked", "before_reminder", "after_reminder",
                  "after_last", "never", "late_or_never_rate", "chronic")  # fmt: skip


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def offsets_csv(result: Effectiveness, *, since: date, until: date, teams: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(OFFSET_COLUMNS)
    for row in [*result.offsets, *result.unreminded]:
        f, median = row.figures, row.median
        writer.writerow(
            [since, until, teams, row.kind, row.rule or "(no reminder)", row.offset, row.last, f.sent,
             f.reached, f.answered, f.within_15, f.within_60, f.in_window, _rate(row.answer_rate),
             median[0] if median else "", (median[1] or "") if median else ""]
        )  # fmt: skip
    return out.getvalue()


def players_csv(rows: list[PlayerFigures], *, since: date, until: date, teams: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(PLAYER_COLUMNS)
    for row in rows:
        f = row.figures
        writer.writerow(
            [since, until, teams, row.player, row.name, f.asked, f.before_reminder, f.after_reminder,
             f.after_last, f.never, _rate(row.late_or_never_rate), row.chronic]
        )  # fmt: skip
    return out.getvalue()
