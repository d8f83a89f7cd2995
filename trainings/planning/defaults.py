"""Seed 000's reminder rules and their English templates (seeded by migration 0002): each kind's default
rule (the kinds themselves are trainings/planning/kinds.py).

The English texts are msgids too (`gettext_noop`): a reader whose language has no template of the rule's
reads the English one translated from the catalogs (locale/) while it is the shipped text, and as typed once
a coach or operator changed it (trainings/reminding/rendering.py, `template_texts`; docs/development.md,
"Languages").

Takes the model classes so the migration can pass its historical models and tests can re-seed after a
transactional test flushed the tables.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop as _

RULES: list[dict[str, Any]] = [
    {
        "slug": "pre-questionnaire",
        "kind": "PRE",
        "offsets": ["90m", "75m", "60m", "45m", "30m", "15m"],
        "templates": {
            "en": (
                _("Pre-training questionnaire"),
                _("{title} starts at {start_time}: please answer the pre-training questionnaire."),
            ),
        },
    },
    {
        "slug": "post-questionnaire",
        "kind": "POST",
        "offsets": [f"{minutes}m" for minutes in range(15, 181, 15)],
        "templates": {
            "en": (
                _("Post-training questionnaire"),
                _("How did {title} go? Please answer the post-training questionnaire."),
            ),
        },
    },
    {
        "slug": "invitation",
        "kind": "INVITATION",
        "offsets": ["3d", "2d", "1d", "6h"],
        "templates": {
            "en": (
                _("Will you come to {title}?"),
                _("{team}: {title} on {start_date} at {start_time} ({location}). Please accept or decline."),
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
            "en": (_("{team}: who still owes what"), "{team} {title} {start_time}"),
        },
    },
    {
        "slug": "coach-morning",
        "kind": "SUMMARY",
        "offsets": ["12h"],
        "templates": {
            "en": (_("{team}: today's trainings"), "{title} {start_time}"),
        },
    },
    {
        "slug": "coach-late-decline",
        "kind": "DECLINED",
        "offsets": ["3h"],
        "templates": {
            "en": (_("{team}: a player declined"), "{title} {start_time}"),
        },
    },
]
# Every default rule: migration 0002 seeded the players' (`RULES`), 0024 the coaches'.
ALL_RULES = RULES + COACH_RULES
# The shipped English texts: a template still saying one of these is translated for its reader.
SHIPPED_TEXTS = frozenset(text for spec in ALL_RULES for text in spec["templates"]["en"])


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
