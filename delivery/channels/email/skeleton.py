"""The reminder email's bodies rendered once per language and link shape, then filled per recipient.

Rendering the two Django templates per email cost more than sending it. Each template is rendered once per
(language, which links the email has) with a marker in place of every per-recipient value (the push's
title and text, each link); the result is split at the markers into a skeleton, and an email's body is the
skeleton's literal pieces joined with its values: HTML-escaped for the HTML body, as they are for the text
one (the same escaping the templates apply). The templates may therefore print those values only as they
are (`{{ push.title }}`, `{{ links.accept }}`), never through a filter that would change a marker; a
marker a template changed is an error at the first email, not a wrong email.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from django.template.loader import render_to_string
from django.utils.html import escape

TEXT_TEMPLATE = "trainings/email/reminder.txt"
HTML_TEMPLATE = "trainings/email/reminder.html"

# The values an email fills in: the push's title and text, and its links (delivery/channels/email/message.py).
FIELDS = ("title", "body", "accept", "decline", "answer", "unsubscribe")
_MARKER = re.compile(r"\x1f(\w+)\x1f")  # a control character neither a template nor a value holds


@dataclass(frozen=True)
class Skeleton:
    """A rendered template as (literal, field, literal, field, …, literal): odd indexes name fields."""

    pieces: tuple[str, ...]
    escaped: bool  # the HTML body: values are escaped as the template's autoescape would

    def fill(self, values: dict[str, str]) -> str:
        pieces = list(self.pieces)
        for i in range(1, len(pieces), 2):
            value = values[pieces[i]]
            pieces[i] = escape(value) if self.escaped else value
        return "".join(pieces)


def _marker(name: str) -> str:
    return f"\x1f{name}\x1f"


@lru_cache(maxsize=64)
def skeletons(
    language: str, links: tuple[str, ...], words: tuple[tuple[str, str], ...]
) -> tuple[Skeleton, Skeleton]:
    """(text, HTML) skeletons for `language`, an email with these `links` (names) and these `words`."""
    context = {
        "push": {"title": _marker("title"), "body": _marker("body")},
        "links": {name: _marker(name) for name in links},
        "words": dict(words),
        "language": language,
    }
    made = []
    for template, escaped in ((TEXT_TEMPLATE, False), (HTML_TEMPLATE, True)):
        pieces = tuple(_MARKER.split(render_to_string(template, context)))
        unknown = set(pieces[1::2]) - set(FIELDS)
        if unknown or "\x1f" in "".join(pieces[::2]):
            raise ValueError(f"{template} changes a per-recipient value (print it as it is): {unknown or ''}")
        made.append(Skeleton(pieces, escaped))
    return made[0], made[1]
