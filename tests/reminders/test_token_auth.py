"""The API's token authentication answers as DRF's does, in one statement."""

from __future__ import annotations

from typing import Any

import pytest
from django.forms.models import model_to_dict
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from reminders.http.token_auth import TokenAuthentication
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _refusal(key: str) -> str:
    with pytest.raises(exceptions.AuthenticationFailed) as refused:
        TokenAuthentication().authenticate_credentials(key)
    return str(refused.value.detail)


def test_it_gives_the_user_and_token_drf_gives(django_assert_num_queries: Any) -> None:
    user = UserFactory(first_name="Anna", is_staff=True, queues=["*"])
    key = Token.objects.create(user=user).key
    theirs_user, theirs_token = authentication.TokenAuthentication().authenticate_credentials(key)
    with django_assert_num_queries(1):
        ours_user, ours_token = TokenAuthentication().authenticate_credentials(key)
        assert ours_token.user is ours_user  # no second query for the token's user
    assert ours_user.pk == user.pk and type(ours_user) is type(theirs_user)
    assert model_to_dict(ours_user) == model_to_dict(theirs_user)
    assert (ours_user.last_login, ours_user.date_joined) == (theirs_user.last_login, theirs_user.date_joined)
    assert (ours_token.key, ours_token.user_id, ours_token.created) == (
        theirs_token.key,
        theirs_token.user_id,
        theirs_token.created,
    )
    assert not ours_user._state.adding and ours_user._state.db == theirs_user._state.db


def test_it_refuses_what_drf_refuses_with_its_messages() -> None:
    inactive = Token.objects.create(user=UserFactory(is_active=False)).key
    assert _refusal(inactive) == "User inactive or deleted."
    assert _refusal("0" * 40) == "Invalid token."
    assert _refusal("a\x00b") == "Invalid token."


def test_an_api_request_with_a_token_is_authenticated_and_a_bad_one_is_401() -> None:
    key = Token.objects.create(user=UserFactory(queues=["*"])).key
    client = APIClient()
    assert client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    refused = client.get("/api/jobs/", HTTP_AUTHORIZATION="Token not-a-token")
    assert refused.status_code == 401 and refused.json() == {"detail": "Invalid token."}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_that_died_while_idle_is_replaced_not_a_failed_request() -> None:
    """As Django's own cursor does with CONN_HEALTH_CHECKS: after a database failover the first request
    on a kept connection reconnects instead of answering 500."""
    import psycopg
    from django.conf import settings
    from django.db import connection

    key = Token.objects.create(user=UserFactory(queues=["*"])).key
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    database = settings.DATABASES["default"]
    with psycopg.connect(
        host=database["HOST"], port=database["PORT"] or 5432, user=database["USER"], dbname=database["NAME"],
        autocommit=True,
    ) as other:  # fmt: skip
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    connection.health_check_enabled, connection.health_check_done = True, False  # a new request's state
    user, token = TokenAuthentication().authenticate_credentials(key)
    assert token.key == key and user.is_active
