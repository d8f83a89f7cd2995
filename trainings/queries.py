"""Every raw SQL statement of the trainings app, one named constant (or builder, where the columns come
from a model) per purpose, with the comment above it saying what it does, and for the answer link's
statements the row type that names their columns (no reader indexes a row by number); the ORM does the
rest.

Table and column names come from the models; every value is a bound parameter. tests/test_sql_homes.py
fails when another module of the app executes SQL text of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Field

from trainings.models import (
    Invitation,
    Membership,
    Player,
    Push,
    Questionnaire,
    QuestionnaireAnswer,
    Team,
    Training,
)

_INVITATION = Invitation._meta.db_table
_MEMBERSHIP = Membership._meta.db_table

# Invite the team's active members to a training (training id, PENDING, team id): the rows `bulk_create`
# would write, in player order, without reading the members first.
MEMBERS_INVITE = (
    f"INSERT INTO {_INVITATION} (training_id, player_id, status, responded_at) "  # noqa: S608
    f"SELECT %s, player_id, %s, NULL FROM {_MEMBERSHIP} "
    "WHERE team_id = %s AND active ORDER BY player_id"
)

# The id of the history row written by the same statement (its CTE `history`), selected beside the rules.
HISTORY_ID = "(SELECT history_id FROM history)"


def training_insert_reading_rules(ctes: Sequence[str], rules: str) -> str:
    """Write the training, its history row and its invitations (`ctes`, each `name AS (INSERT ...)`) and
    read the reminder rules (`rules`, the ORM's SELECT), in one statement."""
    return f"WITH {', '.join(ctes)} {rules}"


def _pushes_insert_head(fields: Sequence[Field]) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column or f.attname) for f in fields)
    return f"INSERT INTO {quote(Push._meta.db_table)} ({columns}, created_at, sent_at)"


def _pushes_insert_tail() -> str:
    quote = connection.ops.quote_name
    return f" ON CONFLICT DO NOTHING RETURNING {quote('key')}, {quote('id')}"


def pushes_insert_json(fields: Sequence[Field], positions: Sequence[int]) -> str:
    """Insert pushes (these columns, then created_at: the first parameter, and sent_at: the second, for
    the rows whose status is `sent`) from one JSON array of rows (the third), in their order, skipping any
    already there (by key, or occurrence and player); returns (key, id) of those inserted. `positions`:
    where each column's value is in a row. PostgreSQL."""
    picks = ", ".join(
        f"(r->>{at})::{f.cast_db_type(connection)}" for at, f in zip(positions, fields, strict=True)
    )
    status = next(at for at, f in zip(positions, fields, strict=True) if f.attname == "status")
    sent_at = f"CASE WHEN r->>{status} = 'sent' THEN %s::timestamptz END"
    elements = "jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(r, n)"
    head, tail = _pushes_insert_head(fields), _pushes_insert_tail()
    return f"{head} SELECT {picks}, %s, {sent_at} FROM {elements} ORDER BY n{tail}"  # noqa: S608


def pushes_insert_values(fields: Sequence[Field], rows: int) -> str:
    """The same for `rows` rows of VALUES (each row: its columns, then created_at and sent_at); any
    database."""
    row = f"({', '.join(['%s'] * (len(fields) + 2))})"
    return f"{_pushes_insert_head(fields)} VALUES {', '.join([row] * rows)}{_pushes_insert_tail()}"


# An answer link's target (player, training), the columns every link statement starts with: the training
# with its team and, when the player is on its list, their invitation and the player; then whether the
# player is an active member of the team (a link answers only for one: an ex-member keeps their invitation
# row and their old links). Each column named once, as LinkTargetRow's fields.
_TARGET_COLUMNS = """t.id AS training_id, t.team_id, t.title, t.start, t."end", t.time_zone AS training_zone,
       t.location, t.cancelled, tm.name AS team_name, tm.time_zone AS team_zone, tm.decline_alert_within,
       i.id AS invitation_id, i.status, i.responded_at, i.response_source, i.responded_by_id,
       p.id AS player_id, p.name AS player_name, p.language, p.time_zone AS player_zone,
       m.id IS NOT NULL AS member"""
