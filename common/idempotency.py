"""`Idempotency-Key` on the API's creating POSTs: a retried request gets the first answer, creates nothing.

A platform that posts a training and loses the answer (a timeout, a dropped connection) cannot know
whether it was created; retrying without a key would make a second training with doubled reminders. With
`Idempotency-Key: <any 1-255 printable ASCII characters>` on the request:

- the first request with the key runs, and its answer (status and JSON body) is stored with the key, in
  the same transaction as what the request wrote, so the two exist together or not at all;
- the same key with the same request (method, path and body: the body's JSON compared by value, key order
  and spacing apart) answers the stored response again, with `Idempotent-Replayed: true`, and runs nothing;
- the same key with another request is a 422 saying so, and runs nothing;
- a request answered with an error (4xx, 5xx) stores nothing: what it wrote is rolled back and its key
  stays free, so the corrected request may reuse it;
- two requests with one key at the same moment resolve to one write: the second one's insert of the key
  waits on the first one's row (PostgreSQL's unique index) until the first commits, then replays its
  answer (or, if the first failed, runs itself). No "in progress" answer: the wait is one request's time.

Keys are the caller's own (another token's same key is another key) and last IDEMPOTENCY_KEY_TTL_HOURS
(24 h by default) from the first request; the hourly purge deletes expired ones (`idempotency_purge_expired`).
A request without the header behaves as before.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.http import QueryDict
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from common.models import IdempotentRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_MAX_LENGTH = 255

View = TypeVar("View", bound=Callable[..., Response])

KEY_PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Any 1-255 printable ASCII characters, new for each distinct request (a UUID). A retry "
    "with the same key and body gets the first answer again (header `Idempotent-Replayed: true`) and "
    "creates nothing; the same key with another body is a 422. Keys last IDEMPOTENCY_KEY_TTL_HOURS (24 h).",
)
KEY_REUSED = "The Idempotency-Key was used before with another request (method, path or body); nothing ran."


def idempotent(view: View) -> View:
    """Decorate a view method (`create`, a POST action) to honour `Idempotency-Key`, and document it."""

    @functools.wraps(view)
    def wrapped(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None or not getattr(request.user, "is_authenticated", False):
            return view(self, request, *args, **kwargs)
        _check_key(key)
        try:
            fingerprint = _fingerprint(request)
        except ParseError:
            return view(self, request, *args, **kwargs)  # the view answers the unreadable body's 400
        with transaction.atomic():
            row, first = _claim(request, key, fingerprint)
            if not first:
                return _replay(row, fingerprint)
            response = view(self, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)  # an error answer: nothing of it stays, nor the key
                return response
            row.status = response.status_code
            row.body = json.dumps(response.data, cls=JSONEncoder, ensure_ascii=False)
            row.save(update_fields=["status", "body"])
        return response

    # The header documented; its 422 is added by the schema's error hook (reminders/http/openapi.py), since an
    # operation's own `responses` replace rather than extend a decorator's.
    return extend_schema(parameters=[KEY_PARAMETER])(wrapped)  # type: ignore[return-value]


def _check_key(key: str) -> None:
    if not 1 <= len(key) <= _MAX_LENGTH or not all(" " <= c <= "~" for c in key):
        raise ValidationError({HEADER: [f"1 to {_MAX_LENGTH} printable ASCII characters."]})


def _fingerprint(request: Request) -> str:
    """The request by value: its method, path and body (a form's fields as lists, JSON by value)."""
    data = request.data
    if isinstance(data, QueryDict):
        data = {name: data.getlist(name) for name in sorted(data)}
    canonical = json.dumps(
        [request.method, request.path, data], sort_keys=True, separators=(",", ":"), cls=JSONEncoder
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _claim(request: Request, key: str, fingerprint: str) -> tuple[IdempotentRequest, bool]:
    """The key's row, locked: (a new one for this request, True), or (the live first one's, False).

    A concurrent first request's uncommitted row makes the insert wait until it commits (then this one
    replays it) or rolls back (then this one is the first). An expired row is taken over in place."""
    now = timezone.now()
    expires = now + timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS)
    claim = {"fingerprint": fingerprint, "route": f"{request.method} {request.path}", "status": 0, "body": ""}
    row, created = IdempotentRequest.objects.get_or_create(
        caller_id=request.user.pk, key=key, defaults={**claim, "expires_at": expires}
    )
    if created:
        return row, True
    row = IdempotentRequest.objects.select_for_update().get(pk=row.pk)
    if row.expires_at > now:
        return row, False
    for name, value in {**claim, "expires_at": expires, "created_at": now}.items():
        setattr(row, name, value)
    row.save()
    return row, True


def _replay(row: IdempotentRequest, fingerprint: str) -> Response:
    if row.fingerprint != fingerprint:
        return Response(
            {"detail": f"{HEADER} {row.key!r} was used with another request ({row.route}, another body) "
             "in the last hours; use a new key for a new request."},
            status=422,
        )  # fmt: skip
    return Response(json.loads(row.body), status=row.status, headers={REPLAYED_HEADER: "true"})


def idempotency_purge_expired() -> int:
    """Delete the keys past their time (the hourly purge); how many."""
    deleted, _ = IdempotentRequest.objects.filter(expires_at__lt=timezone.now()).delete()
    return deleted
