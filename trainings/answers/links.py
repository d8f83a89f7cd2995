"""Answer links: a signed token that lets one player answer one reminder kind of one training, without a
session, from a push action or an email.

The token is Django's signing (HMAC-SHA256 over the SECRET_KEY, verified against SECRET_KEY_FALLBACKS
too, so keys rotate without breaking the links already sent) with a salt of its own, so no other signed
value of the site is ever accepted as a link. It names the player, the training, the kind and the channel
it was sent through (and the guardian, for a link sent to one of the player's guardians); it carries no
expiry of its own: it works until that kind's window closes for the training as it is when the link is
followed (a training moved later keeps its links working), and never on a cancelled one
(trainings/answers/reading.py checks both).

What the app receives with each push (documented in docs/app-contract.md): `answer_url`, the APNs category
and the actions of the kind's answer (trainings/planning/kinds.py): for an invitation TRAINING_INVITATION with
`accept` and `decline`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils.encoding import force_bytes

from trainings.planning import kinds

SALT = "trainings.answer-link"
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # Django's signing.JSONSerializer, built once
# A link older than this is refused whatever its window says (a window is at most 30 days of offsets plus
# the questionnaire's hours): a leaked token does not live forever.
MAX_AGE_SECONDS = 90 * 86400

# The channel a link was sent through, as it is written in the token, and the answer source it records.
CHANNELS = {"push": "p", "email": "e"}
_SOURCE_OF = {"p": "push_action", "e": "email_link"}


class LinkInvalid(ValueError):
    """Not a token this site signed for an answer (tampered, truncated, another salt): nothing more said."""


@dataclass(frozen=True)
class AnswerLink:
    player_id: int
    training_id: UUID
    kind: str
    channel: str  # "p" (push) or "e" (email)
    guardian_id: int | None = None  # minted for this guardian of the player's: they answer for the player

    @property
    def source(self) -> str:
        """The answer source a link of this channel records (AnswerSource values)."""
        return _SOURCE_OF[self.channel]


def answerable(kind: str) -> bool:
    """Whether reminders of this kind wait for an answer a link can give."""
    known = kinds.KINDS.get(kind)
    return known is not None and known.answer is not None


def expects_response(kind: str) -> bool:
    """A link of this (answerable) kind records a response, accepted or denied, not questionnaire answers."""
    answer = kinds.of(kind).answer
    return answer is not None and answer.expects == "response"


def answer_token(
    *,
    player_id: int,
    training_id: UUID | str,
    kind: str,
    channel: str = "push",
    guardian_id: int | None = None,
) -> str:
    """The signed token of one player's answer to one kind of one training, sent through `channel`; with
    `guardian_id`, sent to that guardian of the player's (it records who answered, and works only while
    they are the player's guardian)."""
    if not answerable(kind):
        raise ValueError(f"reminders of kind {kind!r} wait for no answer")
    hex_id = training_id.hex if isinstance(training_id, UUID) else _hex_of(str(training_id))
    value: list[object] = [player_id, hex_id, kind, CHANNELS[channel]]
    if guardian_id is not None:
        value.append(guardian_id)
    return _signer(settings.SECRET_KEY).sign_link(value)


@lru_cache(maxsize=4096)
def _hex_of(training_id: str) -> str:
    """A training's id as the token writes it (a storm signs the links of thousands of trainings, each
    for every one of its players)."""
    return UUID(training_id).hex


class _LinkSigner(signing.TimestampSigner):
    """`signing.dumps(value, salt=SALT)` as the gateway signs a link per push: Django's TimestampSigner,
    whose every signature derives the HMAC key from the salt and SECRET_KEY again (`salted_hmac`) and
    which is built again per call; here the keyed HMAC is made once and copied per signature. The same
    tokens, read back by `signing.loads` (and any key in SECRET_KEY_FALLBACKS still reads older ones)."""

    def __init__(self, key: str) -> None:
        super().__init__(key=key, salt=SALT)
        derived = hashlib.sha256(force_bytes(SALT + "signer") + force_bytes(key)).digest()
        self._mac = hmac.new(derived, digestmod=hashlib.sha256)
        self._stamped_at, self._stamp = -1, ""

    def signature(self, value: str | bytes, key: str | bytes | None = None) -> str:
        if key is not None and key != self.key:
            return super().signature(value, key)
        mac = self._mac.copy()
        mac.update(force_bytes(value))
        return signing.b64_encode(mac.digest()).decode()

    def sign_link(self, value: list[object]) -> str:
        """`self.sign_object(value)` (Django's JSON, base64 and timestamp, the same token) in one pass
        instead of a serializer object and three nested calls per link."""
        now = int(time.time())
        if now != self._stamped_at:
            self._stamped_at, self._stamp = now, signing.b62_encode(now)
        data = base64.urlsafe_b64encode(_COMPACT.encode(value).encode("latin-1")).rstrip(b"=").decode()
        signed = f"{data}{self.sep}{self._stamp}"
        mac = self._mac.copy()
        mac.update(signed.encode())
        return f"{signed}{self.sep}{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"


@cache
def _signer(key: str) -> _LinkSigner:
    """One signer per SECRET_KEY (a test, or a rotation, may change it while the process runs)."""
    return _LinkSigner(key)


