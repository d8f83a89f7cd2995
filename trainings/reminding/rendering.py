"""Rendering a rule's message for one player: their language, their time zone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any, NamedTuple, Protocol
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import formats, translation
from django.utils.translation import gettext_noop

from common.i18n import spoken, translated
from reminders.api import Delivery
from trainings.models import PushStatus, ReminderRule, ReminderTemplate, Training, render_template
from trainings.planning import kinds
from trainings.planning.defaults import SHIPPED_TEXTS
from trainings.planning.offsets import Offset, is_time_zone, offset_between

_FALLBACK_TITLE = "{title}"
_FALLBACK_BODY = gettext_noop("Reminder: {title} starts {start_date} at {start_time}.")


class Addressee(Protocol):
    """Who a push is for: a `Player`, or a `trainings.reminding.recipients.Recipient` read for a due
    minute."""

    @property
    def pk(self) -> Any: ...

    @property
    def language(self) -> str: ...

    @property
    def time_zone(self) -> str: ...

    @property
    def quiet_start(self) -> time | None: ...

    @property
    def quiet_end(self) -> time | None: ...


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


def template_texts(template: ReminderTemplate | None, language: str) -> tuple[str, str, str]:
    """(language, title, body) of a rule's message for a reader of `language` (a spoken one).

    A template in the reader's language is shown as typed. Another one (the English) is translated from
    the catalogs while its texts are the shipped ones (trainings/planning/defaults.py), and shown as typed, in
    its own language, once someone wrote their own: a coach's words are data, not msgids.
    """
    if template is None:
        return language, _FALLBACK_TITLE, translated(language, _FALLBACK_BODY)
    if template.language.lower() == language or not (
        template.title in SHIPPED_TEXTS and template.body in SHIPPED_TEXTS
    ):
        return template.language, template.title, template.body
    return language, translated(language, template.title), translated(language, template.body)


# A start's local time and date texts by (start, zone, language): the trainings of a due minute mostly
# start at the same time, and formatting in a language is most of a render.
StartTexts = dict[tuple[datetime, str, str], tuple[str, str]]


def _start_texts(start: datetime, zone_name: str, language: str, known: StartTexts | None) -> tuple[str, str]:
    texts = known.get((start, zone_name, language)) if known is not None else None
    if texts is None:
        local_start = start.astimezone(ZoneInfo(zone_name))
        with translation.override(language):
            texts = (
                formats.time_format(local_start, "TIME_FORMAT"),
                formats.date_format(local_start, "DATE_FORMAT"),
            )
        if known is not None:
            known[start, zone_name, language] = texts
    return texts


def push_render(
    *,
    templates: Iterable[ReminderTemplate],
    training: Training,
    player: Addressee,
    offset: Offset,
    start_texts: StartTexts | None = None,
) -> Rendered:
    wanted = spoken(player.language)
    language, title, body = template_texts(pick_template(templates, wanted), wanted)
    zone_name = player.time_zone if is_time_zone(player.time_zone) else training.time_zone
    start_time, start_date = _start_texts(training.start, zone_name, language, start_texts)
    values = {
        "title": training.title,
        "team": training.team.name,
        "location": training.location,
        "start_time": start_time,
        "start_date": start_date,
        "time_zone": zone_name,
        "offset": offset.human(),
    }
    return Rendered(
        language=language, title=render_template(title, values), body=render_template(body, values)
    )


def offset_at(*, training: Training, kind: str, now: datetime) -> Offset:
    """The `{offset}` of a push sent at `now`: how far the rule's anchor (the start, or the end for POST)
    is from it (`offset_between`)."""
    return offset_between(kinds.of(kind).anchor_of(training), now)


def notice_render(*, kind: kinds.Kind, training: Training, player: Addressee) -> Rendered:
    """A notice of this kind (the training moved), in the player's language (English otherwise) and zone:
    the kind's English texts are msgids, translated from the catalogs."""
    language = spoken(player.language)
    zone_name = player.time_zone if is_time_zone(player.time_zone) else training.time_zone
    local_start = training.start.astimezone(ZoneInfo(zone_name))
    with translation.override(language):
        values = {
            "title": training.title,
            "start_time": formats.time_format(local_start, "TIME_FORMAT"),
            "start_date": formats.date_format(local_start, "DATE_FORMAT"),
            "time_zone": zone_name,
        }
    title, body = (translated(language, text) for text in kind.notice["en"])
    return Rendered(
        language=language, title=render_template(title, values), body=render_template(body, values)
    )


class PushRow(NamedTuple):
    """A `Push` row to insert (trainings.reminding.publishing.pushes_record): a tuple, since a due minute
    makes thousands and a model instance costs more than the rest of the push."""

    key: str
    occurrence_key: str
    occurrence_id: int | None
    training_id: UUID
    player_id: int
    guardian_id: int | None  # a guardian of the player's, when the push goes to them
    rule_id: int | None
    rule_slug: str | None  # for the message, not a column
    kind: str
    offset: str
    language: str
    title: str
    body: str
    fire_at: datetime
    expires_at: datetime | None
    status: str
    release_at: datetime | None
    status_reason: str


def push_for(
    delivery: Delivery,
    *,
    training: Training,
    player: Addressee,
    rendered: Rendered,
    kind: str,
    expires_at: datetime | None,
    rule: ReminderRule | None = None,
    offset: str = "",
    status: str = PushStatus.PENDING,
    release_at: datetime | None = None,
    status_reason: str = "",
    guardian_id: int | None = None,
) -> PushRow:
    """A player's push for a fired occurrence (or their guardian's: `guardian_id`, the `player`'s language
    and zone then being the guardian's), keyed by occurrence and recipient so a re-fire adds none."""
    recipient = f"{player.pk}" if guardian_id is None else f"{player.pk}.g{guardian_id}"
    return PushRow(
        f"{delivery.idempotency_key}.{recipient}",
        delivery.idempotency_key,
        delivery.occurrence_id,
        training.pk,
        player.pk,
        guardian_id,
        rule.pk if rule is not None else None,
        rule.slug if rule is not None else None,
        kind,
        offset,
        rendered.language,
        rendered.title,
        rendered.body,
        delivery.fire_at,
        expires_at,
        str(status),  # the value, not the enum member
        release_at,
        status_reason,
    )
