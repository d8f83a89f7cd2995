"""A training's reminder jobs: one engine job per (training, rule), holding the instants the rule wants.

The job is found through its `TrainingJob` row (never by its key), and its occurrences are replaced by
`job_upsert`: kept when the instant is still wanted (so their idempotency keys survive a move), cancelled
when not, added when new. The payload names the training and the rule only; who gets a push is decided
when it fires (trainings.reminding.firing).
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, OperationalError, connections, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from common.db_retry import is_transient, transient_retry
from reminders.api import Callback, JobSpec, job_upsert, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType, Job, Occurrence
from trainings.models import ReminderRule, Training, TrainingJob
from trainings.planning import kinds
from trainings.planning.offsets import MAX_OFFSET
from trainings.selectors import job_key

logger = logging.getLogger(__name__)


HANDLER_NAME = "trainings.reminder"


def training_reminders_schedule(
    *,
    training: Training,
    rules: Iterable[ReminderRule] | None = None,
    now: datetime | None = None,
    new: bool = False,
) -> int:
    """Make each rule's job hold exactly the future instants it wants for this training.

    A cancelled training or an inactive rule wants none, so its pending occurrences are cancelled.
    Instants at or before `now` are not scheduled, but for the one an invitation sends at the training's
    creation when it was created after all of its instants (`Kind.at_creation`): wanted when
    the training is saved new (`new`), and kept afterwards (a move, a rescan) only while its job holds it,
    so a move never sends one that was not sent at creation, nor sends it twice.
    Returns how many instants are now wanted.
    The training's jobs are the ones linked to it (`TrainingJob`); a new one is created under a key no
    other job holds, so a row someone else made under the usual key is never taken over. A linked job is
    replaced by `job_upsert`; the new ones are inserted together (one statement for the jobs and their
    links on PostgreSQL, one COPY for their occurrences). `new`: the training was saved in this
    transaction, so it has no linked job yet (one query saved).
    """
    now = now or timezone.now()
    wanted_by_rule: dict[ReminderRule, list[datetime]] = {}
    linked: dict[int, str] = {}
    if not new:
        linked = dict(TrainingJob.objects.filter(training=training).values_list("rule_id", "job__key"))
    for rule in _rules_all() if rules is None else rules:
        wanted_by_rule[rule] = []
        if rule.active and not training.cancelled:
            instants = [instant for instant, _ in rule.instants_for(training)]
            wanted_by_rule[rule] = [instant for instant in instants if instant > now]
            kind = kinds.of(rule.kind)
            creation = kind.at_creation(training, instants) if training.start > now else None
            if creation is not None and (new or _holds(linked, rule, creation[0])):
                wanted_by_rule[rule].insert(0, creation[0])  # past: due at once (fired: stays as it is)
    for rule, wanted in wanted_by_rule.items():
        key = linked.get(rule.pk)
        if key is not None:
            job_upsert(key=key, schedules=wanted, **_job_settings(training, rule))
    fresh = [rule for rule, wanted in wanted_by_rule.items() if wanted and rule.pk not in linked]
    _jobs_link(training, fresh, wanted_by_rule, check_keys=not new)
    return sum(len(wanted) for wanted in wanted_by_rule.values())


def _holds(linked: dict[int, str], rule: ReminderRule, instant: datetime) -> bool:
    """Whether the rule's job for this training has an occurrence at `instant`, in any status."""
    key = linked.get(rule.pk)
    return key is not None and Occurrence.objects.filter(job__key=key, fire_at=instant).exists()


