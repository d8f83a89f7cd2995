"""Seed 000's reminder rules and their English and French templates (seeded by migration 0002): each
kind's default rule (the kinds themselves are trainings/kinds.py).

Takes the model classes so the migration can pass its historical models and tests can re-seed after a
transactional test flushed the tables.
"""

from __future__ import annotations

from typing import Any

RULES: list[dict[str, Any]] = [
    {
        "slug": "pre-questionnaire",
        "kind": "PRE",
        "offsets": ["90m", "75m", "60m", "45m", "30m", "15m"],
        "templates": {
            "en": (
                "Pre-training questionnaire",
                "{title} starts at {start_time}: please answer the pre-training questionnaire.",
            ),
            "fr": (
                "Questionnaire avant l'entraînement",
                "{title} commence à {start_time} : merci de répondre au questionnaire d'avant séance.",
            ),
        },
    },
    {
        "slug": "post-questionnaire",
        "kind": "POST",
        "offsets": [f"{minutes}m" for minutes in range(15, 181, 15)],
        "templates": {
            "en": (
                "Post-training questionnaire",
                "How did {title} go? Please answer the post-training questionnaire.",
            ),
            "fr": (
                "Questionnaire après l'entraînement",
                "Comment s'est passé {title} ? Merci de répondre au questionnaire d'après séance.",
            ),
        },
    },
    {
        "slug": "invitation",
        "kind": "INVITATION",
        "offsets": ["3d", "2d", "1d", "6h"],
        "templates": {
            "en": (
                "Will you come to {title}?",
                "{team}: {title} on {start_date} at {start_time} ({location}). Please accept or decline.",
            ),
            "fr": (
                "Serez-vous à {title} ?",
                "{team} : {title} le {start_date} à {start_time} ({location}). "
                "Merci d'accepter ou de refuser.",
            ),
        },
    },
]


# The coaches' kinds: when they fire is each team's setting (Team.digest_before, digest_morning_at,
# decline_alert_within; none by default), so their offsets are unused. The title is the message's; the body
# heads each training's line, which trainings/digest/texts.py completes with who still owes what.
COACH_RULES: list[dict[str, Any]] = [
    {
        "slug": "coach-digest",
        "kind": "DIGEST",
        "offsets": ["2h"],
        "templates": {
            "en": ("{team}: who still owes what", "{team} {title} {start_time}"),
            "fr": ("{team} : qui doit encore répondre", "{team} {title} {start_time}"),
        },
    },
    {
        "slug": "coach-morning",
        "kind": "SUMMARY",
        "offsets": ["12h"],
        "templates": {
            "en": ("{team}: today's trainings", "{title} {start_time}"),
            "fr": ("{team} : les entraînements du jour", "{title} {start_time}"),
        },
    },
    {
        "slug": "coach-late-decline",
        "kind": "DECLINED",
        "offsets": ["3h"],
        "templates": {
            "en": ("{team}: a player declined", "{title} {start_time}"),
            "fr": ("{team} : un joueur s'est désisté", "{title} {start_time}"),
        },
    },
]
# Every default rule: migration 0002 seeded the players' (`RULES`), 0024 the coaches'.
ALL_RULES = RULES + COACH_RULES


def rules_seed(rule_model: Any, template_model: Any, specs: list[dict[str, Any]] = ALL_RULES) -> None:
    """Create the default rules and templates that are missing; never overwrite an operator's edits."""
    for spec in specs:
        rule, _ = rule_model.objects.get_or_create(
            slug=spec["slug"], defaults={"kind": spec["kind"], "offsets": spec["offsets"], "active": True}
        )
        for language, (title, body) in spec["templates"].items():
            template_model.objects.get_or_create(
                rule=rule, language=language, defaults={"title": title, "body": body}
            )
