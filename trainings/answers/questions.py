"""What an answer link asks, in its reader's language and zone: the question its GET shows and its email
carries ("Will you come to …?", or asked of a guardian about their player)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from django.utils import formats, translation

from common.i18n import spoken, translated
from trainings.answers.reading import LinkTarget
from trainings.models import render_template
from trainings.planning import kinds
from trainings.planning.offsets import is_time_zone


def answer_question(target: LinkTarget) -> tuple[str, str]:
    """(language, the question) in the reader's spoken language (common/i18n.py) and zone: the player's, or
    the guardian's, asked about the player ("Will Anna come to …?", the kind's `guardian_questions`)."""
    reader = target.reader
    language = spoken(reader.language)
    kind = kinds.of(target.link.kind)
    questions = kind.guardian_questions if target.guardianship else kind.questions
    training = target.training
    zone_name = reader.time_zone if is_time_zone(reader.time_zone) else training.time_zone
    english = questions.get("en")
    question = (
        translated(language, english)
        if english
        else f"{translated(language, kind.label)}: {{title}}, {{start_date}}."
    )
    return language, _question_rendered(
        question, language, training.title, training.start, zone_name, target.invitation.player.name
    )


@lru_cache(maxsize=4096)
def _question_rendered(
    question: str, language: str, title: str, start: datetime, zone_name: str, player: str
) -> str:
    """The question filled in: the same for every player of a training who reads the same language in the
    same zone, so it is formatted once (the localized date costs as much as recording an answer)."""
    local_start = start.astimezone(ZoneInfo(zone_name))
    with translation.override(language):
        values = {
            "title": title,
            "start_time": formats.time_format(local_start, "TIME_FORMAT"),
            "start_date": formats.date_format(local_start, "DATE_FORMAT"),
            "time_zone": zone_name,
            "player": player,
        }
    return render_template(question, values)
