from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from reminders.engine.dispatch import ScanResult, occurrences_dispatch_batch
from reminders.models import Occurrence
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory

# The loopback APNs and FCM peers and the sender for the push tests (test_push_*.py).
from tests.trainings.push_fixtures import apns, fcm, file_broker, sender  # noqa: F401
from tests.trainings.seeded import rules  # noqa: F401 - autouse: Seed 000's rules in every test

# The loopback SMTP server for the email tests (test_email_channel.py, test_guardian_email.py).
from tests.trainings.smtp_peer import smtp  # noqa: F401
from trainings.models import Team


@pytest.fixture
def push_queue(settings: Any, queue_name: str) -> str:
    """Pushes go to a unique queue, deleted afterwards."""
    settings.TRAININGS_PUSH_QUEUE = queue_name
    return queue_name


@pytest.fixture
def team(coach: Any) -> Team:
    """A team coached by `coach`, with three active players and one who left."""
    team = TeamFactory(name="U15", coaches=[coach])
    for name, language in (("Alice", "en"), ("Bruno", "fr"), ("Chloe", "en")):
        MembershipFactory(team=team, player=PlayerFactory(name=name, language=language))
    MembershipFactory(team=team, player=PlayerFactory(name="Gone"), active=False)
    return team


def fire(occurrence: Occurrence) -> ScanResult:
    """Run one occurrence through the real engine now, as if its instant had come."""
    Occurrence.objects.filter(pk=occurrence.pk).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )
    return occurrences_dispatch_batch()