@cache
def rules_query(extra: str = "") -> tuple[str, list[str], list[tuple[int, list[Any], Any]]]:
    """The SQL, field names and value converters of `ReminderRule.objects.all()`, worked out once.

    `extra`: an SQL expression selected after the fields (a caller's own column, unconverted).
    """
    rules = ReminderRule.objects.all()
    if extra:
        rules = rules.annotate(extra=RawSQL(extra, ()))  # noqa: S611 - a constant of the caller's
    sql, params = rules.query.sql_with_params()
    if params:
        raise AssertionError("all() binds no value")
    # all() selects the concrete fields in their order; each read through its own converters, as the
    # ORM converts them (the backend's, then the field's `from_db_value`).
    connection = connections[DEFAULT_DB_ALIAS]
    fields = ReminderRule._meta.concrete_fields
    converters = []
    for pos, model_field in enumerate(fields):
        column = model_field.get_col(ReminderRule._meta.db_table)
        convs = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if convs:
            converters.append((pos, convs, column))
    return sql, [f.attname for f in fields], converters


def rules_from_rows(rows: Iterable[tuple[Any, ...]], extra: str = "") -> list[ReminderRule]:
    """The rules of rows read with `rules_query(extra)`'s SQL, as `all()` makes them."""
    _, names, converters = rules_query(extra)
    connection = connections[DEFAULT_DB_ALIAS]
    rules = []
    for row in rows:
        values = list(row[: len(names)])
        for pos, convs, col in converters:
            for convert in convs:
                values[pos] = convert(values[pos], col, connection)
        rules.append(ReminderRule.from_db(DEFAULT_DB_ALIAS, names, values))
    return rules


