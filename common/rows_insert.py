"""New rows of one model in one INSERT ... RETURNING, without the ORM's insert compiler.

`bulk_create` spends more CPU compiling a handful of rows (field by field, then UNNEST arrays on
PostgreSQL) than the database spends storing them; a training's creation writes three jobs and three
links this way. The values are the ones `bulk_create` writes: each field's `pre_save` (defaults,
auto_now/auto_now_add) and `get_db_prep_save`, and the instances come back saved with their ids.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

from common.prepared import prepared_run

M = TypeVar("M", bound=Model)


# More rows than this go through `bulk_create`: its compiler's cost is spread over them, and its
# UNNEST statement (one per call, whatever the count) stays the same size.
SMALL = 100


@lru_cache(maxsize=2 * SMALL)
def _insert_sql(model: type[Model], rows: int) -> tuple[str, tuple[Field, ...]]:
    opts = model._meta
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    fields = tuple(f for f in opts.concrete_fields if f is not opts.auto_field)
    columns = ", ".join(quote(str(f.column)) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # Names from the model's meta; every value is a bound parameter.
    sql = f"INSERT INTO {quote(opts.db_table)} ({columns}) VALUES {', '.join([row] * rows)}"  # noqa: S608
    return sql, fields


def insert_values(objs: Sequence[Model]) -> tuple[str, list[Any]]:
    """`INSERT INTO table (columns) VALUES (...), ...` for new instances of one model, and its parameters:
    every concrete field but an auto id, valued as `bulk_create` values it (`pre_save`, which also fills
    auto_now and auto_now_add on the instances, then `get_db_prep_save`)."""
    connection = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs a lookup per field
    sql, fields = _insert_sql(type(objs[0]), len(objs))
    params: list[Any] = []
    for obj in objs:
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]
        params += [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    return sql, params


def mark_saved(objs: Sequence[Model], using: str | None = None) -> None:
    """What `save` and `bulk_create` do to an instance once its row is written (its one home)."""
    for obj in objs:
        state = obj._state  # Django has no public way to mark an instance written by a statement of our own
        state.adding = False
        state.db = using or DEFAULT_DB_ALIAS


def rows_insert(objs: Sequence[M]) -> list[M]:
    """Insert new, unsaved instances of one model with an auto id; they come back saved, ids set, in order.

    Like `bulk_create`, no signal is sent and a broken constraint raises IntegrityError in the caller's
    transaction. More than SMALL rows, or elsewhere than PostgreSQL, this is `bulk_create`.
    """
    if not objs:
        return []
    model = type(objs[0])
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql" or model._meta.auto_field is None or len(objs) > SMALL:
        return model._default_manager.bulk_create(objs)
    sql, params = insert_values(objs)
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {connection.ops.quote_name(str(model._meta.pk.column))}", params)
        ids = cursor.fetchall()
    for obj, (value,) in zip(objs, ids, strict=True):
        obj.pk = value
    mark_saved(objs)
    return list(objs)


def rows_insert_linked(objs: Sequence[M], links: Sequence[Model], *, key: str, via: str) -> list[M]:
    """`rows_insert(objs)` and, in the same statement on PostgreSQL, `links[i]` pointing at `objs[i]`
    through its foreign key `via` (set here): one round trip instead of two. `key` is a unique field of
    `objs`, which the statement matches them on. Everything comes back saved, ids set.
    """
    if len(links) != len(objs):
        raise ValueError("one link per row")
    connection = connections[DEFAULT_DB_ALIAS]
    if not objs or connection.vendor != "postgresql" or len(objs) > SMALL:
        rows_insert(objs)
        for obj, link in zip(objs, links, strict=True):
            setattr(link, via, obj)
        rows_insert(links)
        return list(objs)
    quote = connection.ops.quote_name
    model, link_model = type(objs[0]), type(links[0])
    key_column = quote(_column(model, key))
    pk, link_pk = quote(str(model._meta.pk.column)), quote(str(link_model._meta.pk.column))
    via_column = quote(_column(link_model, via))
    sql, params = insert_values(objs)
    fields = [
        f for f in link_model._meta.concrete_fields if f is not link_model._meta.auto_field and f.name != via
    ]
    columns = [quote(str(f.column)) for f in fields]
    for link in links:
        link._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]
    names = [f"c{i}" for i in range(len(fields))]
    row = "(" + ", ".join(["%s"] * (len(fields) + 1)) + ")"
    for obj, link in zip(objs, links, strict=True):
        params += [f.get_db_prep_save(f.pre_save(link, True), connection) for f in fields]
        params.append(getattr(obj, key))
    # Names from the models' meta; every value is a bound parameter.
    statement = (
        f"WITH parent AS ({sql} RETURNING {pk}, {key_column}), "  # noqa: S608
        f"link AS (INSERT INTO {quote(link_model._meta.db_table)} ({', '.join([*columns, via_column])}) "
        f"SELECT {', '.join(f'v.{n}' for n in names)}, parent.{pk} "
        f"FROM (VALUES {', '.join([row] * len(links))}) AS v({', '.join([*names, 'k'])}) "
        f"JOIN parent ON parent.{key_column} = v.k RETURNING {link_pk}, {via_column}) "
        f"SELECT parent.{key_column}, parent.{pk}, link.{link_pk} "
        f"FROM parent JOIN link ON link.{via_column} = parent.{pk}"
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        ids = {k: (obj_pk, link_pk_value) for k, obj_pk, link_pk_value in cursor.fetchall()}
    for obj, link in zip(objs, links, strict=True):
        obj.pk, link.pk = ids[getattr(obj, key)]
        setattr(link, via, obj)
    mark_saved(objs)
    mark_saved(links)
    return list(objs)


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    if not isinstance(field, Field):
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return str(field.column)


def rows_insert_many(
    model: type[Model], columns: Sequence[str], rows: Sequence[Sequence[Any]], *, prepared: bool = False
) -> None:
    """Insert plain rows (values for `columns`, attribute names of `model`), skipping any that conflict with
    a unique constraint (`bulk_create(..., ignore_conflicts=True)`).

    On PostgreSQL the rows travel as one JSON array parameter, read back by `jsonb_array_elements` and cast
    to each column's type: one statement and one parameter however many rows, where `bulk_create` builds
    a model instance and a dozen bound parameters per row (the push gateway writes a row per device send).
    Values are what JSON holds, datetimes (ISO 8601 text) and None.

    `prepared`: the statement is bound on the server and prepared once per connection, for a caller that
    runs it often with few rows (the gateway's recorder, tens of sends a commit), whose planning would
    cost PostgreSQL as much as the rows. Behind a transaction-pooling proxy that needs its prepared
    statement support (PgBouncer 1.21+, `max_prepared_statements`), as the answer links' statements do.
    """
    if not rows:
        return
    connection = connections[DEFAULT_DB_ALIAS]
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    fields = [by_attname[name] for name in columns]
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            [model(**dict(zip(columns, row, strict=True))) for row in rows], ignore_conflicts=True
        )
        return
    quote = connection.ops.quote_name
    names = ", ".join(quote(str(f.column)) for f in fields)
    picks = ", ".join(f"(r->>{i})::{f.cast_db_type(connection)}" for i, f in enumerate(fields))
    # Names from the model's meta; the rows are one bound parameter.
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({names}) SELECT {picks} "  # noqa: S608
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(r, n) ORDER BY n ON CONFLICT DO NOTHING"
    )
    params = [json.dumps(rows, separators=(",", ":"), default=_json_value)]
    if prepared:
        prepared_run(connection, sql, params)
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _json_value(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} in a row")
