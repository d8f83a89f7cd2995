"""The tables of the helpers both apps use: one, the idempotency keys of the API's creating POSTs
(common/idempotency.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotentRequest(models.Model):
    """A caller's `Idempotency-Key` and the answer its first request got: (caller, key) -> the request's
    fingerprint and the first response's status and body, replayed to a retry until `expires_at`.

    The row is written in the same transaction as what the request created, so it exists exactly when the
    write does; a request that failed (an error answer) leaves none, and its key stays free.
    """

    caller = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # sha256 of the method, the path and the canonical JSON of the body: another body under one key is a 422.
    fingerprint = models.CharField(max_length=64)
    route = models.CharField(max_length=300)  # "POST /api/trainings/", said in the 422
    status = models.PositiveSmallIntegerField()
    body = models.TextField()  # the first response's JSON text
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["caller", "key"], name="idempotentrequest_unique")]
        indexes = [
            # The hourly purge (idempotency_purge_expired: expires_at < now).
            models.Index(fields=["expires_at"], name="idempotentrequest_expires_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.route} {self.key!r}: {self.status}"


class SharedRate(models.Model):
    """A rate every process shares through the database (common/rates.py): a per-minute quota of one
    key (a provider's project) handed out second by second, and a pause the provider asked for.

    One row per key, rewritten in place each second: `slot` is the second (Unix time) whose allowance
    `used` counts, `paused_until` (Unix time) when a pause ends."""

    key = models.CharField(max_length=200, unique=True)
    slot = models.BigIntegerField(default=0)
    used = models.IntegerField(default=0)
    paused_until = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return f"{self.key}: {self.used} in second {self.slot}"
