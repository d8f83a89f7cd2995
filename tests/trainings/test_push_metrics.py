"""trainings_pushes_total: pushes queued by kind when a reminder fires, then the gateway's outcome per push;
and the gateway's heartbeat, which the "push gateway silent" alert watches."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.conf import settings

from delivery.channels.logging import LoggingProvider
from delivery.channels.providers import Providers
from delivery.gateway.consumer import gateway_run
from delivery.gateway.queue import queue_publisher_at
from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import PlayerFactory
from tests.ops.scrape import delta, scrape, value
from tests.trainings.conftest import fire
from trainings.models import ReminderRule, Training
from trainings.planning.writes import training_create
from trainings.selectors import job_key

pytestmark = [pytest.mark.django_db, pytest.mark.rabbitmq]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def test_a_fired_reminder_counts_one_queued_push_per_pending_player(
    team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training: Training = training_create(
        team=team, title="Speed", start=START, end=START + dt.timedelta(minutes=90),
        time_zone="Europe/Paris", location="Stadium",
    )  # fmt: skip
    key = job_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    occurrence = Occurrence.objects.get(job__key=key, fire_at=START - dt.timedelta(minutes=75))
    before = scrape()

    assert fire(occurrence).delivered == 1

    after = scrape()
    assert delta(before, after, "trainings_pushes_total", kind="PRE", outcome="queued") == 3  # three players
    assert delta(before, after, "reminders_occurrences_total", outcome="delivered", callback="handler") == 1
    assert len(drain_queue(push_queue, expect=3)) == 3


def test_the_gateway_counts_each_outcome_by_kind_and_beats(push_queue: str) -> None:
    player = PlayerFactory()  # one FCM device; without FCM credentials the logging provider stands in
    body = {
        "schema": "trainings.push/2", "player": player.pk, "title": "t", "body": "b",
        "language": "en", "training": "7d0c0a4e-0000-4000-8000-000000000000", "rule": "r",
        "fire_at": "2030-06-11T14:30:00+00:00",
    }  # fmt: skip
    bodies = [
        {**body, "idempotency_key": "k.1", "kind": "PRE"},
        {**body, "idempotency_key": "k.1", "kind": "PRE"},  # redelivered: a duplicate
        {**body, "idempotency_key": "k.2", "kind": "INVITATION"},
        {"kind": "made-up", "no": "fields"},  # malformed: rejected, its kind not trusted as a label
    ]
    transport = queue_publisher_at(settings.REMINDERS_CALLBACK_BROKER_URL)
    transport.deliver([Delivery(i, f"m{i}", "job", START, 1, push_queue, b) for i, b in enumerate(bodies)])
    transport.close()
    before = scrape()
    started = time.time()

    gateway_run(providers=Providers(standin=LoggingProvider()), max_messages=4, idle_seconds=5)

    after = scrape()
    pushes = "trainings_pushes_total"
    assert delta(before, after, pushes, kind="PRE", outcome="delivered") == 1
    assert delta(before, after, pushes, kind="PRE", outcome="duplicate") == 1
    assert delta(before, after, pushes, kind="INVITATION", outcome="delivered") == 1
    assert delta(before, after, pushes, kind="unknown", outcome="rejected") == 1
    assert (
        delta(before, after, "trainings_push_provider_sends_total", provider="logging", outcome="accepted")
        == 2
    )
    assert value(after, "trainings_gateway_heartbeat_timestamp_seconds") >= started