def _rules_all() -> list[ReminderRule]:
    """`ReminderRule.objects.all()` without compiling the query for every training (that cost more CPU
    than its round trip)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(rules_query()[0])
        return rules_from_rows(cursor.fetchall())


def _job_settings(training: Training, rule: ReminderRule) -> dict[str, Any]:
    return {
        "callback": Callback(
            type=CallbackType.HANDLER,
            target=HANDLER_NAME,
            payload={"training": str(training.pk), "rule": rule.pk},
        ),
        "priority": settings.TRAININGS_REMINDER_PRIORITY,
        "deadline_seconds": settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
    }


def _jobs_link(
    training: Training,
    fresh: list[ReminderRule],
    wanted_by_rule: dict[ReminderRule, list[datetime]],
    *,
    check_keys: bool,
) -> None:
    """Create the jobs of the rules with no linked job yet, and link them to the training.

    Their keys are checked first (`_keys_taken`); a row inserted under one of them after that check makes
    the INSERT fail, and JobKeyTaken rolls the caller's transaction back: a job is never adopted. A training
    saved in this transaction skips the check: nobody can hold a key naming its fresh random id, and the
    INSERT's unique key still refuses one if they did.
    """
    if not fresh:
        return
    keys = [job_key(training_id=training.pk, rule=rule) for rule in fresh]
    taken = _keys_taken(keys) if check_keys else set()
    specs = [
        JobSpec(key=_key_free(key, taken), schedules=wanted_by_rule[rule], **_job_settings(training, rule))
        for rule, key in zip(fresh, keys, strict=True)
    ]
    links = [TrainingJob(training=training, rule=rule) for rule in fresh]
    try:
        jobs_insert(specs=specs, links=links)  # the links go in the jobs' statement
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "table_name", None) != Job._meta.db_table:
            raise  # not a key someone holds: some other row broke a constraint
        raise JobKeyTaken(str(exc)) from exc
    scan_kick_on_commit(min(instant for spec in specs for instant in spec.schedules))


class JobKeyTaken(Exception):
    """A new training job's key was inserted by someone else meanwhile; the caller's transaction must roll
    back (the API refuses that namespace, so only a concurrent admin or shell insert gets here)."""


def _keys_taken(keys: list[str]) -> set[str]:
    return set(Job.objects.filter(key__in=keys).values_list("key", flat=True)) if keys else set()


def _key_free(key: str, taken: set[str]) -> str:
    """`key`, or when a job this training does not own holds it (made before the namespace was reserved,
    or in the admin), `key` with a random suffix."""
    if key not in taken:
        return key
    logger.warning("job key %s is held by a job the trainings app does not own; using another", key)
    return f"{key}.{secrets.token_hex(4)}"


@dataclass(frozen=True)
class RescheduleBatch:
    training_ids: list[uuid.UUID]
    cursor: uuid.UUID | None  # where the next batch starts; None: this one is the last


def rule_reschedule_batch_ids(
    *,
    rule_id: int,
    after: uuid.UUID | None = None,
    batch_size: int | None = None,
    now: datetime | None = None,
) -> RescheduleBatch:
    """The ids of the next batch of trainings a rule may still reach, read without a lock.

    Reach: any training that has not ended more than the longest allowed offset ago (the rule's old offsets
    may have left pending occurrences that far out).
    """
    now = now or timezone.now()
    size = batch_size or settings.TRAININGS_RESCHEDULE_BATCH
    if not ReminderRule.objects.filter(pk=rule_id).exists():
        return RescheduleBatch(training_ids=[], cursor=None)  # deleted: nothing left to reschedule
    trainings = Training.objects.filter(end__gt=now - MAX_OFFSET).order_by("pk")
    if after is not None:
        trainings = trainings.filter(pk__gt=after)
    ids = list(trainings.values_list("pk", flat=True)[:size])
    return RescheduleBatch(training_ids=ids, cursor=ids[-1] if len(ids) == size else None)


def rule_reschedule_trainings(
    *, rule_id: int, training_ids: Iterable[uuid.UUID], now: datetime | None = None
) -> RescheduleOutcome:
    """Reschedule one rule's jobs of these trainings, in one transaction, run again on a lock conflict.

    The rows are locked in id order (the lock order of trainings.planning.writes.training_lock), which
    serialises us with `training_update` on each of them; one deleted meanwhile is not there to lock. A
    training whose reminders cannot be worked out (a stored row no rule can place) is logged and left as it
    is, in a savepoint of its own, and the others go on. A deadlock or serialization failure aborts the
    whole transaction: it runs again (common/db_retry.py), then raises for the task's own retry.
    """
    ids = sorted(training_ids)

    def work() -> RescheduleOutcome:
        outcome = RescheduleOutcome()
        rule = ReminderRule.objects.filter(pk=rule_id).first()
        if rule is None or not ids:
            return outcome
        moment = now or timezone.now()
        with transaction.atomic():
            for training in Training.objects.filter(pk__in=ids).order_by("pk").select_for_update():
                try:
                    with transaction.atomic():
                        training_reminders_schedule(training=training, rules=[rule], now=moment)
                except OperationalError as exc:
                    if is_transient(exc):
                        raise  # the whole batch runs again
                    outcome.failed.append(training.pk)
                    logger.exception("rule %s: training %s not rescheduled", rule.slug, training.pk)
                except Exception:
                    outcome.failed.append(training.pk)
                    logger.exception("rule %s: training %s not rescheduled", rule.slug, training.pk)
                else:
                    outcome.done += 1
        return outcome

    return transient_retry(work, operation="trainings.rule_reschedule")


@dataclass
class RescheduleOutcome:
    done: int = 0
    failed: list[uuid.UUID] = field(default_factory=list)  # logged, left as they were


def rule_reschedule_batch(
    *,
    rule_id: int,
    after: uuid.UUID | None = None,
    batch_size: int | None = None,
    now: datetime | None = None,
) -> uuid.UUID | None:
    """Reschedule one batch of the trainings a rule may still reach; returns the cursor for the next one."""
    batch = rule_reschedule_batch_ids(rule_id=rule_id, after=after, batch_size=batch_size, now=now)
    rule_reschedule_trainings(rule_id=rule_id, training_ids=batch.training_ids, now=now)
    return batch.cursor


def reminder_payload_ids(payload: Any) -> tuple[uuid.UUID, int] | None:
    """The (training, rule) a reminder job's payload names, or None when it is not one of ours."""
    if not isinstance(payload, dict):
        return None
    try:
        return uuid.UUID(str(payload.get("training"))), int(payload.get("rule"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
