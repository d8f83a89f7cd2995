"""An email's one-click unsubscribe link works for TRAININGS_EMAIL_UNSUBSCRIBE_DAYS (90 by default) after it
was signed, and no longer: an older one answers 410 with a page saying it expired, and changes nothing."""

from __future__ import annotations

import time
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from delivery.channels.email.message import unsubscribe_token
from tests.factories import PlayerFactory
from trainings.models import ReminderPreference

pytestmark = [pytest.mark.django_db]
DAY = 86400


def _signed_days_ago(days: float, player_id: int) -> str:
    """A token as an email sent `days` ago carried it (the clock shifted back while it is signed)."""
    with mock.patch("django.core.signing.time.time", return_value=time.time() - days * DAY):
        return unsubscribe_token(player_id=player_id, kind="PRE")


def _one_click(token: str) -> Any:
    return Client().post(f"/email/unsubscribe/{token}/", data="List-Unsubscribe=One-Click",
                         content_type="application/x-www-form-urlencoded")  # fmt: skip


def test_it_works_until_the_last_day() -> None:
    player = PlayerFactory()
    response = _one_click(_signed_days_ago(89.9, player.pk))
    assert response.status_code == 200
    assert ReminderPreference.objects.get(player=player, kind="PRE").channels == "push"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_an_older_link_answers_410_saying_it_expired_and_changes_nothing(method: str) -> None:
    player = PlayerFactory()
    token = _signed_days_ago(90.1, player.pk)

    client = Client()
    response = client.get(f"/email/unsubscribe/{token}/") if method == "GET" else _one_click(token)

    assert response.status_code == 410
    assert "This unsubscribe link has expired: links work for 90 days after their email." in (
        response.content.decode()
    )
    assert not ReminderPreference.objects.exists()


def test_the_lifetime_is_a_setting(settings: Any) -> None:
    settings.TRAININGS_EMAIL_UNSUBSCRIBE_DAYS = 30
    player = PlayerFactory()
    assert _one_click(_signed_days_ago(29, player.pk)).status_code == 200
    expired = _one_click(_signed_days_ago(31, player.pk))
    assert expired.status_code == 410 and "30 days" in expired.content.decode()


def test_a_forged_link_is_still_a_400() -> None:
    assert _one_click("not-a-token").status_code == 400
