"""Rendering a rule's message for one player: their language, their time zone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import formats, translation

from reminders.transports import Delivery
from trainings.models import Player, Push, ReminderTemplate, Training, render_template
from trainings.offsets import Offset, is_time_zone

_FALLBACK_TITLE = "{title}"
_FALLBACK_BODY = "Reminder: {title} starts {start_date} at {start_time}."


@dataclass(frozen=True)
class Rendered:
    language: str
    title: str
    body: str


def pick_template(templates: Iterable[ReminderTemplate], language: str) -> ReminderTemplate | None:
    """The player's language, then its base language ("pt-br" -> "pt"), then the site default, then any."""
    by_language = {t.language.lower(): t for t in templates}
    for candidate in (language.lower(), language.lower().split("-")[0], settings.LANGUAGE_CODE.lower()):
        if candidate in by_language:
            return by_language[candidate]
    return min(by_language.items())[1] if by_language else None


def push_render(
    *, templates: Iterable[ReminderTemplate], training: Training, player: Player, offset: Offset
) -> Rendered:
    template = pick_template(templates, player.language or settings.LANGUAGE_CODE)
    language = template.language if template else settings.LANGUAGE_CODE
    zone_name = player.time_zone if is_time_zone(player.time_zone) else training.time_zone
    local_start = training.start.astimezone(ZoneInfo(zone_name))
    with translation.override(language):
        values = {
            "title": training.title,
            "team": training.team.name,
            "location": training.location,
            "start_time": formats.time_format(local_start, "TIME_FORMAT"),
            "start_date": formats.date_format(local_start, "DATE_FORMAT"),
            "time_zone": zone_name,
            "offset": offset.human(),
        }
    title = template.title if template else _FALLBACK_TITLE
    body = template.body if template else _FALLBACK_BODY
    return Rendered(
        language=language, title=render_template(title, values), body=render_template(body, values)
    )


_MOVED = {
    "en": ("Training moved: {title}", "{title} now starts on {start_date} at {start_time} ({time_zone})."),
    "fr": (
        "Entraînement déplacé : {title}",
        "{title} commence désormais le {start_date} à {start_time} ({time_zone}).",
    ),
}


def moved_render(*, training: Training, player: Player) -> Rendered:
    """The "training moved" push, in the player's language (English otherwise) and zone."""
    language = player.language if player.language in _MOVED else "en"
    zone_name = player.time_zone if is_time_zone(player.time_zone) else training.time_zone
    local_start = training.start.astimezone(ZoneInfo(zone_name))
    with translation.override(language):
        values = {
            "title": training.title,
            "start_time": formats.time_format(local_start, "TIME_FORMAT"),
            "start_date": formats.date_format(local_start, "DATE_FORMAT"),
            "time_zone": zone_name,
        }
    title, body = _MOVED[language]
    return Rendered(
        language=language, title=render_template(title, values), body=render_template(body, values)
    )


def push_for(
    delivery: Delivery, *, training: Training, player: Player, rendered: Rendered, **fields: Any
) -> Push:
    """A player's push for a fired occurrence, keyed by occurrence and player so a re-fire adds none."""
    return Push(
        key=f"{delivery.idempotency_key}.{player.pk}",
        occurrence_key=delivery.idempotency_key,
        occurrence_id=delivery.occurrence_id,
        training=training,
        player=player,
        language=rendered.language,
        title=rendered.title,
        body=rendered.body,
        fire_at=delivery.fire_at,
        **fields,
    )
