"""The reminder email written as bytes (trainings/push/email/mime.py, skeleton.py) is the email Django's
SMTP backend would have sent for the same reminder: parsed, every header and both bodies are equal, in each
language and for each kind of links (invitation, questionnaire, a notice with none)."""

from __future__ import annotations

import email
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

import pytest
from django.template.loader import render_to_string

from tests.trainings.push_fixtures import message
from trainings.push.email.message import as_bytes, email_for, email_links, email_of, words
from trainings.push.messages import PushMessage, Target

ADDRESS = Target(7, "email", "email", "anna@example.com")


def _parsed(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=default_policy)


def _parts(mail: EmailMessage) -> dict[str, Any]:
    text, html = mail.get_body(preferencelist=("plain",)), mail.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    names = ("Subject", "From", "To", "Message-ID", "List-Unsubscribe", "List-Unsubscribe-Post",
             "Auto-Submitted", "Content-Language", "MIME-Version")  # fmt: skip
    return {
        "headers": {name: str(mail[name]).strip() for name in names},  # a long header may be folded
        "type": mail.get_content_type(),
        "text": text.get_content(),
        "html": html.get_content(),
        "charsets": [part.get_content_charset() for part in (text, html)],
    }


@pytest.mark.parametrize("language", ["en", "fr", "de"])
@pytest.mark.parametrize("kind", ["INVITATION", "PRE", "MOVED"])
@pytest.mark.parametrize(
    ("title", "body"),
    [
        ("Pre-training questionnaire", "Speed session starts at 6 p.m."),
        ("Séance déplacée <à 18 h> & plus", 'L\'entraînement "vitesse" commence à 18 h. ' * 40),  # long line
    ],
)
def test_the_bytes_are_the_email_django_would_send(
    settings: Any, language: str, kind: str, title: str, body: str
) -> None:
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    push = PushMessage.from_body(message("occ.1", 7, kind=kind, language=language, title=title, body=body,
                                         training="7d0c0a4e-0000-4000-8000-000000000000"))  # fmt: skip
    ours = _parts(_parsed(as_bytes(email_of(push, ADDRESS))))
    sent: Any = email_for(push, ADDRESS).message()  # Django passes linesep, which typeshed does not know
    django = _parts(_parsed(sent.as_bytes(linesep="\r\n")))
    assert ours == django
    assert ours["headers"]["Subject"] == title and ours["headers"]["To"] == "anna@example.com"


def test_the_bodies_are_the_templates_rendered_for_that_email(settings: Any) -> None:
    """The skeleton filled in is what rendering both templates for this one email gives, escaping included."""
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    push = PushMessage.from_body(message("occ.1", 7, kind="INVITATION", language="fr", title="A <b> & 'c'",
                                         body='Rendez-vous "au stade" <18 h>'))  # fmt: skip
    links = email_links(push)
    context = {"push": push, "links": links, "words": words("fr"), "language": "fr"}
    made = email_of(push, ADDRESS)
    assert made.text == render_to_string("trainings/email/reminder.txt", context)
    assert made.html == render_to_string("trainings/email/reminder.html", context)
    assert "&lt;18 h&gt;" in made.html and "<18 h>" in made.text


def test_a_title_with_a_line_break_stays_one_header_line(settings: Any) -> None:
    push = PushMessage.from_body(message("occ.1", 7, title="Line one\r\nBcc: someone@example.com"))
    mail = _parsed(as_bytes(email_of(push, ADDRESS)))
    assert mail["Bcc"] is None and mail["Subject"] == "Line one  Bcc: someone@example.com"


def test_a_header_value_with_a_newline_is_refused(settings: Any) -> None:
    push = PushMessage.from_body(message("occ.1", 7, language="en\r\nBcc: someone@example.com"))
    with pytest.raises(ValueError, match="newline"):
        as_bytes(email_of(push, ADDRESS))
