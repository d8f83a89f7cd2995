"""A reminder as an email: the push's title and text in the recipient's language, an HTML and a plain-text
body with the answer links, and RFC 8058 one-click unsubscribe headers for that reminder kind.

Email links open a page (trainings/push/email/views.py) whose button records the answer: a GET never
records anything, since mail scanners follow every link of a message they receive.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

from trainings.answers.links import answer_token, answerable, expects_response
from trainings.push.messages import PushMessage, Target

UNSUBSCRIBE_SALT = "trainings.email-unsubscribe"

# The few words of an email around the push's own text, per language (English otherwise).
WORDS: dict[str, dict[str, str]] = {
    "en": {"accept": "I'll come", "decline": "I can't come", "answer": "Answer the questionnaire",
           "unsubscribe": "Stop these emails for this kind of reminder", "why": "You receive this email "
           "because your coach's team sends reminders and no app notification reached you."},
    "fr": {"accept": "Je viens", "decline": "Je ne peux pas venir", "answer": "Répondre au questionnaire",
           "unsubscribe": "Ne plus recevoir ces e-mails pour ce type de rappel", "why": "Vous recevez cet "
           "e-mail car l'équipe de votre entraîneur envoie des rappels et aucune notification de l'appli "
           "ne vous est parvenue."},
}  # fmt: skip
# A coach's digest by email says why instead (no unsubscribe link: the coach's channels and the team's digest
# times are settings, in the app and the admin).
COACH_WHY: dict[str, str] = {
    "en": "You receive this digest as a coach of the team; your channels are in your coach profile.",
    "fr": "Vous recevez ce résumé en tant qu'entraîneur de l'équipe ; vos canaux sont dans votre profil.",
}


def words(language: str) -> dict[str, str]:
    return WORDS.get(language.lower().split("-")[0], WORDS["en"])


def unsubscribe_token(*, player_id: int, kind: str, guardian_id: int | None = None) -> str:
    """The player's (or, with `guardian_id`, that guardian's) one-click unsubscribe from `kind` by email."""
    value: list[object] = [player_id, kind] if guardian_id is None else [player_id, kind, guardian_id]
    return signing.dumps(value, salt=UNSUBSCRIBE_SALT, compress=False)


def unsubscribe_read(token: str) -> tuple[int, str, int | None]:
    """(player id, kind, guardian id or None) of a one-click unsubscribe token; signing.BadSignature or
    ValueError otherwise."""
    player_id, kind, *guardian = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    guardian_id = guardian[0] if guardian else None
    if not isinstance(player_id, int) or not isinstance(kind, str) or len(guardian) > 1:
        raise ValueError("not an unsubscribe token")
    if guardian_id is not None and not isinstance(guardian_id, int):
        raise ValueError("not an unsubscribe token")
    return player_id, kind, guardian_id


def _public(path: str) -> str:
    return settings.TRAININGS_PUBLIC_URL.rstrip("/") + path


def email_links(push: PushMessage) -> dict[str, str]:
    """The links of one reminder email: answer page(s) and the one-click unsubscribe; none for a coach's
    digest."""
    if push.player is None:
        return {}
    links = {"unsubscribe": _public(reverse("email-unsubscribe", kwargs={"token": unsubscribe_token(
        player_id=push.player, kind=push.kind, guardian_id=push.guardian)}))}  # fmt: skip
    if answerable(push.kind):
        token = answer_token(
            player_id=push.player, training_id=push.training, kind=push.kind, channel="email",
            guardian_id=push.guardian,
        )  # fmt: skip
        page = _public(reverse("answer-page", kwargs={"token": token}))
        if expects_response(push.kind):
            links["accept"], links["decline"] = f"{page}?response=accepted", f"{page}?response=denied"
        else:
            links["answer"] = page
    return links


def email_for(push: PushMessage, device: Target) -> EmailMultiAlternatives:
    """The email of `push` to the address `device.token` (a Message-ID stable per push and address)."""
    language = str(push.raw.get("language") or "en")
    links = email_links(push)
    said = words(language)
    if push.coach is not None:
        said = {**said, "why": COACH_WHY.get(language.lower().split("-")[0], COACH_WHY["en"])}
    context: dict[str, Any] = {"push": push, "links": links, "words": said, "language": language}
    headers = {
        "Message-ID": f"<{device.send_uuid(push)}@{settings.TRAININGS_EMAIL_DOMAIN}>",
        "Auto-Submitted": "auto-generated",
        "Content-Language": language,
    }
    if "unsubscribe" in links:
        headers["List-Unsubscribe"] = f"<{links['unsubscribe']}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message = EmailMultiAlternatives(
        subject=push.title,
        body=render_to_string("trainings/email/reminder.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[device.token],
        headers=headers,
    )
    message.attach_alternative(render_to_string("trainings/email/reminder.html", context), "text/html")
    return message
