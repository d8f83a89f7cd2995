"""What the push gateway and its providers exchange: the push message, a device as a target, the verdict
of one send, and the small helpers every HTTP/2 provider shares."""

from __future__ import annotations

import hashlib
import json
import ssl
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import Any, Protocol

from django.conf import settings

from common.compact_json import json_compact
from common.wire.h2client import H2Client
from delivery.domain import DOMAIN
from delivery.family import Member, members_parse

SCHEMAS = ("trainings.push/1", "trainings.push/2")


@dataclass(frozen=True)
class PushMessage:
    """A parsed push message (schema in trainings/handlers.py)."""

    idempotency_key: str
    player: int | None  # None: a coach's digest (`coach`)
    title: str
    body: str
    training: str
    kind: str
    raw: dict[str, Any]
    rule: str | None = None
    offset: str | None = None  # the rule's offset that fired it (its critical ones go through mute)
    fire_at: datetime | None = None
    expires_at: datetime | None = None
    guardian: int | None = None  # the push goes to this guardian of the player's, not to the player
    coach: int | None = None  # a coach's digest (trainings/digest/): to the coach's devices, no player
    escalate: bool = False  # on every channel the recipient has (trainings/reminding/escalation.py)
    family: tuple[Member, ...] = ()  # a guardian's pushes for several children, as one (delivery/family.py)

    @classmethod
    def from_body(cls, body: Any) -> PushMessage:
        if not isinstance(body, dict):
            raise ValueError("push message is not a JSON object")
        try:
            player, coach = _optional_id(body.get("player")), _optional_id(body.get("coach"))
            if (player is None) == (coach is None):
                raise ValueError("one of player and coach")
            return cls(
                idempotency_key=str(body["idempotency_key"]),
                player=player,
                title=str(body["title"]),
                body=str(body["body"]),
                training=str(body["training"]),
                kind=str(body["kind"]),
                raw=body,
                rule=str(body["rule"]) if body.get("rule") else None,
                offset=str(body["offset"]) if body.get("offset") else None,
                fire_at=_aware(body.get("fire_at")),
                expires_at=_aware(body.get("expires_at")),
                guardian=_optional_id(body.get("guardian")),
                coach=coach,
                escalate=body.get("escalate") is True,
                family=members_parse(body.get("family")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"push message is missing or has a bad field: {exc}") from None

    @property
    def recipient(self) -> Recipient:
        """(player, guardian, coach): whose devices and preferences the push goes by."""
        return self.player, self.guardian, self.coach

    @property
    def collapse_id(self) -> str:
        """A newer reminder for the same training and phase replaces the older one on the device (on a
        guardian's, for the same player: a sibling's reminder must not replace it)."""
        if self.family:  # a later family push of the guardian's replaces it, no one child's
            return f"family:{self.guardian}:{self.kind.lower()}"[:64]
        player = f":{self.player}" if self.guardian is not None else ""
        return f"{self.training}:{self.kind.lower()}{player}"[:64]  # APNs allows 64 bytes

    @property
    def data(self) -> dict[str, str]:
        """What the app needs to open the right questionnaire or invitation: the kind's `screen` (from the
        kinds table; absent for a kind this service does not know), the training, the push (FCM data
        values are strings)."""
        values = {"training": self.training, "kind": self.kind, "push": self.idempotency_key}
        screen = DOMAIN.screen_of(self.kind)
        if screen is not None:
            values["screen"] = screen
        if self.rule:
            values["rule"] = self.rule
        if self.guardian is not None:  # a guardian's app: which of their players it is about
            values["player"], values["guardian"] = str(self.player), str(self.guardian)
        if self.coach is not None:  # a coach's app: whose digest, about which team
            values["coach"] = str(self.coach)
            if self.raw.get("team") is not None:
                values["team"] = str(self.raw["team"])
        return values

    @property
    def answer_fields(self) -> dict[str, Any]:
        """What a device push carries to be answered in one tap (`category`, `answer_url`, an invitation's
        `actions`; a family's children, each with theirs): the document's, signed by its publisher for this
        push's recipient; none for a push that says nothing to answer."""
        return _part(self._answer.get("push"))

    @property
    def answer_page(self) -> str | None:
        """The answer page of the push's link (the logging stand-in prints it under DEBUG)."""
        page = self._answer.get("page")
        return page if isinstance(page, str) else None

    @property
    def email_links(self) -> dict[str, str]:
        """An email's answer page links (`accept` and `decline`, or `answer`), signed for email."""
        return _part(self._answer.get("email"))

    @cached_property
    def _answer(self) -> dict[str, Any]:
        return _part(self.raw.get("answer"))

    def ttl_seconds(self, now: float) -> int:
        return max(0, int(self.expires_at.timestamp() - now)) if self.expires_at else 86400


# Whose push it is: (player, guardian, coach); a player's has no coach, a coach's no player or guardian.
Recipient = tuple[int | None, int | None, int | None]


def _part(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _optional_id(value: Any) -> int | None:
    return None if value is None else int(value)


def _aware(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    return _aware_text(str(value))


@lru_cache(maxsize=1024)
def _aware_text(value: str) -> datetime:
    """Parsed once per text: a training's pushes (all its players') share their fire and expiry times."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}")
    return parsed


@dataclass(frozen=True)
class Target:
    """One device as the providers see it (a `delivery.Device` row, detached from the ORM)."""

    device_id: int
    provider: str  # its channel (delivery/channels/registry.py): apns, fcm
    platform: str
    token: str
    app_id: str = ""

    def send_key(self, push: PushMessage) -> str:
        """Stable per (push, device): the same on every retry and redelivery."""
        return f"{push.idempotency_key}/{self.device_id}"

    def send_uuid(self, push: PushMessage) -> str:
        """`uuid.uuid5(NAMESPACE_URL, "trainings-push:<send key>")` as its string, without the UUID object
        and its integer arithmetic (one per request)."""
        name = f"trainings-push:{push.idempotency_key}/{self.device_id}".encode()
        digest = bytearray(hashlib.sha1(_URL_NAMESPACE + name, usedforsecurity=False).digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_URL_NAMESPACE = uuid.NAMESPACE_URL.bytes


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    TOKEN_DEAD = "token_dead"  # noqa: S105 (disable the device, never try it again)
    FAILED = "failed"  # this push cannot go to this device (refused payload); the device stays
    RETRY = "retry"  # throttled, server error, network: try again later
    AUTH = "auth"  # our credentials are refused: stop consuming


@dataclass(frozen=True)
class SendResult:
    verdict: Verdict
    message_id: str = ""
    error: str = ""
    retry_after: float | None = None
    per_address: bool = False  # RETRY: the Retry-After pauses this address only, not the whole channel
    quota: bool = False  # RETRY: the project's quota is used up (delivery/gateway/quota.py pauses it)


class AuthFailure(Exception):
    """Credentials refused or unusable: an operator error; the gateway stops and leaves the queue alone."""


class PushProvider(Protocol):
    name: str

    def prepare(self) -> None: ...

    async def send(self, push: PushMessage, device: Target) -> SendResult: ...

    async def aclose(self) -> None: ...


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds (the header may also be an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def status_verdict(status: int, text: str, retry_after: float | None, *, auth: bool = False) -> SendResult:
    """What a provider's answer means once its own reasons are read: 401/403 (or `auth`) stop the gateway,
    429 and 5xx are retried (after `Retry-After` when given), anything else fails this push alone."""
    if status in (401, 403) or auth:
        return SendResult(Verdict.AUTH, error=text)
    if status == 429 or status >= 500:
        return SendResult(Verdict.RETRY, error=text, retry_after=retry_after)
    return SendResult(Verdict.FAILED, error=text)


def h2_connect(base_url: str, *, per_request_headers: tuple[str, ...] = ()) -> H2Client:
    """One HTTP/2 connection to the provider, trusting PUSH_TLS_CA_FILE too when it is set.

    `per_request_headers`: headers whose value is new on every request (kept out of the HPACK table)."""
    ca_file = settings.PUSH_TLS_CA_FILE
    context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    return H2Client(base_url, ssl_context=context, timeout=settings.PUSH_HTTP_TIMEOUT,
                    per_request_headers=per_request_headers)  # fmt: skip


def json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def first_line(exc: BaseException) -> str:
    """An exception's summary without what a token endpoint may have echoed back."""
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.splitlines()[0][:200]


def as_strings(fields: dict[str, Any]) -> dict[str, str]:
    """Answer fields as FCM data wants them: every value a string (the actions as JSON)."""
    return {k: v if isinstance(v, str) else json_compact(v).decode() for k, v in fields.items()}
