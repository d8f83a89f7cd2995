"""Reading the summaries for a period and the teams a user may see: the figures per rule offset, the answers
nobody was reminded for, and the players. Bounded reads: a team's rows or the every-team rows, over at
most `MAX_DAYS` days, each on its unique index's (team, day) or (day) prefix."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import QuerySet, Sum
from django.utils import timezone

from trainings.analytics.attribution import OffsetTally, PlayerTally, answered_by, median_band
from trainings.analytics.summary import REFRESH_EVERY, local_day, offset_order, rules_last_offset
from trainings.models import OffsetDay, PlayerDay, Push, PushStatus, SummaryMark, Team, Training
from trainings.planning import kinds
from trainings.planning.offsets import Offset, OffsetError

MAX_DAYS = 366
# The player list reads each team's rows: it needs a team once a user sees more teams than this.
PLAYER_LIST_TEAMS = 20
# A chronic non-responder: asked at least this often, and answering only after the last reminder or
# never at least this share of the time.
CHRONIC_MIN_ASKED = 3
CHRONIC_SHARE = 0.5


def share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class Scope:
    """The teams figures are about; `teams` None: every team (the every-team rows)."""

    teams: tuple[Team, ...] | None

    @property
    def label(self) -> str:
        if self.teams is None:
            return "all teams"
        return ", ".join(team.name for team in self.teams) or "no team"

    def rows(self, model: type[OffsetDay] | type[PlayerDay], since: date, until: date) -> QuerySet[Any]:
        queryset: QuerySet[Any] = model.objects.filter(day__range=(since, until))
        if self.teams is None:
            return queryset.filter(team=None)
        return queryset.filter(team__in=[team.pk for team in self.teams])


@dataclass
class OffsetFigures:
    """One rule offset's reminders over the period (rule and offset "": the answers nobody was reminded
    for). Rates are of the reminders reached: only a received reminder can be answered."""

    kind: str
    rule: str
    offset: str
    last: bool  # the rule's last offset
    figures: OffsetTally = field(default_factory=OffsetTally)

    @property
    def kind_label(self) -> str:
        return kinds.of(self.kind).label if self.kind in kinds.KINDS else self.kind

    @property
    def offset_words(self) -> str:
        """ "90 min", "3 d": the offset as people read it."""
        try:
            return Offset.parse(self.offset).human()
        except OffsetError:
            return self.offset

    @property
    def reached_rate(self) -> float | None:
        return share(self.figures.reached, self.figures.sent)

    @property
    def answer_rate(self) -> float | None:
        return share(self.figures.answered, self.figures.reached)

    @property
    def within_15_rate(self) -> float | None:
        return share(self.figures.within_15, self.figures.reached)

    @property
    def within_60_rate(self) -> float | None:
        return share(self.figures.within_60, self.figures.reached)

    @property
    def in_window_rate(self) -> float | None:
        return share(self.figures.in_window, self.figures.reached)

    @property
    def median(self) -> tuple[int, int | None] | None:
        return median_band(self.figures.bands)

    def curve(self) -> list[tuple[int, float]]:
        """(minutes, share of the reached reminders answered within them)."""
        reached = self.figures.reached
        return [(minutes, n / reached) for minutes, n in answered_by(self.figures.bands)] if reached else []


@dataclass(frozen=True)
class Effectiveness:
    offsets: list[OffsetFigures]  # per kind, rule, offset in reminding order
    unreminded: list[OffsetFigures]  # per kind: answers no reminder had reached before them


def effectiveness(*, scope: Scope, since: date, until: date, kind: str | None = None) -> Effectiveness:
    """Every rule offset's figures over [since, until] (local training days) for the scope."""
    rows = scope.rows(OffsetDay, since, until)
    if kind:
        rows = rows.filter(kind=kind)
    summed: dict[tuple[str, str, str], OffsetTally] = {}
    columns = ("kind", "rule", "offset", "sent", "reached", "answered", "within_15", "within_60",
               "in_window", "bands")  # fmt: skip
    for k, rule, offset, sent, reached, answered, within_15, within_60, in_window, bands in rows.values_list(
        *columns
    ):
        bands_counted = Counter({int(b): n for b, n in bands.items()})
        tally = OffsetTally(sent, reached, answered, within_15, within_60, in_window, bands_counted)
        summed.setdefault((k, rule, offset), OffsetTally()).add(tally)
    last = {slug: offset for slug, offset in rules_last_offset().values()}
    kind_order = {code: i for i, code in enumerate(kinds.KINDS)}
    ordered = sorted(
        summed.items(),
        key=lambda item: (kind_order.get(item[0][0], 99), item[0][1], offset_order(item[0][0], item[0][2])),
    )
    figures = [
        OffsetFigures(k, rule, offset, bool(rule) and last.get(rule) == offset, tally)
        for (k, rule, offset), tally in ordered
    ]
    return Effectiveness([f for f in figures if f.rule or f.offset], [f for f in figures if not f.rule])


