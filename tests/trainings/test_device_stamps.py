"""A device's `last_success_at` off the sends' path (delivery/gateway/stamps.py): the sends' transaction
writes no device row; the gateway stamps the devices accepted since its last stamp once a minute, with one
UPDATE, and what the device API says is within the documented bound (never later than the acceptance, at
most an hour older)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.db.models import QuerySet
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from delivery.channels.providers import Providers
from delivery.gateway.consumer import Outcome, PushSender
from delivery.gateway.stamps import STAMP_EVERY, SUCCESS_EVERY, Stamps
from delivery.models import Device
from tests.clients import api_as
from tests.factories import PlayerFactory, UserFactory
from tests.trainings.test_gateway import Recorder, _message

pytestmark = pytest.mark.django_db


def _stamp_said(player: Any) -> Any:
    """`last_success_at` as the player's device API says it."""
    [device] = api_as(player.user).get(f"/api/players/{player.pk}/devices/").json()
    return parse_datetime(device["last_success_at"]) if device["last_success_at"] else None


def test_the_gateway_stamps_its_devices_apart_from_the_sends_once_a_minute_within_the_bound() -> None:
    assert timedelta(hours=1) == SUCCESS_EVERY + STAMP_EVERY  # the help text's "within an hour"
    player = PlayerFactory(id=7, name="Seven", user=UserFactory(username="seven"))
    sender = PushSender(Providers(standin=Recorder()))
    try:
        before = timezone.now()
        with CaptureQueriesContext(connection) as sends:
            assert sender.handle([_message("occ-1.7")])[0].outcome == Outcome.DELIVERED
        after = timezone.now()
        assert not [
            q for q in sends.captured_queries if "delivery_device" in q["sql"] and "UPDATE" in q["sql"]
        ]
        assert _stamp_said(player) is None  # not yet: at most STAMP_EVERY later
        assert sender.stamps.due() == 0 and sender.stamps.pending() == 1  # the minute is not up

        sender.stamps.every = 0.0  # the minute is up
        with CaptureQueriesContext(connection) as stamping:
            assert sender.stamps.due() == 1
        assert len(stamping.captured_queries) == 1  # one UPDATE for every device accepted since
        stamped = _stamp_said(player)
        assert stamped is not None and before <= stamped <= after

        # Reached again within SUCCESS_EVERY: the stamp stays (no new row version), still within the bound.
        assert sender.handle([_message("occ-2.7")])[0].outcome == Outcome.DELIVERED
        assert sender.stamps.due() == 0
        assert _stamp_said(player) == stamped
        assert timezone.now() - stamped < SUCCESS_EVERY + STAMP_EVERY
        # One older than SUCCESS_EVERY moves at the next stamp.
        Device.objects.filter(player=player).update(last_success_at=stamped - SUCCESS_EVERY)
        assert sender.handle([_message("occ-3.7")])[0].outcome == Outcome.DELIVERED
        assert _stamp_said(player) > stamped
    finally:
        sender.close()


def test_a_graceful_stop_writes_the_stamps_it_holds() -> None:
    player = PlayerFactory(id=7, name="Seven", user=UserFactory(username="seven"))
    sender = PushSender(Providers(standin=Recorder()))
    try:
        sender.handle([_message("occ-1.7")])
        assert _stamp_said(player) is None
    finally:
        sender.close()
    assert _stamp_said(player) is not None


def test_a_stamp_the_database_refuses_waits_for_the_next_minute(monkeypatch: Any) -> None:
    """Two gateways stamping the same devices may deadlock; the refused one keeps its devices (a stamp
    must not stop the gateway, as an error in the recorder thread would)."""
    device = PlayerFactory(id=7, name="Seven").devices.get()
    stamps = Stamps()
    stamps.add([device.pk], at=timezone.now())

    def refuse(self: QuerySet[Any], **fields: Any) -> int:
        raise OperationalError("deadlock detected")

    real = QuerySet.update
    monkeypatch.setattr(QuerySet, "update", refuse)
    assert stamps.write() == 0 and stamps.pending() == 1
    monkeypatch.setattr(QuerySet, "update", real)
    assert stamps.write() == 1 and Device.objects.get().last_success_at is not None
