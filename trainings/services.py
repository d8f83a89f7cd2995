"""The trainings app's services in one import, for its views, admin, commands and tests.

Each concept has its own module: trainings.writes (trainings, responses, rules), trainings.scheduling
(a training's reminder jobs), trainings.firing (a reminder fires; remind now), trainings.publishing (pushes
to the queue), trainings.held (quiet hours), trainings.notices (moved and cancelled notices) and
trainings.access (the coaches' group).
Patch a name where it is used (its module), not here.
"""

from __future__ import annotations

from trainings.access import COACH_GROUP, coach_group_ensure
from trainings.firing import reminder_fire, reminders_fire
from trainings.held import (
    QUIET_RELEASE_HANDLER,
    held_pushes_overdue_check,
    push_expiry,
    quiet_release,
    quiet_release_key,
)
from trainings.notices import (
    CANCELLED_NOTICE_HANDLER,
    CANCELLED_TOLD,
    MOVED_NOTICE_HANDLER,
    cancelled_notice_key,
    moved_notice_key,
    training_cancelled_notice_schedule,
    training_cancelled_notify,
    training_moved_notice_schedule,
    training_moved_notify,
)
from trainings.preferences import preference_set
from trainings.publishing import pushes_publish
from trainings.remind_now import RemindResult, training_remind_now
from trainings.scheduling import HANDLER_NAME, JobKeyTaken, rule_reschedule_batch, training_reminders_schedule
from trainings.writes import (
    answer_record,
    invitation_respond,
    rule_delete,
    rule_reschedule_on_commit,
    rule_update,
    training_cancel,
    training_copy,
    training_create,
    training_delete,
    training_lock,
    training_members_invite,
    training_update,
)

__all__ = [
    "CANCELLED_NOTICE_HANDLER",
    "CANCELLED_TOLD",
    "COACH_GROUP",
    "HANDLER_NAME",
    "MOVED_NOTICE_HANDLER",
    "QUIET_RELEASE_HANDLER",
    "JobKeyTaken",
    "RemindResult",
    "answer_record",
    "cancelled_notice_key",
    "coach_group_ensure",
    "held_pushes_overdue_check",
    "invitation_respond",
    "moved_notice_key",
    "preference_set",
    "push_expiry",
    "pushes_publish",
    "quiet_release",
    "quiet_release_key",
    "reminder_fire",
    "reminders_fire",
    "rule_delete",
    "rule_reschedule_batch",
    "rule_reschedule_on_commit",
    "rule_update",
    "training_cancel",
    "training_cancelled_notice_schedule",
    "training_cancelled_notify",
    "training_copy",
    "training_create",
    "training_delete",
    "training_lock",
    "training_members_invite",
    "training_moved_notice_schedule",
    "training_moved_notify",
    "training_remind_now",
    "training_reminders_schedule",
    "training_update",
]
