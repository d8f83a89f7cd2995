"""A reminder as an email: the push's title and text in the recipient's language, an HTML and a plain-text
body with the answer links, and RFC 8058 one-click unsubscribe headers for that reminder kind.

The bodies are filled into skeletons rendered once per language (skeleton.py) and the links are signed once
per (person, training, kind); the message itself is Django's (`EmailMultiAlternatives`), whatever the
backend: one MIME builder, the one Django's SMTP backend would use (docs/email.md says why).

Email links open a page (trainings/answers/email_pages.py) whose button records the answer: a GET never
records anything, since mail scanners follow every link of a message they receive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from common.i18n import spoken
from delivery.channels.email.skeleton import skeletons
from delivery.domain import DOMAIN
from delivery.messages import PushMessage, Target

UNSUBSCRIBE_SALT = "trainings.email-unsubscribe"


@lru_cache(maxsize=64)
def _words(language: str, coach: bool) -> tuple[tuple[str, str], ...]:
    """The few words of an email around the push's own text, in `language` (a spoken one). A coach's digest
    says why instead of offering an unsubscribe link (the coach's channels and the team's digest times are
    settings, in the app and the admin)."""
    with translation.override(language):
        said = {
            "accept": gettext("I'll come"),
            "decline": gettext("I can't come"),
            "answer": gettext("Answer the questionnaire"),
            "unsubscribe": gettext("Stop these emails for this kind of reminder"),
            "why": gettext(
                "You receive this email because your coach's team sends reminders by email when no app "
                "notification reaches you, or when you chose email for this kind of reminder."
            ),
        }
        if coach:
            said["why"] = gettext(
                "You receive this digest as a coach of the team; your channels are in your coach profile."
            )
    return tuple(said.items())


def words(language: str, *, coach: bool = False) -> dict[str, str]:
    """The email's and the answer page's words in the reader's language (common/i18n.py's fallback)."""
    return dict(_words(spoken(language), coach))


def unsubscribe_token(*, player_id: int, kind: str, guardian_id: int | None = None) -> str:
    """The player's (or, with `guardian_id`, that guardian's) one-click unsubscribe from `kind` by email."""
    value: list[object] = [player_id, kind] if guardian_id is None else [player_id, kind, guardian_id]
    return signing.dumps(value, salt=UNSUBSCRIBE_SALT, compress=False)


def unsubscribe_read(token: str) -> tuple[int, str, int | None]:
    """(player id, kind, guardian id or None) of a one-click unsubscribe token; signing.SignatureExpired
    past TRAININGS_EMAIL_UNSUBSCRIBE_DAYS, signing.BadSignature or ValueError otherwise."""
    max_age = settings.TRAININGS_EMAIL_UNSUBSCRIBE_DAYS * 86400
    player_id, kind, *guardian = signing.loads(token, salt=UNSUBSCRIBE_SALT, max_age=max_age)
    guardian_id = guardian[0] if guardian else None
    if not isinstance(player_id, int) or not isinstance(kind, str) or len(guardian) > 1:
        raise ValueError("not an unsubscribe token")
    if guardian_id is not None and not isinstance(guardian_id, int):
        raise ValueError("not an unsubscribe token")
    return player_id, kind, guardian_id


@lru_cache(maxsize=16)
def _url_heads(public_url: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """(head, tail) of the answer page's and the unsubscribe page's URL around their token: reversed once,
    not per email."""
    parts = []
    for name in ("answer-page", "email-unsubscribe"):
        head, tail = reverse(name, kwargs={"token": "TOKEN"}).split("TOKEN")
        parts.append((public_url.rstrip("/") + head, tail))
    return parts[0], parts[1]


@lru_cache(maxsize=4096)
def _links(
    public_url: str, hour: int, player: int, guardian: int | None, training: str, kind: str
) -> dict[str, str]:
    """Signed once per (person, training, kind) and hour: a push to two addresses, or sent again, signs
    nothing more, and no token is more than an hour older than its email (a token's age is checked)."""
    (answer_head, answer_tail), (unsubscribe_head, unsubscribe_tail) = _url_heads(public_url)
    token = unsubscribe_token(player_id=player, kind=kind, guardian_id=guardian)
    links = {"unsubscribe": f"{unsubscribe_head}{token}{unsubscribe_tail}"}
    answer = DOMAIN.email_answer(player_id=player, training_id=training, kind=kind, guardian_id=guardian)
    if answer is not None:
        token, expects_response = answer
        page = f"{answer_head}{token}{answer_tail}"
        if expects_response:
            links["accept"], links["decline"] = f"{page}?response=accepted", f"{page}?response=denied"
        else:
            links["answer"] = page
    return links


def email_links(push: PushMessage) -> dict[str, str]:
    """The links of one reminder email: answer page(s) and the one-click unsubscribe; none for a coach's
    digest."""
    if push.player is None:
        return {}
    hour = int(time.time() // 3600)
    return dict(
        _links(settings.TRAININGS_PUBLIC_URL, hour, push.player, push.guardian, push.training, push.kind)
    )


@dataclass(frozen=True)
class Email:
    """One reminder email's parts, before it becomes bytes (`as_bytes`) or a Django message (`email_for`)."""

    to: str
    subject: str
    text: str
    html: str
    headers: dict[str, str]  # Message-ID, List-Unsubscribe, … (From, To, Subject, Date are set apart)


def email_of(push: PushMessage, device: Target) -> Email:
    """The email of `push` to the address `device.token` (a Message-ID stable per push and address)."""
    language = str(push.raw.get("language") or "en")
    links = email_links(push)
    said = _words(spoken(language), push.coach is not None)
    text, html = skeletons(language, tuple(sorted(links)), said)
    values = {"title": push.title, "body": push.body, **links}
    headers = {"Message-ID": f"<{device.send_uuid(push)}@{settings.TRAININGS_EMAIL_DOMAIN}>"}
    if "unsubscribe" in links:
        headers["List-Unsubscribe"] = f"<{links['unsubscribe']}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return Email(
        to=device.token,
        subject=push.title.replace("\r", " ").replace("\n", " "),  # one line, as a header must be
        text=text.fill(values),
        html=html.fill(values),
        headers={**headers, "Auto-Submitted": "auto-generated", "Content-Language": language},
    )


def django_message(email: Email) -> EmailMultiAlternatives:
    """The email as a Django message: what any backend sends, and what `as_bytes` writes for SMTP."""
    message = EmailMultiAlternatives(
        subject=email.subject, body=email.text, from_email=settings.DEFAULT_FROM_EMAIL, to=[email.to],
        headers=email.headers,
    )  # fmt: skip
    message.attach_alternative(email.html, "text/html")
    return message


def email_for(push: PushMessage, device: Target) -> EmailMultiAlternatives:
    """The email as a Django message, for a backend that is not SMTP (an anymail provider, the console)."""
    return django_message(email_of(push, device))


def as_bytes(email: Email) -> bytes:
    """The email as an SMTP server receives it: the bytes Django's SMTP backend sends for the same message.
    A header value with a line break raises BadHeaderError (a ValueError), an address Django cannot write
    ValueError."""
    made: Any = django_message(email).message()  # Django passes linesep, which typeshed does not know
    return bytes(made.as_bytes(linesep="\r\n"))
