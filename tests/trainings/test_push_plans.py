"""The gateway's look-ups of a round's keys keep an index plan however big DeliveredPush and PushSend grow:
planned for each round's 500 literal keys, PostgreSQL read both tables whole once they held a few tens of
thousands of rows, once a round. Prepared with the keys bound, it keeps its generic plan, a probe a key."""

from __future__ import annotations

import pytest
from django.db import connection

from delivery.gateway.records import sends_recorded
from delivery.models import DeliveredPush

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_the_gateway_s_look_ups_keep_an_index_plan_once_prepared() -> None:
    DeliveredPush.objects.bulk_create(
        [DeliveredPush(key=f"history.{i}", provider="apns") for i in range(5_000)], batch_size=5_000
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {DeliveredPush._meta.db_table}")
    keys = {f"storm.{i}" for i in range(500)}
    for _ in range(7):  # PostgreSQL plans the first five executions for their values
        assert sends_recorded(keys) == (set(), [])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%FROM {DeliveredPush._meta.db_table}%"],
        )
        [(generic, custom)] = cursor.fetchall()
    assert generic >= 2 and custom == 5
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%FROM {DeliveredPush._meta.db_table}%"],
        )
        [(name,)] = cursor.fetchall()
        literal = "{" + ",".join(sorted(keys)) + "}"
        cursor.execute(f"EXPLAIN EXECUTE {name}(%s)", [literal])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "deliveredpush_unique_key" in plan and "Seq Scan" not in plan, plan
