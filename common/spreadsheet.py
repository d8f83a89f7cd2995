"""CSV as every export leaves the house: a cell a spreadsheet would read as a formula is written as text.

A name a person typed (a player called `=HYPERLINK("https://evil.example", "x")`, a team, a rule) lands in
an operator's or a coach's spreadsheet; Excel, LibreOffice and Google Sheets run a cell that starts with
`=`, `+`, `-` or `@` (and some a tab or carriage return before one) as a formula. OWASP's advice: prefix
such a cell with a single quote, which the spreadsheet shows as text and does not run.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """The value as a safe cell: text that starts like a formula gets a leading `'`. Numbers, dates and
    booleans the export computes stay as they are (a negative count is a number, not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A CSV document: the header, then each row, every cell through `csv_cell`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([csv_cell(name) for name in header])
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return out.getvalue()
