"""A reminder as an email: the push's title and text in the recipient's language, an HTML and a plain-text
body with the answer links, and RFC 8058 one-click unsubscribe headers for that reminder kind.

The bodies are filled into skeletons rendered once per language (skeleton.py); the answer links come signed
in the push's document, the unsubscribe link is signed here once per (person, kind) an hour. The message
itself is Django's (`EmailMultiAlternatives`), whatever the backend: one MIME builder, the one Django's
SMTP backend would use (docs/email.md says why).

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
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from common.i18n import spoken
from delivery.channels.email.skeleton import skeletons
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
def _unsubscribe_head(public_url: str) -> tuple[str, str]:
    """(head, tail) of the unsubscribe page's URL around its token: reversed once, not per email."""
    head, tail = reverse("email-unsubscribe", kwargs={"token": "TOKEN"}).split("TOKEN")
    return public_url.rstrip("/") + head, tail


@lru_cache(maxsize=4096)
def _unsubscribe(public_url: str, hour: int, player: int, guardian: int | None, kind: str) -> str:
    """Signed once per (person, kind) and hour: a push to two addresses, or sent again, signs nothing more,
    and no token is more than an hour older than its email."""
    head, tail = _unsubscribe_head(public_url)
    return f"{head}{unsubscribe_token(player_id=player, kind=kind, guardian_id=guardian)}{tail}"


def _links(player: int, guardian: int | None, kind: str, answer: dict[str, str]) -> dict[str, str]:
    """An email's links: the one-click unsubscribe (signed here: the email channel's own page) and the
    answer page links its document carries (signed by its publisher for the email channel)."""
    hour = int(time.time() // 3600)
    return {
        "unsubscribe": _unsubscribe(settings.TRAININGS_PUBLIC_URL, hour, player, guardian, kind),
        **answer,
    }


def email_links(push: PushMessage) -> dict[str, str]:
    """The links of one reminder email: answer page(s) and the one-click unsubscribe; none for a coach's
    digest."""
    if push.player is None:
        return {}
    return _links(push.player, push.guardian, push.kind, push.email_links)


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
    if push.family:  # one email for a guardian's children's reminders
        headers = {"Message-ID": f"<{device.send_uuid(push)}@{settings.TRAININGS_EMAIL_DOMAIN}>"}
        return _family_email(push, device, words=words(language), headers=headers)
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


def _family_email(
    push: PushMessage, device: Target, *, words: dict[str, str], headers: dict[str, str]
) -> Email:
    """One email for a guardian's children's reminders (delivery/family.py): each child's reminder with
    its own answer links, and the unsubscribe of the first one's kind. Rendered from its templates (a
    family's email is rare: no skeleton)."""
    language = str(push.raw.get("language") or "en")
    children, unsubscribe = [], ""
    for entry in push.raw.get("family") or []:
        email = entry.get("email")
        links = _links(int(entry["player"]), push.guardian, str(entry["kind"]),
                       email if isinstance(email, dict) else {})  # fmt: skip
        unsubscribe = unsubscribe or links.get("unsubscribe", "")
        children.append({"name": entry.get("name") or "", "title": entry.get("title") or "",
                         "body": entry.get("body") or "", "links": links})  # fmt: skip
    context = {"push": {"title": push.title}, "children": children, "words": words, "language": language,
               "unsubscribe": unsubscribe}  # fmt: skip
    if unsubscribe:
        headers = {**headers, "List-Unsubscribe": f"<{unsubscribe}>",
                   "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}  # fmt: skip
    return Email(
        to=device.token,
        subject=push.title.replace("\r", " ").replace("\n", " "),
        text=render_to_string("trainings/email/reminder_family.txt", context),
        html=render_to_string("trainings/email/reminder_family.html", context),
        headers={**headers, "Auto-Submitted": "auto-generated", "Content-Language": language},
    )