def answer_link_read(token: str) -> AnswerLink:
    """The link a token names; LinkInvalid for anything this site did not sign as one."""
    try:
        value = signing.loads(token, salt=SALT, max_age=MAX_AGE_SECONDS)
        player_id, hex_id, kind, channel, *guardian = value
        guardian_id = guardian[0] if guardian else None
        if not (isinstance(player_id, int) and answerable(kind) and channel in _SOURCE_OF):
            raise ValueError
        if len(guardian) > 1 or not (guardian_id is None or isinstance(guardian_id, int)):
            raise ValueError
        return AnswerLink(player_id, UUID(hex=hex_id), kind, channel, guardian_id)
    except (signing.BadSignature, ValueError, TypeError, AttributeError):
        raise LinkInvalid("not a valid answer link") from None


@lru_cache(maxsize=16)
def _url_parts(public_url: str, name: str) -> tuple[str, str]:
    """(head, tail) of a URL of `name` around its token: reversed once, not per push."""
    marker = "TOKEN"
    head, tail = reverse(name, kwargs={"token": marker}).split(marker)
    return public_url.rstrip("/") + head, tail


def answer_url(token: str) -> str:
    """The absolute URL of a link (TRAININGS_PUBLIC_URL + the API path)."""
    head, tail = _url_parts(settings.TRAININGS_PUBLIC_URL, "answer-link")
    return f"{head}{token}{tail}"


def answer_page_url(token: str) -> str:
    """The answer page of a token (its buttons record the answer in one tap in a browser)."""
    head, tail = _url_parts(settings.TRAININGS_PUBLIC_URL, "answer-page")
    return f"{head}{token}{tail}"


def answer_page_link(
    *, player_id: int, training_id: UUID | str, kind: str, guardian_id: int | None = None
) -> str | None:
    """The answer page of a push's link; None for a kind that waits for no answer (`demo_trainings`
    prints these for development)."""
    if not answerable(kind):
        return None
    return answer_page_url(
        answer_token(player_id=player_id, training_id=training_id, kind=kind, guardian_id=guardian_id)
    )


def answer_document(
    *, player_id: int, training_id: UUID | str, kind: str, guardian_id: int | None = None
) -> dict[str, Any]:
    """The `answer` of a push document (docs/design.md, "Pushes"), empty for a kind that waits for no
    answer: `push`, the fields a device push carries (`category`, `answer_url`, an invitation's
    `actions`); `page`, the answer page of the same link; `email`, an email's answer page links (signed
    for the email channel: `accept`/`decline` for a response, else `answer`). The gateway reads them as
    they are: every link of a push is signed here, once, for its recipient (the player, or the guardian
    it goes to)."""
    encoded = answer_json(player_id=player_id, training_id=training_id, kind=kind, guardian_id=guardian_id)
    document: dict[str, Any] = json.loads(encoded) if encoded else {}
    return document


def answer_json(
    *, player_id: int, training_id: UUID | str, kind: str, guardian_id: int | None = None
) -> bytes:
    """`answer_document(...)` as compact JSON (b"" for none): the kind's encoded answer around its two
    tokens, the push channel's and the email channel's (a storm publishes one per push)."""
    parts = _answer_parts(settings.TRAININGS_PUBLIC_URL, kind)
    if parts is None:
        return b""
    push = answer_token(player_id=player_id, training_id=training_id, kind=kind, guardian_id=guardian_id)
    email = answer_token(player_id=player_id, training_id=training_id, kind=kind, channel="email",
                         guardian_id=guardian_id)  # fmt: skip
    tokens = (push.encode(), email.encode())
    return b"".join(tokens[part] if isinstance(part, int) else part for part in parts)


_MARKS = ("@@push-token@@", "@@email-token@@")  # no token, URL or kind code holds them


@lru_cache(maxsize=256)
def _answer_parts(public_url: str, kind: str) -> tuple[bytes | int, ...] | None:
    """A kind's answer (`_answer_of`) encoded once with marks for its tokens, cut at them: the literal
    bytes, and 0 or 1 where the push or the email token goes. None: the kind waits for no answer."""
    answer = _answer_of(kind, *_MARKS)
    if answer is None:
        return None
    parts: list[bytes | int] = [json.dumps(answer, separators=(",", ":")).encode()]
    for index, mark in enumerate(_MARKS):
        parts = [piece for part in parts for piece in _cut(part, mark.encode(), index)]
    return tuple(parts)


def _cut(part: bytes | int, mark: bytes, index: int) -> list[bytes | int]:
    if isinstance(part, int):
        return [part]
    pieces: list[bytes | int] = []
    for n, piece in enumerate(part.split(mark)):
        pieces += [index, piece] if n else [piece]
    return pieces


def _answer_of(kind: str, push_token: str, email_token: str) -> dict[str, Any] | None:
    """What `answer_document` says of a kind's push once its tokens are signed."""
    known = kinds.KINDS.get(kind)
    answer = None if known is None else known.answer
    if answer is None:
        return None
    url = answer_url(push_token)
    fields: dict[str, Any] = {"category": answer.category, "answer_url": url}
    if answer.actions:
        fields["actions"] = [{"id": action, "response": response, "url": url}
                             for action, response in answer.actions]  # fmt: skip
    page = answer_page_url(email_token)
    if answer.expects == "response":
        email = {"accept": f"{page}?response=accepted", "decline": f"{page}?response=denied"}
    else:
        email = {"answer": page}
    return {"push": fields, "page": answer_page_url(push_token), "email": email}
