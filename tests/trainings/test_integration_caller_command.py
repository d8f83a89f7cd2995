"""`manage.py integration_caller`: the operator's one step to a platform's service account and its token."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from reminders.models import QueueGrant
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("integration_caller", *args, stdout=out)
    return out.getvalue().rsplit("API token: ", 1)[1].strip()


def test_it_makes_a_token_only_account_holding_the_integration_permission() -> None:
    token = _run("club-platform")
    user = get_user_model().objects.get(username="club-platform")
    assert user.has_perm("trainings.use_integration_api")
    assert not user.has_perm("reminders.use_scheduler_api")
    assert not user.has_usable_password() and not user.is_staff
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/trainings/").status_code == 200
    assert api.get("/api/jobs/").status_code == 403

    # Run again: the same account and token; --queue adds the scheduler API; --rotate a new token.
    assert _run("club-platform", "--queue", "club.*") == token
    user = get_user_model().objects.get(username="club-platform")
    assert user.has_perm("reminders.use_scheduler_api")
    assert list(QueueGrant.objects.filter(user=user).values_list("pattern", flat=True)) == ["club.*"]
    assert api.get("/api/jobs/").status_code == 200
    rotated = _run("club-platform", "--rotate")
    assert rotated != token
    assert api.get("/api/trainings/").status_code == 401


def test_it_refuses_to_turn_a_staff_account_into_one() -> None:
    UserFactory(username="coach", is_staff=True)
    with pytest.raises(CommandError, match="staff account"):
        _run("coach")
