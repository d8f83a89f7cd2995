"""Push rows: recorded, then published to the push queue and marked sent (or, for a fired reminder, recorded
sent in the transaction that publishes them). The one place that does either."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from common.compact_json import json_compact
from common.lookups import AnyOf
from delivery import api as delivery_api
from delivery.api import QueuedPush, Refusals, batch_body, batch_key, push_queue_publisher
from reminders.api import Delivery, TransportError
from trainings import queries
from trainings.answers.links import answer_document, answer_json
from trainings.models import Push, PushStatus
from trainings.reminding.escalation import escalated
from trainings.reminding.fairness import interleaved
from trainings.reminding.family import Unit, document_of, family_units
from trainings.reminding.rendering import PushRow
from trainings.transitions import pushes_mark_sent

# The PushRow fields that are columns, in order (`rule_slug` and the last, `escalate`, are for the message).
_COLUMNS = tuple(name for name in PushRow._fields if name not in ("rule_slug", "escalate"))
Push._meta.get_field("id").register_lookup(AnyOf)  # `pk__any=[...]`: one array, not an IN list

# Rows per INSERT elsewhere than on PostgreSQL: 18 parameters each stays under SQLite's 32,766.
_INSERT_BATCH = 1000


def pushes_record(rows: Sequence[PushRow], *, published_at: datetime | None = None) -> dict[str, int]:
    """Insert these pending, held or skipped pushes, in this order; returns the ids of those inserted now,
    by key.

    A row whose key (or occurrence and recipient) is already there is left as it is: it comes from an earlier
    attempt of the same occurrence, or from a worker running it at the same time (PostgreSQL makes this
    insert wait for that one's transaction). Plain SQL rather than `bulk_create`: that one says neither
    which rows it inserted nor costs less per row than the whole rest of a push (bench row 6b). On PostgreSQL
    the rows travel as one JSON array parameter: psycopg merges parameters into the statement on the
    client, and splitting a statement of 17 placeholders a row cost more than encoding the rows.

    `published_at`: the pending rows go in as sent at that time, in their final state (one write a push,
    not an insert and then an update): the caller publishes them with `pushes_publish(recorded=...)` in
    the same transaction, which commits only once the broker has taken them, and which records again as
    pending those the broker refused.
    """
    if not rows:
        return {}
    if published_at is not None:
        rows = [row._replace(status=_SENT) if row.status == PushStatus.PENDING else row for row in rows]
    by_attname = {f.attname: f for f in Push._meta.concrete_fields}
    fields = [by_attname[name] for name in _COLUMNS]
    now = timezone.now()
    slug = PushRow._fields.index("rule_slug")
    inserted: dict[str, int] = {}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql = queries.pushes_insert_json(fields, [i + (i >= slug) for i in range(len(fields))])
            cursor.execute(
                sql, [now, published_at, json.dumps(rows, separators=(",", ":"), default=_JsonValues())]
            )
            inserted.update(cursor.fetchall())
            return inserted
        sent_at = connection.ops.adapt_datetimefield_value(published_at)
        for start in range(0, len(rows), _INSERT_BATCH):
            part = rows[start : start + _INSERT_BATCH]
            params: list[Any] = []
            for row in part:
                values = (*row[:slug], *row[slug + 1 : -1])
                params += [f.get_db_prep_save(v, connection) for f, v in zip(fields, values, strict=True)]
                params += [
                    connection.ops.adapt_datetimefield_value(now),
                    sent_at if row.status == _SENT else None,
                ]
            cursor.execute(queries.pushes_insert_values(fields, len(part)), params)
            inserted.update(cursor.fetchall())
    return inserted


_SENT = str(PushStatus.SENT)


class _JsonValues(dict[object, str]):
    """The PushRow values JSON has no type for, as the text PostgreSQL casts back (timestamps, UUIDs);
    each distinct one is written once (an occurrence's pushes share their instants and training)."""

    def __call__(self, value: object) -> str:
        text = self.get(value)
        if text is None:
            if isinstance(value, datetime):
                text = value.isoformat()
            elif isinstance(value, UUID):
                text = str(value)
            else:
                raise TypeError(f"{type(value).__name__} in a push row")
            self[value] = text
        return text


def push_message(row: PushRow) -> dict[str, object]:
    """The document published for a row not read back from the database: `Push.message()`'s keys in its
    order, then the push's `answer` (`answered`)."""
    return answered(_plain(row))


def answered(document: dict[str, object]) -> dict[str, object]:
    """A player's push document with its `answer` (trainings/answers/links.py signs its links for the
    push's player, or the guardian it goes to), last: what every published document of a reminder carries,
    so the gateway reads its links and signs none."""
    answer = _answer(document)
    if answer:
        document["answer"] = answer
    return document


def _answer(document: Mapping[str, object]) -> dict[str, Any]:
    guardian = document.get("guardian")
    return answer_document(player_id=int(str(document["player"])), training_id=str(document["training"]),
                           kind=str(document["kind"]),
                           guardian_id=None if guardian is None else int(str(guardian)))  # fmt: skip


def _plain(row: PushRow) -> dict[str, object]:
    return {
        "schema": "trainings.push/2",
        "idempotency_key": row.key,
        "player": row.player_id,
        **({"guardian": row.guardian_id} if row.guardian_id is not None else {}),
        "title": row.title,
        "body": row.body,
        "language": row.language,
        "training": str(row.training_id),
        "kind": row.kind,
        "rule": row.rule_slug,
        **({"offset": row.offset} if row.offset else {}),
        "fire_at": row.fire_at.isoformat(),
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        **({"escalate": True} if row.escalate else {}),
    }


class _Refused(Exception):
    """The broker did not take every message: the mark of all of them as sent is rolled back."""


def _publish_and_mark(
    pending: Sequence[_Pending],
    messages: Sequence[QueuedPush],
    recorded: Mapping[str, PushRow],
    members: Mapping[str, Sequence[str]],
) -> Refusals:
    """Publish these pushes' messages, and mark the pushes the broker took as sent; returns the refusals by
    push key (`members`: the push keys of each batch message, by its key).

    The pushes read from the database are marked while the broker commits its transaction, and the mark is
    committed once `commit-ok` says it did: the database and the broker work at the same time. A push not
    taken stays pending, so the retry publishes it; a crash before the mark commits leaves them all pending
    (published again: at least once, the gateway drops the second by its idempotency key), as a crash
    before the mark always did. The pushes in `recorded` (by key) were recorded sent in the caller's
    transaction, which commits after this: a refused one is recorded again, pending, in its place (nobody
    saw it sent), and a crash before that commit leaves no row, so the retry records and publishes it anew.
    """
    stored = [push for push in pending if push.key not in recorded]
    flight = push_queue_publisher().start(messages)
    try:
        with transaction.atomic():
            if stored:
                pushes_mark_sent(Push.objects.filter(pk__any=[push.pk for push in stored]))
            if flight.wait():
                raise _Refused
    except _Refused:
        refused = _per_push(flight.wait(), members)
        taken = [push.pk for push in stored if push.key not in refused]
        if taken:
            pushes_mark_sent(Push.objects.filter(pk__any=taken))
        again = [recorded[key] for key in refused if key in recorded]
        if again:
            Push.objects.filter(key__in=[row.key for row in again]).delete()
            pushes_record(sorted(again, key=lambda row: row.key))
    finally:
        flight.wait()  # a second wait returns the first outcome; the first gives the channel back
    return _per_push(flight.wait(), members)


def _per_push(refusals: Refusals, members: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The broker's refusals by message key, as refusals of each push a refused batch carried."""
    return {push: reason for key, reason in refusals.items() for push in members.get(key, (key,))}


def _messages(
    pending: Sequence[_Pending], by_key: Mapping[str, Delivery]
) -> tuple[list[QueuedPush], dict[str, list[str]]]:
    """The push queue's messages for these pushes, in this order: consecutive runs of up to
    TRAININGS_PUSH_MESSAGE_PUSHES in one batch message (a run of one is a plain push message), and the push
    keys of each batch by its key. A batch carries its first push's headers (job key, instant, attempt). A
    guardian's pushes of one minute go as one family document (reminding/family.py), its members' keys
    listed like a batch's."""
    size = settings.TRAININGS_PUSH_MESSAGE_PUSHES
    queue = settings.TRAININGS_PUSH_QUEUE
    messages: list[QueuedPush] = []
    members: dict[str, list[str]] = {}
    carried: dict[
        str, tuple[str, ...]
    ] = {}  # a family's document key: its members' (trainings/reminding/family.py)
    units: list[_Pending] = []
    for unit in family_units(pending, lambda push: document_of(push.message, push.body)):
        if isinstance(unit, Unit):
            carried[unit.lead.key] = unit.members
            unit = unit.lead._replace(message=None, body=unit.body)
        units.append(unit)
    for start in range(0, len(units), size):
        run = units[start : start + size]
        first = run[0]
        delivery = by_key[first.occurrence_key]
        if len(run) == 1:
            messages.append(QueuedPush(first.key, delivery.job_key, first.fire_at, delivery.attempt, queue,
                                        first.message, first.body))  # fmt: skip
            if first.key in carried:
                members[first.key] = list(carried[first.key])
            continue
        key = batch_key(first.key)
        members[key] = [member for push in run for member in carried.get(push.key, (push.key,))]
        body = batch_body([json_compact(push.message) if push.body is None else push.body for push in run])
        messages.append(QueuedPush(key, delivery.job_key, first.fire_at, delivery.attempt, queue, None,
                                    body))  # fmt: skip
    return messages, members


class _Bodies(dict[tuple[object, ...], bytes]):
    """The published JSON of pushes just built: `push_message(row)` encoded as `QueuedPush.json_body` would.

    The pushes of one occurrence for one language and zone differ only in their key and recipient (player,
    guardian), which come first, and their `answer`, last: what lies between is encoded once.
    """

    def __call__(self, row: PushRow) -> bytes:
        shared = (row.title, row.body, row.language, row.training_id, row.kind, row.rule_slug, row.offset,
                  row.fire_at, row.expires_at, row.escalate)  # fmt: skip
        rest = self.get(shared)
        if rest is None:
            document = _plain(row)
            for first in ("schema", "idempotency_key", "player", "guardian"):
                document.pop(first, None)
            rest = self[shared] = b"," + json_compact(document)[1:-1]
        recipient = b"%d" % row.player_id
        if row.guardian_id is not None:
            recipient += b',"guardian":%d' % row.guardian_id
        answer = answer_json(player_id=row.player_id, training_id=row.training_id, kind=row.kind,
                             guardian_id=row.guardian_id)  # fmt: skip
        tail = b',"answer":' + answer + b"}" if answer else b"}"
        return b"".join((_HEAD, json_compact(row.key), b',"player":', recipient, rest, tail))


_HEAD = b'{"schema":"trainings.push/2","idempotency_key":'


class _Pending(NamedTuple):
    pk: int
    key: str
    occurrence_key: str
    kind: str
    fire_at: datetime
    message: dict[str, object] | None  # read back from the database
    body: bytes | None = None  # built here
    guardian: int | None = None  # a push to this guardian of the player's (a family's member, maybe)


def pushes_publish(
    *, deliveries: Sequence[Delivery], recorded: Mapping[str, Sequence[tuple[int, PushRow]]] | None = None
) -> dict[int, TransportError]:
    """Publish the pending pushes of these occurrences in one AMQP transaction, many to a message
    (`_messages`); mark the accepted ones sent.

    `recorded`: the occurrences whose pending pushes the caller has just inserted, every one of them (by
    occurrence key, with their ids), recorded sent (`pushes_record(published_at=...)`) in the transaction
    the caller holds open around this call; those are published as they are. The other occurrences'
    pending pushes are read from the database.

    Returns a TransportError per occurrence (keyed by its id) that has a push the broker did not take.
    """
    by_key = {d.idempotency_key: d for d in deliveries}
    recorded = recorded or {}
    body = _Bodies()
    pending = [
        _Pending(pk, row.key, row.occurrence_key, row.kind, row.fire_at, None, body(row), row.guardian_id)
        for key in by_key
        for pk, row in recorded.get(key, ())
    ]
    unknown = [key for key in by_key if key not in recorded]
    if unknown:
        pending += [
            _Pending(
                push.pk,
                push.key,
                push.occurrence_key,
                push.kind,
                push.fire_at,
                answered(escalated(push)),
                None,
                push.guardian_id,
            )
            for push in Push.objects.filter(occurrence_key__in=unknown, status=PushStatus.PENDING)
            .select_related("rule")
            .order_by("pk")
        ]
    if not pending:
        return {}
    # By id (as recorded) within each reminder, round-robin across the reminders: a small team's pushes
    # are not queued behind a big team's (trainings/reminding/fairness.py).
    pending = interleaved(sorted(pending), lambda push: push.occurrence_key)
    messages, members = _messages(pending, by_key)
    rows = {row.key: row for key in by_key for _, row in recorded.get(key, ())}
    refused = _publish_and_mark(pending, messages, rows, members)
    delivery_api.pushes_queued(push.kind for push in pending if push.key not in refused)
    per_occurrence: dict[str, list[_Pending]] = {}
    for push in pending:
        per_occurrence.setdefault(push.occurrence_key, []).append(push)
    errors: dict[int, TransportError] = {}
    for key, pushes in per_occurrence.items():
        failed = [refused[push.key] for push in pushes if push.key in refused]
        if failed:
            errors[by_key[key].occurrence_id] = TransportError(
                f"{len(failed)} of {len(pushes)} pushes not published: {failed[0]}"
            )
    return errors
