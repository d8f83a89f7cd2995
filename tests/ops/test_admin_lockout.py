"""Admin login lockout (django-axes): after AXES_FAILURE_LIMIT wrong passwords the right one is refused."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db]

PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's


def _login(client: Client, username: str, password: str) -> int:
    response = client.post("/admin/login/?next=/admin/", {"username": username, "password": password})
    return response.status_code


def test_the_sixth_attempt_is_refused_even_with_the_right_password(settings: pytest.FixtureRequest) -> None:
    assert settings.AXES_FAILURE_LIMIT == 5
    admin = UserFactory(username="operator", is_staff=True, is_superuser=True)
    attacker = Client(REMOTE_ADDR="198.51.100.20")

    wrong = [_login(attacker, admin.username, f"guess-{i}") for i in range(5)]
    sixth = _login(attacker, admin.username, PASSWORD)

    assert wrong == [200] * 4 + [429]  # the form again four times; the fifth failure locks out
    assert sixth == 429
    assert "_auth_user_id" not in attacker.session
    # The lockout is for this username from this address: the operator still logs in from elsewhere.
    elsewhere = Client(REMOTE_ADDR="10.0.0.30")
    assert _login(elsewhere, admin.username, PASSWORD) == 302
    assert elsewhere.session["_auth_user_id"] == str(admin.pk)


def test_the_limit_is_a_setting(settings: pytest.FixtureRequest) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    admin = UserFactory(username="operator2", is_staff=True)
    client = Client(REMOTE_ADDR="198.51.100.21")

    assert [_login(client, admin.username, "nope") for _ in range(2)] == [200, 429]
    assert _login(client, admin.username, PASSWORD) == 429


def test_a_success_before_the_limit_resets_the_count() -> None:
    admin = UserFactory(username="operator3", is_staff=True)
    client = Client(REMOTE_ADDR="198.51.100.22")
    for _ in range(4):
        _login(client, admin.username, "nope")
    assert _login(client, admin.username, PASSWORD) == 302
    client.logout()
    assert [_login(client, admin.username, "nope") for _ in range(4)] == [200] * 4
