"""The languages the service speaks (settings.LANGUAGES, catalogs in locale/) and texts in a reader's one.

A stored language the service does not speak ("pt-br", "xx") falls back: to its base language when that is
spoken ("fr-ca" -> "fr"), else to settings.LANGUAGE_CODE (English). Texts are translated once per
(language, text): `translation.override` costs more than the rest of a push's render, and a due minute
renders the same few texts for thousands of players (docs/development.md, "Languages").
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import translation


def spoken_languages() -> list[str]:
    """The codes a person may choose: the languages with a catalog (settings.LANGUAGES)."""
    return [code for code, _ in settings.LANGUAGES]


def language_choices() -> list[tuple[str, str]]:
    """(code, "Name (code)") of each spoken language, by name: the admin's and the API's choices."""
    return sorted(((code, f"{name} ({code})") for code, name in settings.LANGUAGES), key=lambda c: c[1])


@lru_cache(maxsize=256)
def spoken(language: str | None) -> str:
    """The spoken language for a stored or requested value: itself, its base, else the site default."""
    value = (language or "").strip().lower().replace("_", "-")
    codes = spoken_languages()
    for candidate in (value, value.split("-")[0]):
        if candidate in codes:
            return candidate
    return str(settings.LANGUAGE_CODE)


@lru_cache(maxsize=8192)
def translated(language: str, message: str, context: str = "") -> str:
    """`message` (a msgid, marked where it is written) in `language`; itself where no catalog has it."""
    with translation.override(language):
        return translation.pgettext(context, message) if context else translation.gettext(message)


def validate_spoken_language(value: str) -> None:
    """A person's language is one the service speaks (the API and the admin offer only those)."""
    if value not in spoken_languages():
        raise ValidationError(
            f"{value!r} is not a language this service speaks ({', '.join(spoken_languages())})."
        )
