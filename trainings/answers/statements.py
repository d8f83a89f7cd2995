"""The answer link's statements on PostgreSQL: prepared once per connection, and no health check of their
own.

A followed link runs the same statement every time (trainings/queries.py: a POST opens the link and
records its answer in one), so each is bound on the server and prepared the first time a connection runs
it: later answers skip parsing and planning, which cost PostgreSQL as much as running them. The first
statement of a request is the connection's health check (`common.prepared.prepared_one`). The statements
are idempotent (a read, or a write that changes nothing when repeated), so a repeat after a connection
lost mid-answer records nothing twice.

Prepared statements live in a server session: behind a transaction-pooling proxy (PgBouncer's
`pool_mode = transaction`) they need its `max_prepared_statements` (PgBouncer 1.21 and later).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model

from common.prepared import prepared_one


def fetch_one(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row of one statement, prepared (`prepared_one` on Django's connection)."""
    return prepared_one(connection, sql, params)


_M = TypeVar("_M", bound=Model)
# Per model, an instance as `from_db` makes it with every field deferred: copied for each detached one.
_BLANK: dict[type[Model], Model] = {}


def detached(model: type[_M], related: dict[str, Model] | None = None, /, **values: Any) -> _M:
    """An instance of `model` as the database would give it, with only these fields (attribute names) and
    these related objects (cached as a foreign key caches its object). A copy of a blank instance rather
    than `from_db`: `Model.__init__` fills every field and sends pre_init and post_init, and for a link's
    four objects cost more than its statement. A field not given is deferred: reading it loads it from the
    database rather than inventing a value."""
    blank = _BLANK.get(model)
    if blank is None:
        blank = _BLANK[model] = model.from_db(DEFAULT_DB_ALIAS, [], [])
    instance = copy.copy(blank)
    instance.__dict__.update(values)
    for name, value in (related or {}).items():
        model._meta.get_field(name).set_cached_value(instance, value)  # type: ignore[union-attr]
    return instance  # type: ignore[return-value]
