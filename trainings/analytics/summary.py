"""Keeping the daily summaries (`OffsetDay`, `PlayerDay`) up to date.

The unit of work is a team's day (the trainings of one team starting on one local day): its rows are
computed again from the pushes, their device sends and the answers, and replace the old ones; the
every-team rows of that day move by the difference. A periodic task (`summaries_refresh`) finds the team
days something happened to since its last run: pushes due or released from quiet hours, answers and
invitation responses given, each through its own index. `summaries_rebuild` recomputes a range of days
(after a deploy that adds the summaries, or a repair). Days older than the pushes' retention are never
recomputed: their pushes are gone, and the summary is all that is left of them.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from common.fields import in_instant_range
from delivery.models import PushSend, SendStatus
from trainings.analytics.attribution import Answer, OffsetTally, PlayerTally, Reminder, tally
from trainings.models import (
    Invitation,
    InvitationStatus,
    OffsetDay,
    PlayerDay,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    SummaryMark,
    Training,
)
from trainings.planning import kinds
from trainings.planning.offsets import Offset, OffsetError

logger = logging.getLogger(__name__)

TeamDay = tuple[int, date]
# Sends are recorded within TRAININGS_GATEWAY_MAX_AGE_SECONDS of publication (later ones go stale): a
# refresh looks back that far before its previous run, and a little more.
SENDS_SETTLE = timedelta(minutes=5)
# How often the periodic refresh runs (its beat row, made by migration 0020, says every 5 minutes).
REFRESH_EVERY = timedelta(minutes=5)
CHUNK = 200  # team days per transaction
MOVED_AHEAD_DAYS = 62  # how far ahead a moved training's old day may have been summarised (invitations)


def local_day(training: Training) -> date | None:
    """The training's day in its own zone. None for a stored start outside the accepted range of instants
    (common/fields.py: a row from before it was enforced), which the summaries leave out, logged: its
    local day, or the UTC window around it, may be past what a date holds."""
    if not in_instant_range(training.start):
        logger.warning("analytics: training %s starts at %s, outside the accepted range; left out",
                       training.pk, training.start.isoformat())  # fmt: skip
        return None
    return training.start.astimezone(ZoneInfo(training.time_zone)).date()


def _team_days(trainings: Iterable[Training]) -> set[TeamDay]:
    return {(t.team_id, day) for t in trainings if (day := local_day(t)) is not None}


def _chunks(items: Iterable[TeamDay], size: int) -> Iterator[list[TeamDay]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _oldest_kept(today: date) -> date:
    """The first day whose pushes are all still kept (a day's trainings may start up to a day after it)."""
    return today - timedelta(days=settings.TRAININGS_PUSH_RETENTION_DAYS - 1)


def _trainings_of(pairs: list[TeamDay]) -> list[Training]:
    """The trainings of these team days (a local day spans UTC times from 14 h before to 12 h after it)."""
    by_day: dict[date, set[int]] = defaultdict(set)
    for team, day in pairs:
        by_day[day].add(team)
    condition = Q(pk__in=[])
    for day, teams in by_day.items():
        midnight = datetime.combine(day, time(), tzinfo=UTC)
        condition |= Q(
            team_id__in=sorted(teams),
            start__gte=midnight - timedelta(days=1),
            start__lt=midnight + timedelta(days=2),
        )
    found = Training.objects.filter(condition).only("id", "team_id", "start", "end", "time_zone")
    wanted = set(pairs)
    return [t for t in found if (t.team_id, local_day(t)) in wanted]


def offset_order(kind: str, offset: str) -> float:
    """Where an offset's reminders come in a rule's sequence: earliest instant first."""
    sign = kinds.of(kind).sign if kind in kinds.KINDS else -1
    try:
        return sign * Offset.parse(offset).approximate().total_seconds()
    except OffsetError:
        return float("inf")


def rules_last_offset() -> dict[int, tuple[str, str]]:
    """Every rule's slug and its last offset (the latest instant it reminds at), by rule id."""
    out = {}
    for rule in ReminderRule.objects.all():
        offsets = [str(o) for o in rule.parsed_offsets()]
        last = max(offsets, key=lambda o: offset_order(rule.kind, o), default="")
        out[rule.pk] = (rule.slug, last)
    return out


def _first_accepted(keys: list[str]) -> dict[str, datetime]:
    """When a device or an inbox first accepted each push, on the sends' (push_key, device) index."""
    found: dict[str, datetime] = {}
    for start in range(0, len(keys), 5000):
        rows = (
            PushSend.objects.filter(push_key__in=keys[start : start + 5000], status=SendStatus.ACCEPTED)
            .values("push_key")
            .annotate(first=Min("recorded_at"))
            .values_list("push_key", "first")
        )
        found.update(rows)
    return found


def _reminders(trainings: list[Training]) -> list[Reminder]:
    """One reminder per player and rule offset: its pushes to the player and to their guardians (an answer
    by any of them is the player's) count once, reached when the first of them was."""
    answered_kinds = [kind.code for kind in kinds.rule_kinds()]
    rows = list(
        Push.objects.filter(training__in=trainings, status=PushStatus.SENT, kind__in=answered_kinds)
        .values_list("key", "training_id", "player_id", "kind", "rule_id", "offset")
    )  # fmt: skip
    accepted = _first_accepted([row[0] for row in rows])
    reached: dict[tuple[Any, ...], datetime | None] = {}
    for key, *reminder in rows:
        at, first = accepted.get(key), reached.get(tuple(reminder))
        reached[tuple(reminder)] = min(at, first) if at and first else at or first
    rules = rules_last_offset()
    out = []
    for (training, player, kind, rule_id, offset), at in reached.items():
        slug, last = rules.get(rule_id, ("", ""))
        out.append(Reminder(training, player, kind, slug, offset, at, offset == last != ""))
    return out


def _answers(trainings: list[Training]) -> list[Answer]:
    """Questionnaire answers and invitation responses, each as the answer of the kinds awaiting it."""
    phases = {k.answer.phase: k.code for k in kinds.rule_kinds() if isinstance(k.answer, kinds.Questionnaire)}
    responses = [k.code for k in kinds.rule_kinds() if isinstance(k.answer, kinds.Response)]
    out = [
        Answer(training, player, phases[phase], at)
        for training, player, phase, at in QuestionnaireAnswer.objects.filter(
            training__in=trainings, phase__in=list(phases)
        ).values_list("training_id", "player_id", "phase", "answered_at")
    ]
    if responses:
        given = Invitation.objects.filter(training__in=trainings, responded_at__isnull=False).exclude(
            status=InvitationStatus.PENDING
        )
        for training, player, at in given.values_list("training_id", "player_id", "responded_at"):
            out += [Answer(training, player, code, at) for code in responses if at is not None]
    return out


def _tallies(
    trainings: list[Training],
) -> dict[TeamDay, tuple[dict[Any, OffsetTally], dict[Any, PlayerTally]]]:
    """Each team day's figures, from its trainings' reminders and answers (three queries in all)."""
    if not trainings:
        return {}
    pair_of = {t.pk: (t.team_id, day) for t in trainings if (day := local_day(t)) is not None}
    closes = {(t.pk, kind.code): kind.closes(t) for t in trainings for kind in kinds.rule_kinds()}
    reminders: dict[TeamDay, list[Reminder]] = defaultdict(list)
    answers: dict[TeamDay, list[Answer]] = defaultdict(list)
    for reminder in _reminders(trainings):
        reminders[pair_of[reminder.training]].append(reminder)
    for answer in _answers(trainings):
        answers[pair_of[answer.training]].append(answer)
    return {pair: tally(reminders[pair], answers[pair], closes) for pair in set(pair_of.values())}


def _every_team_move(day_deltas: dict[tuple[date, str, str, str], OffsetTally], sign: int) -> None:
    """Add (sign 1) or take away (-1) team rows' figures to or from the every-team rows of their day."""
    if not day_deltas:
        return
    days = {key[0] for key in day_deltas}
    rows = {(r.day, r.kind, r.rule, r.offset): r for r in OffsetDay.objects.filter(team=None, day__in=days)}
    changed: list[OffsetDay] = []
    new: list[OffsetDay] = []
    gone: list[int] = []
    for key, delta in day_deltas.items():
        row = rows.get(key) or OffsetDay(day=key[0], team=None, kind=key[1], rule=key[2], offset=key[3])
        bands = Counter({int(band): count for band, count in row.bands.items()})
        for name in ("sent", "reached", "answered", "within_15", "within_60", "in_window"):
            setattr(row, name, getattr(row, name) + sign * getattr(delta, name))
        for band, count in delta.bands.items():
            bands[band] += sign * count
        row.bands = {str(band): count for band, count in sorted(bands.items()) if count}
        if row.pk is None:
            new.append(row)
        elif not (row.sent or row.answered):
            gone.append(row.pk)
        else:
            changed.append(row)
    fields = ["sent", "reached", "answered", "within_15", "within_60", "in_window", "bands"]
    OffsetDay.objects.bulk_update(changed, fields, batch_size=500)
    OffsetDay.objects.bulk_create(new, batch_size=500)
    OffsetDay.objects.filter(pk__in=gone).delete()


def _old_figures(pairs: list[TeamDay]) -> dict[tuple[date, str, str, str], OffsetTally]:
    """The team rows about to be replaced, summed per every-team key."""
    old: dict[tuple[date, str, str, str], OffsetTally] = defaultdict(OffsetTally)
    for row in OffsetDay.objects.filter(_pairs_condition(pairs)):
        bands = Counter({int(band): count for band, count in row.bands.items()})
        old[(row.day, row.kind, row.rule, row.offset)].add(
            OffsetTally(row.sent, row.reached, row.answered, row.within_15, row.within_60, row.in_window,
                        bands)
        )  # fmt: skip
    return old


def _pairs_condition(pairs: list[TeamDay]) -> Q:
    by_day: dict[date, list[int]] = defaultdict(list)
    for team, day in pairs:
        by_day[day].append(team)
    condition = Q(pk__in=[])
    for day, teams in by_day.items():
        condition |= Q(day=day, team_id__in=sorted(teams))
    return condition


def team_days_refresh(pairs: Iterable[TeamDay], *, today: date | None = None) -> int:
    """Recompute these team days' summaries (those older than the pushes' retention are left alone).
    Returns how many team days were recomputed."""
    oldest = _oldest_kept(today or timezone.localdate())
    done = 0
    for chunk in _chunks(sorted({p for p in pairs if p[1] >= oldest}), CHUNK):
        try:
            _team_days_chunk_refresh(chunk)
        except Exception:  # one chunk's rows must not hold back the others, nor the next refresh
            logger.exception("analytics: team days %s not recomputed", chunk[:5])
            continue
        done += len(chunk)
    return done


def _team_days_chunk_refresh(chunk: list[TeamDay]) -> None:
    """One chunk of team days, in one transaction: the old rows out, the recomputed ones in."""
    with transaction.atomic():
        SummaryMark.objects.get_or_create(id=1)
        SummaryMark.objects.select_for_update().get(id=1)  # one refresh at a time
        tallies = _tallies(_trainings_of(chunk))
        _every_team_move(_old_figures(chunk), -1)
        OffsetDay.objects.filter(_pairs_condition(chunk)).delete()
        PlayerDay.objects.filter(_pairs_condition(chunk)).delete()
        offset_rows: list[OffsetDay] = []
        player_rows: list[PlayerDay] = []
        new: dict[tuple[date, str, str, str], OffsetTally] = defaultdict(OffsetTally)
        for (team, day), (offsets, players) in tallies.items():
            for (kind, rule, offset), figures in offsets.items():
                offset_rows.append(_offset_row(day, team, kind, rule, offset, figures))
                new[(day, kind, rule, offset)].add(figures)
            player_rows += [
                PlayerDay(day=day, team_id=team, player_id=player, kind=kind,
                          before_reminder=p.before_reminder, after_reminder=p.after_reminder,
                          after_last=p.after_last, never=p.never)
                for (player, kind), p in players.items()
                if p.asked
            ]  # fmt: skip
        OffsetDay.objects.bulk_create(offset_rows, batch_size=1000)
        PlayerDay.objects.bulk_create(player_rows, batch_size=1000)
        _every_team_move(new, 1)


def _offset_row(day: date, team: int, kind: str, rule: str, offset: str, figures: OffsetTally) -> OffsetDay:
    return OffsetDay(
        day=day, team_id=team, kind=kind, rule=rule, offset=offset, sent=figures.sent,
        reached=figures.reached, answered=figures.answered, within_15=figures.within_15,
        within_60=figures.within_60, in_window=figures.in_window,
        bands={str(band): count for band, count in sorted(figures.bands.items()) if count},
    )  # fmt: skip


def touched_team_days(since: datetime, until: datetime) -> set[TeamDay]:
    """The team days of trainings something happened to in (since, until]: pushes due or released from
    quiet hours, answers and invitation responses given, and the summarised days of teams whose trainings
    were changed (a move leaves a day behind). Each through its own index."""
    ids: set[Any] = set()
    window = {"gt": since, "lte": until}
    for queryset, column in (
        (Push.objects, "fire_at"),
        (Push.objects.filter(release_at__isnull=False), "release_at"),
        (QuestionnaireAnswer.objects, "answered_at"),
        (Invitation.objects.filter(responded_at__isnull=False), "responded_at"),
    ):
        filters = {f"{column}__{op}": value for op, value in window.items()}
        ids.update(queryset.filter(**filters).values_list("training_id", flat=True).distinct())
    trainings = Training.objects.filter(pk__in=ids).only("team_id", "start", "time_zone")
    pairs = _team_days(trainings)
    # A training moved (or edited) lately may have left its old day: that team's summarised days come again,
    # so a day no training is on any more loses its rows. Trainings change far less often than they remind.
    edited = Training.objects.filter(updated_at__gt=since, updated_at__lte=until)
    edited_pairs = _team_days(edited.only("team_id", "start", "time_zone"))
    pairs |= edited_pairs
    changed = {team for team, _ in edited_pairs}
    if changed:
        around = (timezone.localdate(until) - timedelta(days=settings.TRAININGS_PUSH_RETENTION_DAYS),
                  timezone.localdate(until) + timedelta(days=MOVED_AHEAD_DAYS))  # fmt: skip
        pairs |= set(
            OffsetDay.objects.filter(team_id__in=changed, day__range=around).values_list("team_id", "day")
        )
    return pairs


def summaries_refresh(*, now: datetime | None = None) -> int:
    """Bring the summaries up to `now`: the team days touched since the previous run (looking back a
    little further, for device sends recorded after their push was due). Returns team days recomputed."""
    now = now or timezone.now()
    mark, _ = SummaryMark.objects.get_or_create(id=1)
    # The first run looks back a day: the days before are `summaries_rebuild`'s (manage.py analytics_rebuild),
    # never one periodic run's, which would hold the next ones back for as long as it took.
    start = mark.refreshed_until or now - timedelta(days=1)
    lookback = timedelta(seconds=settings.TRAININGS_GATEWAY_MAX_AGE_SECONDS) + SENDS_SETTLE
    pairs = touched_team_days(start - lookback, now)
    done = team_days_refresh(pairs, today=timezone.localdate(now))
    SummaryMark.objects.filter(id=1).update(refreshed_until=now)
    if done:
        logger.info("analytics: %d team day(s) recomputed", done)
    return done


def summaries_rebuild(*, since: date, until: date, today: date | None = None) -> int:
    """Recompute every team day from `since` to `until` (inclusive) that still has its pushes."""
    oldest = _oldest_kept(today or timezone.localdate())
    if since < oldest:
        raise ValueError(f"days before {oldest} have no pushes left (TRAININGS_PUSH_RETENTION_DAYS)")
    first = datetime.combine(since, time(), tzinfo=UTC) - timedelta(days=1)
    last = datetime.combine(until, time(), tzinfo=UTC) + timedelta(days=2)
    pairs = _team_days(
        Training.objects.filter(start__gte=first, start__lt=last).only("team_id", "start", "time_zone")
    )
    pairs |= set(
        OffsetDay.objects.filter(team__isnull=False, day__range=(since, until)).values_list("team_id", "day")
    )
    return team_days_refresh({p for p in pairs if since <= p[1] <= until}, today=today)