@dataclass(frozen=True)
class Uncounted:
    """Reminders of the period went out after the summaries' last refresh: the figures do not hold them
    yet. `next_refresh` is when the periodic refresh is due (in the past: it is late)."""

    next_refresh: datetime

    @property
    def overdue(self) -> bool:
        return self.next_refresh < timezone.now()


def uncounted(
    *, scope: Scope, since: date, until: date, kind: str | None = None, now: datetime | None = None
) -> Uncounted | None:
    """Whether a reminder of the scope's trainings of the period was published since the last refresh, so an
    empty page means "not counted yet" rather than "none went out". Reads the pushes due since then (at most
    the refresh interval of them, on push_fire_at_idx) and their trainings."""
    now = now or timezone.now()
    mark = SummaryMark.objects.filter(id=1).values_list("refreshed_until", flat=True).first()
    pushes = Push.objects.filter(fire_at__lte=now, status=PushStatus.SENT)
    if mark is not None:
        pushes = pushes.filter(fire_at__gt=mark)
    if scope.teams is not None:
        pushes = pushes.filter(training__team__in=[team.pk for team in scope.teams])
    if kind:
        pushes = pushes.filter(kind=kind)
    # A training's local day is within a day of its UTC start: the range narrows, local_day decides.
    window = (datetime.combine(since, time(), tzinfo=UTC) - timedelta(days=1),
              datetime.combine(until, time(), tzinfo=UTC) + timedelta(days=2))  # fmt: skip
    trainings = Training.objects.filter(pk__in=pushes.values("training_id"), start__range=window).only(
        "start", "time_zone"
    )
    if not any(since <= (local_day(t) or date.min) <= until for t in trainings[:1000]):
        return None
    return Uncounted(next_refresh=mark + REFRESH_EVERY if mark else now)  # never run yet: due now


@dataclass(frozen=True)
class PlayerFigures:
    player: int
    name: str
    figures: PlayerTally

    @property
    def late_or_never(self) -> int:
        return self.figures.after_last + self.figures.never

    @property
    def late_or_never_rate(self) -> float | None:
        return share(self.late_or_never, self.figures.asked)

    @property
    def chronic(self) -> bool:
        rate = self.late_or_never_rate
        return self.figures.asked >= CHRONIC_MIN_ASKED and rate is not None and rate >= CHRONIC_SHARE


class TooManyTeams(ValueError):
    """The player list was asked for more teams than it reads at once."""


def players(*, scope: Scope, since: date, until: date, kind: str | None = None) -> list[PlayerFigures]:
    """Each player's answering over the period, the least responsive first (one grouped query)."""
    if scope.teams is None:  # every team: fine while there are few
        scope = Scope(tuple(Team.objects.order_by("pk")[: PLAYER_LIST_TEAMS + 1]))
    if len(scope.teams or ()) > PLAYER_LIST_TEAMS:
        raise TooManyTeams(f"choose a team: the player list covers at most {PLAYER_LIST_TEAMS} teams at once")
    rows = scope.rows(PlayerDay, since, until)
    if kind:
        rows = rows.filter(kind=kind)
    grouped = rows.values("player_id", "player__name").annotate(
        before=Sum("before_reminder"), after=Sum("after_reminder"), late=Sum("after_last"), never=Sum("never")
    )
    out = [
        PlayerFigures(r["player_id"], r["player__name"], PlayerTally(r["before"], r["after"], r["late"],
                                                                     r["never"]))
        for r in grouped
    ]  # fmt: skip
    return sorted(out, key=lambda p: (-(p.late_or_never_rate or 0), -p.figures.asked, p.name))
