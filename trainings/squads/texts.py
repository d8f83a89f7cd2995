"""What a pending player's invitation reminder says once the squad is full: not "will you come?" as if a
place were open, but that the squad is full and that accepting puts them on the waiting list (declining
still tells the coach they will not come). Chosen over stopping the reminders: a full squad loses players
to late declines, and a waiting list already there fills the places at once (docs/squads.md).

The texts are msgids, one template per spoken language from the catalogs, in place of the rule's own for
as long as the squad is full; the rule's templates say the usual thing otherwise.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop as _

from common.i18n import spoken_languages, translated
from trainings.models import Invitation, InvitationStatus, ReminderRule, ReminderTemplate, Training
from trainings.planning import kinds

FULL_TITLE = _("{title}: the squad is full")
FULL_BODY = _(
    "{team}: {title} on {start_date} at {start_time} is full. Accept to join the waiting list: you are "
    "told at once if a place opens up. Or decline."
)


def squad_full(training: Training) -> bool:
    """Whether `max_players` have accepted (no maximum: never)."""
    if training.max_players is None:
        return False
    accepted = Invitation.objects.filter(training_id=training.pk, status=InvitationStatus.ACCEPTED).count()
    return accepted >= training.max_players


def squad_templates(rule: ReminderRule, training: Training) -> list[ReminderTemplate]:
    """The templates a reminder of `rule` for `training` renders: the full-squad ones for an invitation
    reminder of a full squad, the rule's own otherwise."""
    if rule.kind != kinds.INVITATION.code or not squad_full(training):
        return list(rule.templates.all())
    return [
        ReminderTemplate(
            rule=rule,
            language=language,
            title=translated(language, FULL_TITLE),
            body=translated(language, FULL_BODY),
        )
        for language in spoken_languages()
    ]
