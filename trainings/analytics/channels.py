"""Answers per channel: how the answers of a period came in (the notification's action, the email's link,
the app, a coach), per reminder kind, so an operator sees what escalation to email brings
(docs/escalation.md).

Read from the answers themselves, grouped in the database per training and source (a row per training and
channel, not per answer), over the period's local training days (each training's own zone, as the other
figures): questionnaire answers by their `source`, invitation responses by their `response_source`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Count, QuerySet

from trainings.analytics.figures import Scope
from trainings.models import AnswerSource, Invitation, InvitationStatus, QuestionnaireAnswer
from trainings.planning import kinds


@dataclass(frozen=True)
class ChannelFigures:
    kind: str
    channel: str  # an AnswerSource value
    answers: int

    @property
    def kind_label(self) -> str:
        return kinds.of(self.kind).label if self.kind in kinds.KINDS else self.kind

    @property
    def channel_label(self) -> str:
        return str(AnswerSource(self.channel).label) if self.channel in AnswerSource.values else self.channel


def _in_scope(queryset: QuerySet[Any], scope: Scope, since: date, until: date) -> QuerySet[Any]:
    """Trainings starting within a day of the period (the local day is decided per training below)."""
    low = datetime.combine(since - timedelta(days=1), time.min, UTC)
    high = datetime.combine(until + timedelta(days=2), time.min, UTC)
    queryset = queryset.filter(training__start__gte=low, training__start__lt=high)
    if scope.teams is not None:
        queryset = queryset.filter(training__team__in=[team.pk for team in scope.teams])
    return queryset


def answers_by_channel(
    *, scope: Scope, since: date, until: date, kind: str | None = None
) -> list[ChannelFigures]:
    """The answers given per kind and channel for trainings of the scope on [since, until] (local days)."""
    counts: Counter[tuple[str, str]] = Counter()
    columns = ("training__start", "training__time_zone")
    if kind is None or kind in {k.code for k in kinds.questionnaire_kinds()}:
        answers = _in_scope(QuestionnaireAnswer.objects.all(), scope, since, until)
        if kind:
            answers = answers.filter(phase=kind)
        rows = answers.values_list(*columns, "phase", "source").annotate(n=Count("pk")).order_by()
        for start, zone, phase, source, n in rows:
            if since <= start.astimezone(ZoneInfo(zone)).date() <= until:
                counts[phase, source] += n
    if kind is None or kind == kinds.INVITATION.code:
        invitations = _in_scope(Invitation.objects.all(), scope, since, until).filter(
            status__in=[InvitationStatus.ACCEPTED, InvitationStatus.DENIED]
        )
        rows = invitations.values_list(*columns, "response_source").annotate(n=Count("pk")).order_by()
        for start, zone, source, n in rows:
            if since <= start.astimezone(ZoneInfo(zone)).date() <= until:
                counts[kinds.INVITATION.code, source or AnswerSource.ADMIN] += n
    order = {code: i for i, code in enumerate(kinds.KINDS)}
    channels = {value: i for i, value in enumerate(AnswerSource.values)}
    return [
        ChannelFigures(k, channel, n)
        for (k, channel), n in sorted(  # kinds in the table's order, channels in AnswerSource's
            counts.items(), key=lambda item: (order.get(item[0][0], 99), channels.get(item[0][1], 99))
        )
    ]


def channels_data(rows: list[ChannelFigures]) -> list[dict[str, Any]]:
    """The API's `channels` rows."""
    return [
        {"kind": row.kind, "kind_label": row.kind_label, "channel": row.channel,
         "channel_label": row.channel_label, "answers": row.answers}
        for row in rows
    ]  # fmt: skip
