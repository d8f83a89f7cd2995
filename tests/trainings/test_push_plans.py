"""The gateway's look-up of a round's keys keeps an index plan however big PushSend grows: planned for each
round's 500 literal keys, PostgreSQL read the table whole once it held a few tens of thousands of rows,
once a round. Prepared with the keys bound, it keeps its generic plan, a probe a key."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from delivery.gateway.records import sends_recorded
from delivery.models import PushSend, SendStatus

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_the_gateway_s_look_up_keeps_an_index_plan_once_prepared() -> None:
    now = timezone.now()
    PushSend.objects.bulk_create(
        [
            PushSend(push_key=f"history.{i}", device_id=i, provider="apns", status=SendStatus.ACCEPTED,
                     recorded_at=now)
            for i in range(5_000)
        ],
        batch_size=5_000,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {PushSend._meta.db_table}")
    keys = {f"storm.{i}" for i in range(500)}
    for _ in range(7):  # PostgreSQL plans the first five executions for their values
        assert sends_recorded(keys) == (set(), [])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%FROM {PushSend._meta.db_table}%"],
        )
        [(name, generic, custom)] = cursor.fetchall()  # one statement a round: the sends say what is done
        assert generic >= 2 and custom == 5
        literal = "{" + ",".join(sorted(keys)) + "}"
        cursor.execute(f"EXPLAIN EXECUTE {name}(%s)", [literal])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "pushsend_unique_per_device" in plan and "Seq Scan" not in plan, plan
