"""The devices and send records moved from the trainings app to delivery with every row (issue 41):
a database holding them as trainings' tables, migrated forward, has them all as delivery's, with their
ids, their links (a send's device, a device's player) and the permissions granted on them."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

MOVED = ("Device", "PushSend", "DeliveredPush", "PushMinute", "GatewayHeartbeat")


def _before_the_move() -> list[tuple[str, str]]:
    """Trainings just before its models left (found by name, so renumbering at merge keeps this test);
    migrating back to it unapplies delivery's migrations, which depend on it."""
    graph = MigrationExecutor(connection).loader.graph
    node = next(
        n for n in graph.nodes if n[0] == "trainings" and n[1].endswith("_delivery_tables_leave_trainings")
    )
    return sorted(parent.key for parent in graph.node_map[node].parents)


@pytest.mark.django_db(transaction=True)
def test_todays_rows_are_all_found_in_delivery_s_tables_after_the_migration() -> None:
    executor = MigrationExecutor(connection)
    before = _before_the_move()
    try:
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        assert not [
            m for m in ("delivery_device", "delivery_pushsend") if m in connection.introspection.table_names()
        ]
        player = old.get_model("trainings", "Player").objects.create(name="Alice")
        Device = old.get_model("trainings", "Device")
        phone = Device.objects.create(player=player, platform="ios", provider="apns", token="a" * 64)
        dead = Device.objects.create(
            player=player, platform="android", provider="fcm", token="f" * 40,
            disabled_at=dt.datetime(2030, 1, 1, tzinfo=dt.UTC), disabled_reason="Unregistered",
        )  # fmt: skip
        at = dt.datetime(2030, 1, 1, 12, tzinfo=dt.UTC)
        send = old.get_model("trainings", "PushSend").objects.create(
            push_key="push.1",
            device=phone,
            player_id=player.pk,
            provider="apns",
            status="accepted",
            recorded_at=at,
        )
        old.get_model("trainings", "PushSend").objects.create(
            push_key="push.2",
            device=None,
            player_id=player.pk,
            provider="",
            status="no_device",
            recorded_at=at,
        )
        finished = old.get_model("trainings", "DeliveredPush").objects.create(key="push.1", provider="apns")
        old.get_model("trainings", "PushMinute").objects.create(
            minute=at, accepted=3, not_reached=1, standin=2
        )
        old.get_model("trainings", "GatewayHeartbeat").objects.create(name="host:1", seen_at=at)
        # A permission granted on the old devices stays granted (the content type moves with the table).
        # (Today's tables of contenttypes and auth: this state predates the content type's `name` removal.)
        device_type, _ = ContentType.objects.get_or_create(app_label="trainings", model="device")
        permission, _ = Permission.objects.get_or_create(
            content_type=device_type, codename="view_device", defaults={"name": "Can view device"}
        )
        Group.objects.create(name="device keepers").permissions.add(permission)

        executor = MigrationExecutor(connection)
        leaves = executor.loader.graph.leaf_nodes()
        executor.migrate(leaves)
        new = executor.loader.project_state(leaves).apps
        tables = set(connection.introspection.table_names())
        # DeliveredPush folded into PushSend since (delivery 0002, tests/delivery/test_finished_in_sends.py).
        assert {f"delivery_{m.lower()}" for m in MOVED if m != "DeliveredPush"} <= tables
        assert "delivery_deliveredpush" not in tables
        assert not {f"trainings_{m.lower()}" for m in MOVED} & tables

        devices = new.get_model("delivery", "Device").objects.order_by("pk")
        assert list(devices.values_list("pk", "player_id", "provider", "disabled_reason")) == [
            (phone.pk, player.pk, "apns", ""),
            (dead.pk, player.pk, "fcm", "Unregistered"),
        ]
        sends = new.get_model("delivery", "PushSend").objects.order_by("push_key")
        assert list(sends.values_list("push_key", "device_id", "status")) == [
            ("push.1", phone.pk, "accepted"),
            ("push.2", None, "no_device"),
        ]
        assert sends.get(pk=send.pk).device.player.name == "Alice"  # the links still join
        assert finished.key == "push.1"  # finished by its device's send, which says so on its own
        minute = new.get_model("delivery", "PushMinute").objects.get()
        assert (minute.minute, minute.accepted, minute.not_reached, minute.standin) == (at, 3, 1, 2)
        assert new.get_model("delivery", "GatewayHeartbeat").objects.get().name == "host:1"
        moved_type = new.get_model("contenttypes", "ContentType").objects.get(pk=device_type.pk)
        assert (moved_type.app_label, moved_type.model) == ("delivery", "device")
        assert (
            new.get_model("auth", "Group").objects.get(name="device keepers").permissions.get().pk
            == permission.pk
        )
        # New rows take ids after the old ones (the sequences moved with the tables).
        newer = new.get_model("delivery", "Device").objects.create(
            player_id=player.pk, platform="ios", provider="apns", token="b" * 64
        )
        assert newer.pk > dead.pk
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_move_goes_back_too() -> None:
    """Unapplied, the tables are trainings' again (a rollback of the deploy keeps the rows as well)."""
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(_before_the_move())
        tables = set(connection.introspection.table_names())
        assert {f"trainings_{m.lower()}" for m in MOVED} <= tables
        assert not {f"delivery_{m.lower()}" for m in MOVED} & tables
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
