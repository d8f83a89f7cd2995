"""DRF's token authentication, with the token and its user read by one prepared statement on PostgreSQL.

Every API request by another backend or a coach's app authenticates its `Authorization: Token <key>`
header. DRF builds the ORM's `select_related` query for it each time, which cost more CPU than running
it; here the statement is written once (reminders/queries.py) and prepared once per connection, and the
token and the user are built from its row as the ORM builds them. What is refused, and with which message,
is DRF's; other databases take DRF's own path.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from common.prepared import prepared_cursor, prepares
from reminders.queries import TOKEN_FIELDS, TOKEN_WITH_USER, USER_FIELDS

_TOKEN_USER = Token._meta.get_field("user")


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if not prepares(connection):
            return super().authenticate_credentials(key)
        if "\x00" in key:  # no stored key has one, and PostgreSQL refuses it in a text parameter
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        # Django's own cursor runs this first: a kept connection that died while idle (a failover) is
        # replaced here rather than failing the request.
        connection.close_if_health_check_failed()
        with prepared_cursor(connection) as cursor:
            cursor.execute(TOKEN_WITH_USER, {"key": key})
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        split = len(TOKEN_FIELDS)
        token = Token.from_db(connection.alias, TOKEN_FIELDS, row[:split])
        user = get_user_model().from_db(connection.alias, USER_FIELDS, row[split:])
        _TOKEN_USER.set_cached_value(token, user)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return user, token
