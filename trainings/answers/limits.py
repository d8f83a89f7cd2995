"""The per-link limit of every page and endpoint a link opens: the answer-link API, the email's answer
page and its unsubscribe page.

A link is counted only once its signature holds (the caller checks it first), under a digest of its token,
at API_THROTTLE_ANSWER_LINK_RATE; a forged token makes no count of its own and meets the per-address limit
alone. The counts are the engine's (`reminders.api.request_count`): one upsert in the service's database.
"""

from __future__ import annotations

from django.conf import settings

from reminders.api import Refused, digest, request_count

LINK_SCOPE = "link"


def link_ident(token: str) -> str:
    """Whom a link's use counts for: a digest of its token (a link is a credential, never stored)."""
    return digest(token)


def link_count(token: str) -> Refused | None:
    """Count one use of a link whose signature holds; how long to wait when it is over its limit."""
    return request_count(
        scope=LINK_SCOPE, ident=link_ident(token), rate=str(settings.API_THROTTLE_ANSWER_LINK_RATE)
    )
