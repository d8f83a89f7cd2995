"""`id__any=[...]`: one array parameter instead of an IN list of thousands of placeholders.

Every mark after a delivery filters by the ids of its batch (up to REMINDERS_BATCH_SIZE). On PostgreSQL
`id = ANY(%s)` sends them as one array, so neither psycopg nor the planner handles a 1,000-item list;
elsewhere it is the usual `IN (...)`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Lookup


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = list(self.rhs)
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", [*lhs_params, values]
        if not values:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]
