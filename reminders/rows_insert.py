"""New rows of one model in one INSERT ... RETURNING, without the ORM's insert compiler.

`bulk_create` spends more CPU compiling a handful of rows (field by field, then UNNEST arrays on
PostgreSQL) than the database spends storing them; a training's creation writes three jobs and three
links this way. The values are the ones `bulk_create` writes: each field's `pre_save` (defaults,
auto_now/auto_now_add) and `get_db_prep_save`, and the instances come back saved with their ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)


CHUNK = 500  # rows per statement


@lru_cache(maxsize=64)
def _insert_sql(model: type[Model], rows: int) -> tuple[str, tuple[Field, ...]]:
    opts = model._meta
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    fields = tuple(f for f in opts.concrete_fields if f is not opts.auto_field)
    columns = ", ".join(quote(str(f.column)) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # Names from the model's meta; every value is a bound parameter.
    table, pk = quote(opts.db_table), quote(str(opts.pk.column))
    sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * rows)} RETURNING {pk}"  # noqa: S608
    return sql, fields


def rows_insert(objs: Sequence[M]) -> list[M]:
    """Insert new, unsaved instances of one model with an auto id; they come back saved, ids set, in order.

    Like `bulk_create`, no signal is sent and a broken constraint raises IntegrityError in the caller's
    transaction. Elsewhere than PostgreSQL this is `bulk_create`.
    """
    if not objs:
        return []
    model = type(objs[0])
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return model._default_manager.bulk_create(objs)
    for start in range(0, len(objs), CHUNK):
        _insert(model, objs[start : start + CHUNK])
    return list(objs)


def _insert(model: type[Model], objs: Sequence[Model]) -> None:
    connection = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs a lookup per field
    sql, fields = _insert_sql(model, len(objs))
    params = []
    for obj in objs:
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]
        params += [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = cursor.fetchall()
    for obj, (pk,) in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias
