"""The per-link limit of every page and endpoint a link opens: the answer-link API, the email's answer
page and its unsubscribe page.

A link is counted only once its signature holds (the caller checks it first), under a digest of its token,
at API_THROTTLE_ANSWER_LINK_RATE; a forged token makes no count of its own and meets the per-address limit
alone. The counts are the engine's (`reminders.api.requests_count`): an upsert in the service's database,
for the answer-link API in the same statement as the address's (its view's `request_limits`).
"""

from __future__ import annotations

from django.conf import settings

from reminders.api import Limit, Refused, digest, requests_count

LINK_SCOPE = "link"


def link_limit(token: str) -> Limit:
    """The limit of a link whose signature holds, counted under a digest of its token (a link is a
    credential, never stored)."""
    return Limit(LINK_SCOPE, digest(token), str(settings.API_THROTTLE_ANSWER_LINK_RATE))


def link_count(token: str) -> Refused | None:
    """Count one use of a link whose signature holds; how long to wait when it is over its limit."""
    return requests_count([link_limit(token)])
