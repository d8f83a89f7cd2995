"""`id__any=[...]`: one array parameter instead of an IN list of thousands of placeholders.

Every mark after a delivery filters by the ids of its batch (up to REMINDERS_BATCH_SIZE). On PostgreSQL
`id = ANY(%s)` sends them as one array, so neither psycopg nor the planner handles a 1,000-item list;
elsewhere it is the usual `IN (...)`.

The array goes as its literal text (`'{1,2,3}'`, `'{"a","b"}'`), which PostgreSQL reads as the column's
array type: psycopg's list adapter runs a regular expression and a few calls per element (a few µs each,
and the push gateway passes every key of a round), the text costs one join.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Lookup


def array_literal(values: Iterable[Any]) -> str | None:
    """PostgreSQL's text of a one-dimensional array of ints or strings (each string quoted, its quotes and
    backslashes escaped); None for anything else (psycopg adapts those)."""
    parts: list[str] = []
    for value in values:
        if type(value) is int:
            parts.append(str(value))
        elif type(value) is str:
            parts.append('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            return None
    return "{" + ",".join(parts) + "}"


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def as_postgresql(self, compiler: Any, connection: Any) -> Any:
        """PostgreSQL (its compiler calls `as_postgresql`): one array parameter, however many values."""
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = list(self.rhs)
        literal = array_literal(values)
        return f"{lhs} = ANY(%s)", [*lhs_params, values if literal is None else literal]

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = list(self.rhs)
        if not values:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]