_TARGET_FROM = f"""
  FROM {Training._meta.db_table} t
  JOIN {Team._meta.db_table} tm ON tm.id = t.team_id
  LEFT JOIN {Invitation._meta.db_table} i ON i.training_id = t.id AND i.player_id = %(player)s
  LEFT JOIN {Player._meta.db_table} p ON p.id = i.player_id
  LEFT JOIN {_MEMBERSHIP} m ON m.team_id = t.team_id AND m.player_id = %(player)s AND m.active"""


# An answer link's target: the columns above for one training and player.
ANSWER_LINK_TARGET = f"SELECT {_TARGET_COLUMNS}{_TARGET_FROM}\n WHERE t.id = %(training)s"


@dataclass(frozen=True, slots=True)
class LinkTargetRow:
    """A row of ANSWER_LINK_TARGET, column by column (the invitation's and the player's None when the
    player is not on the list); tests/trainings/test_answer_links_rows.py holds both to the same names."""

    training_id: UUID
    team_id: int
    title: str
    start: datetime
    end: datetime
    training_zone: str
    location: str
    cancelled: bool
    team_name: str
    team_zone: str
    decline_alert_within: str
    invitation_id: int | None
    status: str | None
    responded_at: datetime | None
    response_source: str | None
    responded_by_id: int | None
    player_id: int | None
    player_name: str | None
    language: str | None
    player_zone: str | None
    member: bool


# A followed link's POST in one statement (a player's own link): the target as ANSWER_LINK_TARGET reads it,
# whether the link may still be answered (`open`: the training not cancelled, the player on its list and an
# active member of its team, and now before the kind's close, the training's start or end plus a span),
# and, only when it may, the answer recorded unless it is the one already there. Then whether it changed
# and the recorded row (`new_*`, NULL when unchanged). The close is checked here and again in Python from
# the same row and instant, which says why a link that may not be answered is refused.
_OPEN = """(NOT t.cancelled AND i.id IS NOT NULL AND m.id IS NOT NULL
            AND %(now)s < (CASE WHEN %(from_end)s THEN t."end" ELSE t.start END) + %(span)s) AS open"""


@dataclass(frozen=True, slots=True)
class LinkOpenRow(LinkTargetRow):
    """The target's columns, then whether the link may still be answered (`_OPEN`)."""

    open: bool


@dataclass(frozen=True, slots=True)
class LinkResponseRow(LinkOpenRow):
    """A row of LINK_RESPONSE_RECORD: the target, `open`, then the response written now, if it was."""

    changed: bool
    new_status: str | None
    new_responded_at: datetime | None
    new_response_source: str | None
    new_responded_by_id: int | None


# An invitation link's POST: its response recorded in one statement, as said above; not on a training
# with a squad size, whose responses are decided under its lock (trainings/squads/places.py: the caller
# goes there).
LINK_RESPONSE_RECORD = f"""
WITH target AS (SELECT {_TARGET_COLUMNS}, {_OPEN}{_TARGET_FROM}
     WHERE t.id = %(training)s
),
changed AS (
    UPDATE {Invitation._meta.db_table} i SET status = %(status)s, responded_at = %(now)s,
           response_source = %(source)s, responded_by_id = NULL
      FROM target
     WHERE i.id = target.invitation_id AND target.open AND i.status <> %(status)s
       AND NOT EXISTS (SELECT 1 FROM {Training._meta.db_table} s WHERE s.id = target.training_id
                        AND (s.min_players IS NOT NULL OR s.max_players IS NOT NULL))
 RETURNING i.status, i.responded_at, i.response_source, i.responded_by_id
)
SELECT target.*, c.status IS NOT NULL AS changed, c.status AS new_status,
       c.responded_at AS new_responded_at, c.response_source AS new_response_source,
       c.responded_by_id AS new_responded_by_id
  FROM target LEFT JOIN changed c ON true
"""  # noqa: S608 - table names from the models; the values are bound parameters


@dataclass(frozen=True, slots=True)
class LinkAnswersRow(LinkOpenRow):
    """A row of LINK_ANSWERS_RECORD: the target, `open`, the answers stored before (None: none yet), the
    revision of the team's questionnaire, then the answers written now, if they were."""

    answers: Any
    answered_at: datetime | None
    source: str | None
    answered_by_id: int | None
    revision: int
    changed: bool
    new_answers: Any
    new_answered_at: datetime | None
    new_source: str | None
    new_answered_by_id: int | None


