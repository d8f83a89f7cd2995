"""DeliveredPush folds into PushSend (delivery 0002, issue 45): a database holding today's finished-push
rows, migrated forward, finds every one of those pushes finished in PushSend, so none is sent again; and
the migration goes back too."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from delivery.gateway.records import sends_recorded

BEFORE = [("delivery", "0001_tables_from_trainings")]
AT = dt.datetime(2030, 1, 1, 12, tzinfo=dt.UTC)


def _before(executor: MigrationExecutor) -> Any:
    """The models just before the fold: delivery's at 0001, the other apps' as they are now."""
    others = [n for n in executor.loader.graph.leaf_nodes() if n[0] != "delivery"]
    return executor.loader.project_state([*BEFORE, *others]).apps


def _leaves() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _todays_rows(apps: Any) -> dict[str, int]:
    """One of each kind of finished push today's gateway leaves, and one push still under way."""
    player = apps.get_model("trainings", "Player").objects.create(name="Alice")
    Device = apps.get_model("delivery", "Device")
    phone = Device.objects.create(player=player, platform="ios", provider="apns", token="a" * 64)
    tablet = Device.objects.create(player=player, platform="ios", provider="apns", token="b" * 64)
    PushSend = apps.get_model("delivery", "PushSend")
    Delivered = apps.get_model("delivery", "DeliveredPush")

    def send(key: str, device: object, status: str) -> None:
        PushSend.objects.create(push_key=key, device=device, player_id=player.pk,
                                provider="apns" if device else "", status=status, recorded_at=AT)  # fmt: skip

    def delivered(key: str, provider: str) -> None:
        Delivered.objects.create(key=key, provider=provider)
        Delivered.objects.filter(key=key).update(delivered_at=AT)

    send("sent.1", phone, "accepted")  # every device answered
    send("sent.1", tablet, "token_dead")
    delivered("sent.1", "apns")
    send("stale.2", None, "stale")  # finished as a whole, its row there
    delivered("stale.2", "stale")
    send("dead.3", phone, "failed")  # dead-lettered: its devices failed
    send("dead.3", tablet, "failed")
    delivered("dead.3", "dead-letter")
    delivered("bare.4", "apns+fcm")  # finished, no send row (none left by today's gateway; kept anyway)
    delivered("none.5", "no_device")
    send("open.6", phone, "accepted")  # under way: the tablet's send to retry, not finished
    return {"player": player.pk, "phone": phone.pk, "tablet": tablet.pk}


@pytest.mark.django_db(transaction=True)
def test_every_finished_push_of_today_is_found_finished_in_the_sends_after_the_migration() -> None:
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(BEFORE)
        ids = _todays_rows(_before(executor))

        executor = MigrationExecutor(connection)
        leaves = executor.loader.graph.leaf_nodes()
        executor.migrate(leaves)
        assert "delivery_deliveredpush" not in connection.introspection.table_names()
        new = executor.loader.project_state(leaves).apps
        rows = new.get_model("delivery", "PushSend").objects.order_by("push_key", "pk")
        assert list(rows.values_list("push_key", "device_id", "provider", "status", "recorded_at")) == [
            ("bare.4", None, "apns+fcm", "given_up", AT),
            ("dead.3", ids["phone"], "apns", "failed", AT),
            ("dead.3", ids["tablet"], "apns", "failed", AT),
            ("dead.3", None, "", "given_up", AT),
            ("none.5", None, "", "no_device", AT),
            ("open.6", ids["phone"], "apns", "accepted", AT),
            ("sent.1", ids["phone"], "apns", "accepted", AT),
            ("sent.1", ids["tablet"], "apns", "token_dead", AT),
            ("stale.2", None, "", "stale", AT),
        ]
        # What the gateway reads before it sends: the push-level rows say done; a push finished by its
        # devices has each device's outcome, so nothing is left to send it (delivery/gateway/sender.py).
        done, recorded = sends_recorded({"sent.1", "stale.2", "dead.3", "bare.4", "none.5", "open.6"})
        assert done == {"stale.2", "dead.3", "bare.4", "none.5"}
        assert sorted((k, d) for k, d, _ in recorded) == [
            ("open.6", ids["phone"]), ("sent.1", ids["phone"]), ("sent.1", ids["tablet"]),
        ]  # fmt: skip
    finally:
        _leaves()


@pytest.mark.django_db(transaction=True)
def test_the_fold_goes_back_too() -> None:
    """Unapplied: DeliveredPush again, with a row per push finished as a whole (a `given_up` row is a
    dead-lettered push again); the pushes finished by their devices' sends need none."""
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        _todays_rows(_before(executor))
        _leaves()
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        old: Any = _before(executor)
        delivered = old.get_model("delivery", "DeliveredPush").objects.order_by("key")
        assert list(delivered.values_list("key", "provider")) == [
            ("bare.4", "apns+fcm"), ("dead.3", "dead-letter"), ("none.5", "no_device"),
            ("stale.2", "stale"),
        ]  # fmt: skip
        assert not old.get_model("delivery", "PushSend").objects.filter(status="given_up").exists()
    finally:
        _leaves()
