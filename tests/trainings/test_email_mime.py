"""The reminder email as the SMTP server receives it (delivery/channels/email/message.py `as_bytes`, Django's
builder) is a well-formed message: CRLF lines of at most 998 octets (RFC 5322 2.1.1) whatever the body,
multipart/alternative with a UTF-8 text and HTML part (RFC 2045/2046), a non-ASCII subject or display name
as RFC 2047 encoded words and a domain in punycode, and no header a push's text could add. Parsed back,
it says what the reminder says, in each language and for each kind of links."""

from __future__ import annotations

import email
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

import pytest
from django.template.loader import render_to_string

from delivery.channels.email.message import as_bytes, email_links, email_of, words
from delivery.channels.email.provider import _envelope_address
from delivery.messages import PushMessage, Target
from tests.trainings.push_fixtures import message

ADDRESS = Target(7, "email", "email", "anna@example.com")
TRAINING = "7d0c0a4e-0000-4000-8000-000000000000"


def _parsed(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=default_policy)


def _push(**extra: Any) -> PushMessage:
    return PushMessage.from_body(message("occ.1", 7, training=TRAINING, **extra))


def _lines_well_formed(raw: bytes) -> None:
    assert raw.count(b"\n") == raw.count(b"\r\n")  # every line ends in CRLF, no bare LF
    assert max(len(line) for line in raw.split(b"\r\n")) <= 998


@pytest.mark.parametrize("language", ["en", "fr", "de"])
@pytest.mark.parametrize("kind", ["INVITATION", "PRE", "MOVED"])
@pytest.mark.parametrize(
    ("title", "body"),
    [
        ("Pre-training questionnaire", "Speed session starts at 6 p.m."),
        ("Séance déplacée <à 18 h> & plus", 'L\'entraînement "vitesse" commence à 18 h. ' * 40),  # long line
    ],
)
def test_it_is_a_well_formed_message_that_parses_back_to_the_reminder(
    settings: Any, language: str, kind: str, title: str, body: str
) -> None:
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    push = _push(kind=kind, language=language, title=title, body=body)
    made = email_of(push, ADDRESS)
    raw = as_bytes(made)
    _lines_well_formed(raw)
    mail = _parsed(raw)
    assert mail.get_content_type() == "multipart/alternative" and mail["MIME-Version"] == "1.0"
    text, html = mail.get_body(preferencelist=("plain",)), mail.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    assert [part.get_content_charset() for part in (text, html)] == ["utf-8", "utf-8"]
    assert text.get_content().replace("\r\n", "\n") == made.text
    assert html.get_content().replace("\r\n", "\n") == made.html
    assert mail["Subject"] == title and mail["To"] == "anna@example.com"
    assert mail["Message-ID"] == made.headers["Message-ID"] and mail["Date"] is not None
    for name in ("List-Unsubscribe", "List-Unsubscribe-Post", "Auto-Submitted", "Content-Language"):
        assert str(mail[name]).strip() == made.headers[name]  # a long header may be folded


def test_non_ascii_headers_are_encoded_words_and_the_domain_punycode(settings: Any) -> None:
    """RFC 2047: a header's non-ASCII text goes as `=?utf-8?...?=`; RFC 5890: a domain as A-labels."""
    settings.DEFAULT_FROM_EMAIL = "Équipe Rappels <rappels@club-élan.example>"
    raw = as_bytes(
        email_of(_push(title="Séance déplacée"), Target(7, "email", "email", "zoë@bücher.example"))
    )
    head = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")  # the headers are ASCII whatever they say
    assert "Subject: =?utf-8?" in head and "Séance" not in head
    assert "xn--club-lan-f1a.example" in head and "xn--bcher-kva.example" in head
    mail = _parsed(raw)
    assert mail["Subject"] == "Séance déplacée"
    assert mail["From"].addresses[0].display_name == "Équipe Rappels"
    assert (
        _envelope_address("Équipe Rappels <rappels@club-élan.example>") == "rappels@xn--club-lan-f1a.example"
    )
    assert _envelope_address("anna@example.com") == "anna@example.com"


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