# The same for a questionnaire link: the target with the answers already stored and the revision of the
# team's questionnaire (0: the built-in questions), and the answers recorded (inserted, or updated when
# they differ) only when the link may still be answered and the answers were checked against this team's
# questionnaire at this revision (%(team)s, %(revision)s: trainings/answers/questionnaires.py).
LINK_ANSWERS_RECORD = f"""
WITH target AS (SELECT {_TARGET_COLUMNS}, {_OPEN},
           q.answers, q.answered_at, q.source, q.answered_by_id, COALESCE(qn.revision, 0) AS revision
      {_TARGET_FROM}
      LEFT JOIN {QuestionnaireAnswer._meta.db_table} q
        ON q.training_id = t.id AND q.player_id = %(player)s AND q.phase = %(phase)s
      LEFT JOIN {Questionnaire._meta.db_table} qn ON qn.team_id = t.team_id AND qn.phase = %(phase)s
     WHERE t.id = %(training)s
),
changed AS (
    INSERT INTO {QuestionnaireAnswer._meta.db_table} AS a (training_id, player_id, phase, answers,
                answered_at, source, answered_by_id)
    SELECT target.training_id, target.player_id, %(phase)s, %(answers)s::jsonb, %(now)s, %(source)s,
           NULL::bigint
      FROM target WHERE target.open AND target.team_id = %(team)s AND target.revision = %(revision)s
    ON CONFLICT (training_id, player_id, phase) DO UPDATE
       SET answers = EXCLUDED.answers, answered_at = EXCLUDED.answered_at, source = EXCLUDED.source,
           answered_by_id = EXCLUDED.answered_by_id
     WHERE a.answers IS DISTINCT FROM EXCLUDED.answers
 RETURNING answers, answered_at, source, answered_by_id
)
SELECT target.*, c.answered_at IS NOT NULL AS changed, c.answers AS new_answers,
       c.answered_at AS new_answered_at, c.source AS new_source, c.answered_by_id AS new_answered_by_id
  FROM target LEFT JOIN changed c ON true
"""  # noqa: S608 - table names from the models; the values are bound parameters

# Record an invitation's response (and the guardian who gave it, or NULL) unless it is the one already
# there; returns (changed, the row as it now stands) either way (an unchanged answer keeps its time, source
# and giver: the link is idempotent).
INVITATION_ANSWER_RECORD = f"""
WITH changed AS (
    UPDATE {Invitation._meta.db_table} SET status = %(status)s, responded_at = %(now)s,
           response_source = %(source)s, responded_by_id = %(by)s
     WHERE id = %(id)s AND status <> %(status)s
 RETURNING status, responded_at, response_source, responded_by_id
)
SELECT true, status, responded_at, response_source, responded_by_id FROM changed
 UNION ALL
SELECT false, status, responded_at, response_source, responded_by_id FROM {Invitation._meta.db_table}
 WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM changed)
"""  # noqa: S608 - the table name from the model; the values are bound parameters

# Record a questionnaire's answers (and the guardian who gave them, or NULL) unless they are the ones
# already there; returns (changed, the row as it
# now stands) either way.
QUESTIONNAIRE_ANSWER_RECORD = f"""
WITH changed AS (
    INSERT INTO {QuestionnaireAnswer._meta.db_table} AS a (training_id, player_id, phase, answers,
                answered_at, source, answered_by_id)
    VALUES (%(training)s, %(player)s, %(phase)s, %(answers)s::jsonb, %(now)s, %(source)s, %(by)s)
    ON CONFLICT (training_id, player_id, phase) DO UPDATE
       SET answers = EXCLUDED.answers, answered_at = EXCLUDED.answered_at, source = EXCLUDED.source,
           answered_by_id = EXCLUDED.answered_by_id
     WHERE a.answers IS DISTINCT FROM EXCLUDED.answers
 RETURNING answers, answered_at, source, answered_by_id
)
SELECT true, answers, answered_at, source, answered_by_id FROM changed
 UNION ALL
SELECT false, answers, answered_at, source, answered_by_id FROM {QuestionnaireAnswer._meta.db_table}
 WHERE training_id = %(training)s AND player_id = %(player)s AND phase = %(phase)s
   AND NOT EXISTS (SELECT 1 FROM changed)
"""  # noqa: S608 - the table name from the model; the values are bound parameters
