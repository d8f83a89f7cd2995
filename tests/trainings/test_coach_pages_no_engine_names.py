"""A coach's admin pages speak the coach's words: no page a coach can open shows a rule's engine slug
(`coach-digest`) or a push's or push send's idempotency key, after a real reminder and a real digest went
through the engine and the gateway."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from delivery.gateway.consumer import PushSender
from delivery.models import Device, PushSend
from reminders.models import Occurrence
from tests.clients import logged_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.peers.apns_fcm import ApnsPeer
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from trainings.access import coach_group_ensure
from trainings.models import Coach, CoachPush, Push, ReminderRule, Team
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def u15() -> Team:
    team = TeamFactory(name="U15", time_zone="Europe/Paris", digest_before="2h")
    for name in ("Anna", "Dan"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    return team


@pytest.fixture
def coach(u15: Team) -> Any:
    user = UserFactory(username="camille", is_staff=True)
    user.groups.add(coach_group_ensure())
    camille = Coach.objects.create(user=user, language="en", time_zone="Europe/Paris")
    Device.objects.create(coach=camille, provider="apns", platform="ios", token="camille-iphone")
    u15.coaches.add(user)
    return user


def _fired_and_sent(training: Any, slug: str, sender: PushSender, queue: str, settings: Any) -> None:
    rule = ReminderRule.objects.get(slug=slug)
    occurrence = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=rule)).earliest(
        "fire_at"
    )
    assert fire(occurrence).delivered == 1
    sender.handle(left_on(queue, settings.TRAININGS_PUSH_QUEUE))


def _pages(client: Client) -> dict[str, str]:
    """Every admin page the coach's index links to, each list's first row, and the admin's own pages the
    lists link to (the analytics page, a training's page)."""
    index = client.get("/admin/").content.decode()
    seen: dict[str, str] = {}
    todo = sorted(set(re.findall(r'href="(/admin/[a-z_]+/[a-z_]+/)"', index)))
    for url in todo:
        response = client.get(url)
        if response.status_code != 200:
            continue
        body = response.content.decode()
        seen[url] = body
        rows = re.findall(rf'href="({re.escape(url)}[^"/]+/change/[^"]*)"', body)
        for row in rows[:2]:
            seen[row] = client.get(row.replace("&amp;", "&")).content.decode()
    return seen


def test_no_page_a_coach_opens_names_a_rule_slug_or_a_push_key(
    u15: Team, coach: Any, file_broker: str, sender: PushSender, apns: ApnsPeer, settings: Any
) -> None:
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(slug="invitation").update(active=False)
    training = training_made(u15, timezone.now() + dt.timedelta(hours=3), title="Speed session")
    _fired_and_sent(training, "pre-questionnaire", sender, file_broker, settings)
    _fired_and_sent(training, "coach-digest", sender, file_broker, settings)
    assert Push.objects.exists() and PushSend.objects.exists() and CoachPush.objects.exists()
    secrets = {
        *(
            slug for slug in ReminderRule.objects.values_list("slug", flat=True) if "-" in slug
        ),  # not "invitation"
        *Push.objects.values_list("key", flat=True),
        *Push.objects.values_list("occurrence_key", flat=True),
        *PushSend.objects.values_list("push_key", flat=True),
        *CoachPush.objects.values_list("key", flat=True),
        *CoachPush.objects.values_list("occurrence_key", flat=True),
    }

    pages = _pages(logged_in(coach))

    assert len(pages) > 10, sorted(pages)
    shown = {(url, secret) for url, body in pages.items() for secret in secrets if secret in body}
    assert not shown, sorted(shown)
